"""Rate limits and pacing: 429s waited out and counted, endless 429s end without a verdict.

The suite runs in a subprocess (``pytest conformance --target-url ...``) against the
reference target with one rate-limit fault on, as a user would run it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_servers import Servers, respond
from support import API_KEY, MODEL, Targets, case

from conformance.front.plugin import SUITE_DIR
from conformance.judging.verdict.outcomes import NO_VERDICT as EXIT_NO_VERDICT
from conformance.run.client import Client, Pacer, RetryPolicy
from conformance.run.resend import backoff

QUICK = ("-p", "no:cacheprovider", "--max-examples", "3")
OK = b'{"id": "cmpl-1", "object": "text_completion", "choices": []}'
LIMITED = b'{"error": {"message": "too many requests", "type": "rate_limit"}}'


@pytest.fixture
def serve() -> Iterator[Servers]:
    with Servers() as servers:
        yield servers


def run_suite(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    # In process saves an interpreter start per run; xdist workers are processes anyway.
    return pytester.runpytest_inprocess(
        str(SUITE_DIR),
        *QUICK,
        *("--target-url", url, "--model", MODEL, "--api-key", API_KEY),
        *("--report-dir", str(pytester.path / "out")),
        *args,
    )


def results_json(pytester: pytest.Pytester) -> dict[str, object]:
    data: dict[str, object] = json.loads((pytester.path / "out" / "results.json").read_text())
    return data


def test_every_third_request_rate_limited_passes_and_reports_retries(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    """429 with Retry-After: 0 on every third request is legal: the run passes, retries shown."""
    # At --concurrency 8 the sends in flight draw the 429s between them; still legal.
    url = targets.get("aihubmix", "rate-limit-every-third").server.url
    result = run_suite(pytester, url)
    output = result.stdout.str()
    assert result.ret == 0, output
    line = re.search(r"verdict: passed; spent (\d+) requests, \d+ tokens, (\d+) retries", output)
    assert line is not None, output
    requests, retries = int(line[1]), int(line[2])
    # Every third request is refused, so about a third of what was sent was a retry.
    assert retries >= requests // 4 > 0
    data = results_json(pytester)
    spent = data["spent"]
    assert isinstance(spent, dict) and spent["retries"] == retries
    # Each 429 waited out is judged (its envelope, its Retry-After) and counted.
    meta = data["meta"]
    # (A retry is also a stale keep-alive connection tried again, or a time-out sent again
    # alone: rare, so retries may exceed the 429s by those.)
    assert isinstance(meta, dict) and 0 < meta["observed_statuses"]["429"] <= retries
    limited = meta["observed_statuses"]["429"]
    assert "429 x" in output
    tallies = {t["id"]: t for t in data["requirements"]}  # type: ignore[attr-defined]
    # It holds of every answer (a run without a 429 exercises it too), each 429 included.
    assert tallies["RATE-LIMIT-ENVELOPE"]["checked"] > retries
    assert tallies["RATE-LIMIT-ENVELOPE"]["failed"] == 0
    assert tallies["RETRY-AFTER-FORMAT"]["checked"] == limited
    assert tallies["RETRY-AFTER-FORMAT"]["failed"] == 0


def test_every_third_request_limited_without_retry_after_still_gets_a_verdict(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    """429 without Retry-After on every third request (LiteLLM's router), at the default
    concurrency: backed off as the openai SDK does, the run passes with its retries shown."""
    url = targets.get("nscale", "rate-limit-every-third-no-retry-after").server.url
    result = run_suite(pytester, url, "--spec", "nscale")
    output = result.stdout.str()
    assert result.ret == 0, output
    line = re.search(r"verdict: passed; spent (\d+) requests, \d+ tokens, (\d+) retries", output)
    assert line is not None, output
    assert int(line[2]) >= int(line[1]) // 4 > 0
    tallies = {t["id"]: t for t in results_json(pytester)["requirements"]}  # type: ignore[attr-defined]
    assert tallies["RATE-LIMIT-ENVELOPE"]["failed"] == 0
    assert tallies["RETRY-AFTER-FORMAT"]["checked"] == 0  # no header: nothing to judge


def test_the_back_off_is_the_openai_sdks() -> None:
    """0.5 s doubled per retry, at most 8 s, less a random 0-25 % (openai-python's
    _calculate_retry_timeout and its constants)."""
    from openai import _constants

    policy = RetryPolicy()
    assert (policy.initial_backoff, policy.max_backoff) == (
        _constants.INITIAL_RETRY_DELAY,
        _constants.MAX_RETRY_DELAY,
    )
    assert [backoff(policy, n, rand=lambda: 0.0) for n in range(6)] == [0.5, 1, 2, 4, 8, 8]
    assert backoff(policy, 1, rand=lambda: 1.0) == 0.75
    assert all(0.375 <= backoff(policy, 0) <= 0.5 for _ in range(50))


def test_a_429_without_retry_after_is_backed_off_and_sent_again(serve: Servers) -> None:
    """The client waits on its own when the target does not say, and the 429 is kept."""
    refused = respond("429 Too Many Requests", LIMITED)
    answers = iter([refused, refused, respond("200 OK", OK)])
    server = serve.start(lambda srv, conn, request: next(answers)(srv, conn, request))
    retry = RetryPolicy(initial_backoff=0.01)
    client = Client(server.url, api_key=API_KEY, retry=retry, concurrency=1)
    try:
        exchange = client.send(case())
    finally:
        client.close()
    assert (exchange.status, exchange.retries) == (200, 2)
    assert [ex.status for ex in exchange.throttled] == [429, 429]
    assert client.stats.retries == 2 and len(server.requests) == 3


def assert_no_verdict(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    """Exit code EXIT_NO_VERDICT (not 1), and one line saying that no verdict was reached and why."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_NO_VERDICT, output
    verdicts = [line for line in output.splitlines() if line.startswith("verdict: ")]
    assert len(verdicts) == 1, output
    assert verdicts[0].startswith("verdict: no-verdict (the target kept answering 429")
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert "FAILED" not in output  # distinct from a conformance failure
    meta = results_json(pytester)["meta"]
    assert isinstance(meta, dict) and meta["verdict"] == "no-verdict"


def test_always_rate_limited_ends_with_no_verdict(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    result = run_suite(pytester, targets.get("aihubmix", "rate-limit-always").server.url)
    assert_no_verdict(pytester, result)


def test_pacer_spaces_request_starts() -> None:
    pacer = Pacer(50)
    began = time.monotonic()
    for _ in range(6):
        pacer.wait()
    assert time.monotonic() - began >= 5 / 50
    unpaced = Pacer(None)
    began = time.monotonic()
    for _ in range(100):
        unpaced.wait()
    assert time.monotonic() - began < 0.05


def test_n_requests_at_rps_take_at_least_n_minus_one_over_rps(targets: Targets) -> None:
    """The client waits for the pacer before every request it sends."""
    n, rps = 5, 20.0
    client = Client(targets.get("nscale").server.url, api_key=API_KEY, pacer=Pacer(rps))
    try:
        began = time.monotonic()
        statuses = [client.send(case(max_tokens=1)).status for _ in range(n)]
        elapsed = time.monotonic() - began
    finally:
        client.close()
    assert statuses == [200] * n
    assert elapsed >= (n - 1) / rps


PROBE = """
import os
from pathlib import Path

from conformance.judging.wire.case import Case

def test_probe(conformance):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(os.environ["PACE_OUT"], worker).write_text(str(conformance.run.client.pacer.interval))
    conformance.send(Case({"model": "reference-model", "prompt": "Hi", "max_tokens": 1}))
    conformance.verdict()
"""


@pytest.mark.exhaustive  # an xdist run paced by --rps: its wall time is what it measures
def test_under_xdist_rps_is_shared_and_rate_limits_end_without_verdict(
    pytester: pytest.Pytester, targets: Targets, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """-n 2 --rps 8: each worker paces at 4/s; workers' 429s end the run cleanly with EXIT_NO_VERDICT.

    pytest.exit on a worker would crash xdist; the workers skip, and the controller
    decides from their reports. (A small suite of two probes keeps this test fast.)
    """
    suite = pytester.mkdir("conformance")
    for i in range(2):
        (suite / f"test_probe_{i}.py").write_text(PROBE)
    monkeypatch.setenv("PACE_OUT", str(tmp_path))
    url = targets.get("nscale", "rate-limit-always").server.url
    result = pytester.runpytest_inprocess(
        "conformance", "-p", "no:cacheprovider", "-n", "2", "--rps", "8", "--spec", "nscale",
        "--target-url", url, "--model", MODEL, "--api-key", API_KEY,
        "--report-dir", str(pytester.path / "out"),
    )  # fmt: skip
    assert_no_verdict(pytester, result)
    intervals = {p.name: float(p.read_text()) for p in tmp_path.iterdir()}
    assert set(intervals) == {"gw0", "gw1"} and set(intervals.values()) == {0.25}


def test_rps_holds_across_requests_in_flight(targets: Targets) -> None:
    """--concurrency 8 with --rps 20: the shared pacer still spaces the starts."""
    from conformance.run.engine import Run
    from conformance.run.session import Settings

    n, rps = 6, 20.0
    target = targets.get("nscale")
    client = Client(target.server.url, api_key=API_KEY, pacer=Pacer(rps))
    run = Run(Settings(concurrency=8), target.spec, client)
    try:
        began = time.monotonic()
        sent = run.item().send_all([case(max_tokens=1) for _ in range(n)])
        elapsed = time.monotonic() - began
    finally:
        run.close()
        client.close()
    assert [ex.status for ex in sent] == [200] * n
    assert elapsed >= (n - 1) / rps


def test_concurrent_sends_that_draw_429s_between_them_adapt_down(targets: Targets) -> None:
    """A limit on every third request, 8 in flight: the run still gets every answer."""
    from conformance.run.engine import Run
    from conformance.run.session import Settings

    target = targets.get("nscale", "rate-limit-every-third")
    client = Client(target.server.url, api_key=API_KEY)
    run = Run(Settings(concurrency=8), target.spec, client)
    item = run.item()
    try:
        for _ in range(3):
            sent = item.send_all([case(max_tokens=1) for _ in range(12)])
            assert [ex.status for ex in sent] == [200] * 12
    finally:
        run.close()
        client.close()
    assert not run.rate_limited and item.results.spent.retries > 0
