"""Hostile targets: every one yields a clear failure within the configured bounds, never a hang.

Real sockets on 127.0.0.1 (``hostile_servers``); the suite's client with small limits,
then the checks. Bad command-line input ends the plugin with one ``ERROR:`` line.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_servers import (
    MIB,
    Behaviour,
    RawServer,
    Servers,
    endless_plain,
    endless_sse,
    headers_then_stall,
    huge_body,
    redirect_to,
    reset_mid_body,
    respond,
    silent,
    slow_endless_sse,
)
from support import API_KEY, MODEL, Targets, case, failed, judge

from conformance.front.plugin import SUITE_DIR
from conformance.judging.document.spec import load_spec
from conformance.judging.verdict.results import Finding
from conformance.judging.wire.exchange import Exchange
from conformance.run.client import Client, Limits

# Bounds wide enough that a head or an event 50 ms apart never meets them on a loaded CI
# machine (0.5 s did: a late head read as a first-byte time-out, not the gap under test).
LIMITS = Limits(ttfb=1.0, gap=1.0, total=2.5, max_bytes=1 * MIB, max_events=1000)
# Scheduling noise on a loaded CI machine, on top of the bound that should end the wait.
SLACK = 1.0


@pytest.fixture
def serve() -> Iterator[Servers]:
    with Servers() as servers:
        yield servers


def send(url: str, *, stream: bool = False, limits: Limits = LIMITS) -> Exchange:
    client = Client(url, api_key=API_KEY, limits=limits)
    try:
        return client.send(case(stream=stream) if stream else case())
    finally:
        client.close()


def judged(ex: Exchange) -> dict[str, Finding]:
    return judge(load_spec("aihubmix"), ex)


# (behaviour, streamed request, failing requirement, words in its message, bound in seconds)
SCENARIOS: list[tuple[str, Behaviour, bool, str, str, float]] = [
    ("never answers", silent, False, "HTTP-COMPLETE", "time to first byte exceeded 1 s", 1.0),
    ("head, then stall", headers_then_stall, False, "HTTP-COMPLETE", "gap between reads", 1.0),
    ("endless SSE", endless_sse, True, "HTTP-COMPLETE", "more than 1000 events", 0.0),
    ("endless slow SSE", slow_endless_sse, True, "HTTP-COMPLETE", "longer than 2.5 s", 2.5),
    ("endless plain body", endless_plain, False, "HTTP-COMPLETE", "larger than 1048576", 0.0),
    ("100 MB body", huge_body, False, "HTTP-COMPLETE", "larger than 1048576", 0.0),
    (
        "invalid UTF-8 as JSON",
        respond("200 OK", b'{"id": "\xff\xfe"}'),
        False,
        "RESP-SCHEMA",
        "not valid UTF-8",
        0.0,
    ),
    (
        "invalid UTF-8 in an event stream",
        respond(
            "200 OK",
            b'data: {"id": "\xff", "object": "text_completion", "choices": []}\n\ndata: [DONE]\n\n',
            content_type="text/event-stream",
        ),
        True,
        "STREAM-FRAMING",
        "not valid UTF-8",
        0.0,
    ),
    (
        "not JSON as JSON",
        respond("200 OK", b"<html>upstream timed out</html>"),
        False,
        "RESP-SCHEMA",
        "body is not JSON",
        0.0,
    ),
    (
        "error not JSON as JSON",
        respond("502 Bad Gateway", b"<html>Bad Gateway</html>"),
        False,
        "VALID-NO-5XX",  # one defect, one finding: a 5xx body is not judged apart
        "answered 502",
        0.0,
    ),
    ("reset mid-body", reset_mid_body, False, "HTTP-COMPLETE", "transport error", 0.0),
]


@pytest.mark.parametrize(
    ("behaviour", "stream", "rid", "words", "bound"),
    [s[1:] for s in SCENARIOS],
    ids=[s[0] for s in SCENARIOS],
)
def test_hostile_target_fails_clearly_within_bounds(
    serve: Servers, behaviour: Behaviour, stream: bool, rid: str, words: str, bound: float
) -> None:
    server = serve.start(behaviour)
    began = time.perf_counter()
    ex = send(server.url, stream=stream)
    # The bound is the client's: judging (and loading the spec the first time) is not.
    elapsed = time.perf_counter() - began
    findings = judged(ex)
    assert rid in failed(findings), findings
    assert words in findings[rid].message
    assert elapsed <= bound + SLACK, f"took {elapsed:.2f} s, bound {bound} s"
    # What is kept stays bounded too, whatever the target sent.
    assert len(ex.body) <= LIMITS.max_bytes


def test_redirect_is_not_followed_and_credentials_stay_home(serve: Servers) -> None:
    """A 307 to another port is a failure; the other host never sees a request or the key."""
    elsewhere = serve.start(respond("200 OK", b"{}"))
    target = serve.start(redirect_to(f"{elsewhere.url}/v1/completions"))
    client = Client(target.url, api_key=API_KEY, extra_headers={"X-Extra": "SECRET2"})
    try:
        ex = client.send(case())
    finally:
        client.close()
    findings = judged(ex)
    assert (
        ex.status == 307
        and "status 307 is not declared" in findings["HTTP-STATUS-DECLARED"].message
    )
    time.sleep(0.1)  # a follow-up request, if one were made, would have arrived by now
    assert elsewhere.requests == []
    assert len(target.requests) == 1 and API_KEY.encode() in target.requests[0]


def test_redirect_to_another_host_name(serve: Servers) -> None:
    """Same check towards a different host (127.0.0.2 is loopback too on Linux)."""
    try:
        other = RawServer(respond("200 OK", b"{}"), host="127.0.0.2").__enter__()
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound here")
    serve.append(other)
    target = serve.start(redirect_to(f"{other.url}/v1/completions"))
    ex = send(target.url)
    assert ex.status == 307 and ex.headers.get("location", "").startswith(other.url)
    time.sleep(0.1)
    assert other.requests == []


def test_5xx_with_retry_after_is_not_retried(serve: Servers) -> None:
    """Only 429 and 503 are waited out: a 500 is a finding, even with Retry-After."""
    body = b'{"error": {"message": "boom", "type": "server_error"}}'
    server = serve.start(respond("500 Internal Server Error", body, Retry_After=0))
    ex = send(server.url)
    assert ex.status == 500 and ex.retries == 0 and len(server.requests) == 1
    assert failed(judged(ex)) == {"VALID-NO-5XX", "REQUEST-ID-HEADER"}


def test_503_with_retry_after_is_retried_and_counted(serve: Servers) -> None:
    """A 503 that says when to come back is waited out once, and the retry is counted."""
    body = b'{"error": {"message": "busy"}}'
    unavailable = respond("503 Service Unavailable", body, Retry_After=0)
    refused = respond("400 Bad Request", body)

    def behaviour(server: RawServer, conn: socket.socket, request: bytes) -> None:
        (unavailable if len(server.requests) == 1 else refused)(server, conn, request)

    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=LIMITS)
    try:
        ex = client.send(case())
    finally:
        client.close()
    assert (ex.status, ex.retries, client.retries, len(server.requests)) == (400, 1, 1, 2)


# -- the plugin's answer to bad input: one ERROR line, exit code 4, no traceback -----------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_plugin(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # In process: each of these ends in pytest_configure, before any test or thread runs.
    return pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "--report-dir", str(pytester.path / "out"), *args
    )


def assert_one_error_line(result: pytest.RunResult, words: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    errors = [line for line in output.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: conformance: "), output
    assert words in errors[0], errors[0]
    assert "Traceback" not in output


@pytest.fixture
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONFORMANCE_API_KEY", raising=False)


@pytest.mark.usefixtures("no_env_key")
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--spec", "no-such-vendor"), "unknown spec 'no-such-vendor'"),
        (("--spec", "/nonexistent/openapi.yaml"), "cannot read spec"),
        (("--target-url", "URL", "--model", MODEL), "cannot connect to"),
    ],
    ids=["unknown spec", "unreadable spec", "unreachable target"],
)
def test_bad_input_is_one_error_line(
    pytester: pytest.Pytester, args: tuple[str, ...], words: str
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = run_plugin(pytester, *(url if a == "URL" else a for a in args))
    assert_one_error_line(result, words)


def test_spec_path_that_is_a_directory(pytester: pytest.Pytester, tmp_path: Path) -> None:
    folder = tmp_path / "spec.yaml"
    folder.mkdir()
    assert_one_error_line(run_plugin(pytester, "--spec", str(folder)), "cannot read spec")


@pytest.mark.usefixtures("no_env_key")
@pytest.mark.parametrize(
    ("key", "words"),
    [(None, "demands an API key"), ("sk-wrong-key", "rejected the API key")],
    ids=["missing key", "wrong key"],
)
def test_credentials_problems_are_one_error_line(
    pytester: pytest.Pytester, targets: Targets, key: str | None, words: str
) -> None:
    url = targets.get("aihubmix").server.url
    args = ["--target-url", url, "--model", MODEL, *(["--api-key", key] if key else [])]
    result = run_plugin(pytester, *args)
    assert_one_error_line(result, words)
    assert key is None or key not in result.stdout.str() + result.stderr.str()


@pytest.mark.usefixtures("no_env_key")
def test_silent_target_is_one_error_line_within_the_timeout(
    pytester: pytest.Pytester, serve: Servers
) -> None:
    server = serve.start(silent)
    began = time.perf_counter()
    result = run_plugin(
        pytester, "--target-url", server.url, "--model", MODEL, "--request-timeout", "0.5"
    )
    assert_one_error_line(result, "time to first byte exceeded 0.5 s")
    # The subprocess's own start-up dominates; the wait itself is bounded by 0.5 s.
    assert time.perf_counter() - began < 30
