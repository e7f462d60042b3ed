"""Secrets and report safety: no artifact shows a credential, no target injects markup.

The suite runs as a user runs it (``pytest conformance --target-url ... --api-key ...
--header ...``) against targets that produce failure evidence; then every file the run
left behind, and its terminal output, is searched for the secrets.
"""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_servers import RawServer, head
from support import API_KEY, MODEL, Targets

from conformance.front.plugin import SUITE_DIR
from conformance.judging.wire.redaction import REDACTED

HEADER_VALUE = "hdr-5ecret-" + "9" * 12
HEADER = f"X-Extra: {HEADER_VALUE}"
SECRETS = (API_KEY, HEADER_VALUE)
XSS = "<script>alert(1)</script>"


def run_suite(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    # In process: the terminal output is captured all the same, and it is much faster.
    return pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "--max-examples", "3",
        "--target-url", url, "--model", MODEL, "--api-key", API_KEY, "--header", HEADER,
        "--report-dir", str(pytester.path / "out"), *args,
    )  # fmt: skip


def artifacts(pytester: pytest.Pytester, result: pytest.RunResult) -> dict[str, str]:
    """The terminal output and every file under the run's directory, by name."""
    found = {"terminal": result.stdout.str() + result.stderr.str()}
    for path in sorted(pytester.path.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(pytester.path))] = path.read_bytes().decode("latin-1")
    return found


def assert_no_secret_anywhere(found: dict[str, str]) -> None:
    assert {"out/junit.xml", "out/results.json", "out/summary.md"} <= set(found), sorted(found)
    for name, text in found.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret[:12]}... appears in {name}"


def test_no_artifact_shows_the_key_or_the_header_value(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    result = run_suite(pytester, targets.get("aihubmix", "errors-fastapi").server.url)
    assert result.ret == 1, result.stdout.str()  # ERROR-ENVELOPE fails: evidence is written
    found = artifacts(pytester, result)
    assert_no_secret_anywhere(found)
    results = json.loads(found["out/results.json"])
    examples = [e for t in results["requirements"] for e in t["examples"]]
    assert examples, "the fault must produce failure evidence"
    curls = [e["curl"] for e in examples]
    assert all("$CONFORMANCE_API_KEY" in c or "Authorization" not in c for c in curls)
    # Redaction goes by header name: the extra header is hidden, max_tokens stays readable.
    assert any(f"X-Extra: {REDACTED}" in c for c in curls)
    assert any('"max_tokens"' in c for c in curls)
    assert any(e["request"]["headers"].get("X-Extra") == REDACTED for e in examples)


def request_headers(request: bytes) -> dict[str, str]:
    lines = request.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def echo_secrets(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """Echo the credentials back in the body, a header and an event, as careless targets do."""
    sent = request_headers(request)
    echoed = f"{sent.get('authorization')} / {sent.get('x-extra')}"
    if b'"stream": true' in request:
        event = f"data: {json.dumps({'error': {'message': echoed}})}\n\n".encode()
        conn.sendall(head(content_type="text/event-stream", X_Echo=echoed) + event)
        return
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {echoed}"}}).encode()
    conn.sendall(head("401 Unauthorized", X_Echo=echoed, Content_Length=len(body)) + body)


@pytest.fixture
def echoing() -> Iterator[RawServer]:
    with RawServer(echo_secrets) as server:
        yield server


def test_secrets_echoed_by_the_target_are_scrubbed(
    pytester: pytest.Pytester, echoing: RawServer
) -> None:
    """A target that repeats the key in its answers must not get it into the reports."""
    result = run_suite(pytester, echoing.url)
    # Every answer is 401, so the preflight ends the run: the one answer shows nothing.
    found = artifacts(pytester, result)
    assert "rejected the API key" in found["terminal"]
    assert all(secret not in text for text in found.values() for secret in SECRETS)


def test_secrets_echoed_mid_run_are_scrubbed_from_every_report(
    pytester: pytest.Pytester, echoing: RawServer
) -> None:
    """Answers after the preflight echo the secrets too: no report may show them."""
    calls = {"n": 0}

    def first_ok_then_echo(server: RawServer, conn: socket.socket, request: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # the preflight sees a completion and lets the run go on
            body = b'{"id": "c", "object": "text_completion", "choices": []}'
            conn.sendall(head(Content_Length=len(body)) + body)
        else:
            echo_secrets(server, conn, request)

    echoing.behaviour = first_ok_then_echo
    result = run_suite(pytester, echoing.url)
    found = artifacts(pytester, result)
    assert result.ret == 1 and REDACTED in found["out/results.json"]
    assert_no_secret_anywhere(found)


def scripted(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """Put a script tag in every field the target controls: statuses aside, everything."""
    n = len(server.requests)
    headers = {"X_Request_Id": XSS, "X_Note": XSS}
    if b'"stream": true' in request:
        data = f"data: {XSS}\n\ndata: {json.dumps({'id': XSS, 'choices': [{'text': XSS}]})}\n\n"
        conn.sendall(head(content_type=f"text/event-stream; x={XSS}", **headers) + data.encode())
    elif n % 2 == 0:  # the first answer (the preflight's) is a completion
        error = {"message": XSS, "type": XSS, "param": XSS, "code": XSS}
        body = json.dumps({"error": error, XSS: XSS}).encode()
        answer = head("400 Bad Request", f"text/html; x={XSS}", Content_Length=len(body), **headers)
        conn.sendall(answer + body)
    else:
        choice = {"text": XSS, "index": XSS, "finish_reason": XSS, "logprobs": XSS}
        completion = {"id": XSS, "object": XSS, "created": XSS, "model": XSS, "choices": [choice]}
        body = json.dumps(completion).encode()
        conn.sendall(head(Content_Length=len(body), **headers) + body)


def test_script_in_every_field_is_not_injected_into_the_html_report(
    pytester: pytest.Pytester,
) -> None:
    with RawServer(scripted) as server:
        result = run_suite(pytester, server.url)
    found = artifacts(pytester, result)
    assert result.ret == 1, found["terminal"]
    html = found.get("out/report.html")
    if html is None:
        pytest.skip("no report.html was written (reports/html.py not in place yet)")
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, "the target's text must be shown"
    assert html.count("<script") == html.count("</script>")
    # The Markdown summary renders HTML in a CI job page: the target's markup stays inert.
    assert "<script" not in found["out/summary.md"]
    # The XML report escapes it too: it parses, and no element came from the target.
    root = ET.fromstring(found["out/junit.xml"].encode("latin-1"))
    assert all(element.tag != "script" for element in root.iter())


def test_report_files_are_only_in_the_report_dir(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    """The run writes nothing else that could hold a secret (caches, logs)."""
    result = run_suite(pytester, targets.get("nscale").server.url, "--spec", "nscale")
    assert result.ret == 0, result.stdout.str()
    written = {str(p.relative_to(pytester.path)) for p in pytester.path.rglob("*") if p.is_file()}
    names = ("junit.xml", "report.html", "results.json", "summary.md")
    assert written == {str(Path("out", n)) for n in names}
