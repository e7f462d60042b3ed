"""Option values are the user's input: each bad one is one ``ERROR:`` line, exit 4, before any
request, never a finding against the target and never a traceback (issue 19, item 3).

Proven three ways: through ``assembly.assemble`` (the runner-agnostic path every runner
takes), through the pytest plugin (in-process pytester), and through the console script.
The target is a server that only counts what reaches it: zero requests, every time.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import Targets, target_args

from conformance.front.plugin import SUITE_DIR
from conformance.run.assembly import BadInput, assemble
from conformance.run.client import Limits
from conformance.run.session import Settings, Setup


class Counting(ThreadingHTTPServer):
    """Answers nothing useful; counts every request that reaches it."""

    requests = 0


class _Handler(BaseHTTPRequestHandler):
    def _count(self) -> None:
        self.server.requests += 1  # type: ignore[attr-defined]
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _count

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def counting() -> Iterator[Counting]:
    server = Counting(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url_of(server: Counting) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


# (what to change, the option the one line must name, a word of what it accepts)
BAD_SETUPS: list[tuple[dict[str, Any], str, str]] = [
    ({"max_examples": -1}, "--max-examples -1", ">= 1"),
    ({"max_examples": 0}, "--max-examples 0", ">= 1"),
    ({"max_tokens": -5}, "--max-tokens -5", ">= 1"),
    ({"max_tokens": 0}, "--max-tokens 0", ">= 1"),
    ({"vocab_size": 0}, "--vocab-size 0", ">= 1"),
    ({"fuzz": -1}, "--fuzz -1", ">= 0"),
    ({"concurrency": 0}, "--concurrency 0", ">= 1"),
    ({"budget_requests": 0}, "--budget-requests 0", ">= 1"),
    ({"budget_requests": -1}, "--budget-requests -1", ">= 1"),
    ({"budget_tokens": 0}, "--budget-tokens 0", ">= 1"),
    ({"checks": ("RESP-IDD",)}, "--checks: unknown requirement ID 'RESP-IDD'", "RESP-ID"),
    ({"skip_checks": ("NOPE-1",)}, "--skip-checks: unknown requirement ID 'NOPE-1'", "known:"),
    (
        {"require_capabilities": ("logprob",)},
        "--require-capabilities: unknown capability 'logprob' (did you mean logprobs?)",
        "known:",
    ),
]
BAD_LIMITS: list[tuple[dict[str, Any], str, str]] = [
    ({"ttfb": -1.0}, "--request-timeout -1.0", "> 0"),
    ({"gap": 0.0}, "--stream-gap 0.0", "> 0"),
    ({"total": 0.0}, "--stream-total 0.0", "> 0"),
    ({"total": float("nan")}, "--stream-total nan", "finite"),
    ({"max_bytes": 0}, "--max-body-bytes 0", ">= 65536"),
]


def _setup(server: Counting, **setup: Any) -> Setup:
    return Setup(target_url=url_of(server), settings=Settings(model="m"), **setup)


@pytest.mark.parametrize(("change", "names", "accepts"), BAD_SETUPS)
def test_a_bad_setting_is_one_line_before_any_request(
    counting: Counting, change: dict[str, Any], names: str, accepts: str
) -> None:
    before = counting.requests
    setup = _setup(counting)
    with pytest.raises(BadInput) as raised:
        assemble(replace(setup, settings=replace(setup.settings, **change)))
    line = str(raised.value)
    assert line.startswith(names) and accepts in line and "\n" not in line, line
    assert counting.requests == before


@pytest.mark.parametrize(("change", "names", "accepts"), BAD_LIMITS)
def test_a_bad_bound_is_one_line_before_any_request(
    counting: Counting, change: dict[str, Any], names: str, accepts: str
) -> None:
    before = counting.requests
    with pytest.raises(BadInput) as raised:
        assemble(_setup(counting, limits=replace(Limits(), **change)))
    line = str(raised.value)
    assert line.startswith(names) and accepts in line and "\n" not in line, line
    assert counting.requests == before


@pytest.mark.parametrize(
    ("setup", "names"),
    [
        ({"rps": -1.0}, "--rps -1.0"),
        ({"rps": 0.0}, "--rps 0.0"),
        ({"headers": (("", "x"),)}, "--header ''"),
        ({"headers": (("X Bad", "x"),)}, "--header 'X Bad'"),
    ],
)
def test_bad_pacing_and_headers_are_one_line(
    counting: Counting, setup: dict[str, Any], names: str
) -> None:
    with pytest.raises(BadInput, match="^" + names.replace("-", r"\-").replace(".", r"\.")):
        assemble(_setup(counting, **setup))


def test_good_values_at_their_bounds_are_accepted() -> None:
    """The smallest accepted values pass the check (they are not bad input)."""
    from conformance.run import option_values

    settings = Settings(
        max_examples=1, max_tokens=1, vocab_size=1, budget_requests=1, budget_tokens=1, fuzz=0
    )
    limits = Limits(ttfb=0.01, gap=0.01, total=0.01, max_bytes=option_values.MIN_BODY_BYTES)
    assert option_values.problem(Setup(settings=settings, limits=limits, rps=0.5)) is None


def test_capability_names_cover_every_probe_and_family() -> None:
    from conformance.judging.document.spec import load_spec
    from conformance.run import option_values

    names = option_values.capability_names(load_spec("aihubmix"))
    assert {"echo", "logprobs", "logprobs:max", "n", "best_of", "prompt", "prompt:tokens"} <= set(
        names
    )
    assert {"include_usage", "stop:max", "null", "null:echo"} <= set(names)


# --- through pytest and the console script ---------------------------------------------

CLI_CASES = [
    (["--max-examples", "-1"], "--max-examples -1"),
    (["--max-tokens", "-5"], "--max-tokens -5"),
    (["--rps", "-1"], "--rps -1.0"),
    (["--fuzz", "-1"], "--fuzz -1"),
    (["--concurrency", "0"], "--concurrency 0"),
    (["--budget-requests", "0"], "--budget-requests 0"),
    (["--stream-gap", "0"], "--stream-gap 0.0"),
    (["--stream-total", "0"], "--stream-total 0.0"),
    (["--max-body-bytes", "0"], "--max-body-bytes 0"),
    (["--request-timeout", "-1"], "--request-timeout -1.0"),
    (["--require-capabilities", "logprob"], "--require-capabilities: unknown capability"),
    (["--checks", "RESP-IDD"], "--checks: unknown requirement ID"),
    (["--skip-checks", "NOPE"], "--skip-checks: unknown requirement ID"),
    (["--shard", "3/2"], "--shard '3/2': expected K/N"),
    (["--shard", "x"], "--shard 'x': expected K/N"),
    (["--header", "NoColon"], "--header 'NoColon': expected 'Name: value'"),
    # Issue 27, items 2 and 6: pytest's usage text, or a run started and then refused.
    (["--request-timeout", "abc"], "--request-timeout 'abc': expected a number"),
    (["--max-examples", "x"], "--max-examples 'x': expected an integer"),
    (["--contract", "openai"], "--contract 'openai': expected one of openai-compatible, document"),
    (["my"], "'my' is not an option of the suite or of pytest"),
    (["--nope"], "'--nope' is not an option of the suite or of pytest"),
    (["-k", "("], "-k '(': not a valid expression"),
    (["-m", "a and"], "-m 'a and': not a valid expression"),
    ([str(SUITE_DIR / "test_nope.py")], f"'{SUITE_DIR / 'test_nope.py'}': no such file"),
]


@pytest.mark.parametrize(("args", "names"), CLI_CASES)
def test_the_plugin_shows_one_error_line_exit_4_before_any_request(
    pytester: pytest.Pytester, counting: Counting, args: list[str], names: str
) -> None:
    before = counting.requests
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "--target-url", url_of(counting),
        "--model", "m", *args,
    )  # fmt: skip
    assert result.ret == 4
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: conformance: {names}"), errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert counting.requests == before


CONSOLE_CASES = [
    (["--request-timeout", "-1"], "--request-timeout -1.0: expected a finite number of seconds > 0"),
    (["--request-timeout", "abc"], "--request-timeout 'abc': expected a number"),
    (["my"], "'my' is not an option of the suite or of pytest (see completions-conformance --help)"),
    (["--", "my"], "'my' is not an option of the suite or of pytest (see completions-conformance --help)"),
    (["--seed"], "--seed: expected one argument"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "line"), CONSOLE_CASES)
def test_the_console_script_validates_the_same_way(
    counting: Counting, tmp_path: Path, args: list[str], line: str
) -> None:
    """``completions-conformance`` (``python -m conformance``) delegates to pytest: the same
    check, the same line. ``--request-timeout -1`` was an 81-line traceback and exit 3, and
    then named an internal field (``Limits.ttfb``); ``--request-timeout abc`` printed pytest's
    usage, inifile and rootdir; a stray word sent the preflight and ended "verdict: error"
    with pytest's ``ERROR:`` after it (issue 27)."""
    before = counting.requests
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--target-url", url_of(counting), "--model", "m",
         *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert lines == [f"ERROR: conformance: {line}"]
    assert "Traceback" not in done.stdout and "verdict" not in done.stdout
    assert not (tmp_path / "reports").exists()  # no run started, no report written
    assert counting.requests == before


def test_a_node_the_suite_does_not_have_is_one_error_line_before_the_verdict(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    """pytest refuses a node ID it does not find only after collection, once the run has
    started (the preflight was sent): its ERROR: line comes before the verdict, which stays
    the last line, and pytest prints nothing after it."""
    result = pytester.runpytest_inprocess(
        f"{SUITE_DIR / 'test_sdk.py'}::test_nope", "-p", "no:cacheprovider",
        *target_args(targets.get("aihubmix").server.url),
    )  # fmt: skip
    assert result.ret == 4
    out = [line for line in result.stdout.lines if line.strip()]
    assert out[-2].startswith("ERROR: not found: ") and "test_nope" in out[-2], out[-3:]
    assert out[-1].startswith("verdict: error (not found: "), out[-1]
    assert not [line for line in result.stderr.lines if line.strip()]


# --- --fuzz without its generator -------------------------------------------------------

NO_SCHEMATHESIS = """
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "schemathesis":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Blocked())
from conformance.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def test_fuzz_without_schemathesis_is_bad_input_before_any_request(
    counting: Counting, tmp_path: Path
) -> None:
    """``--fuzz 50`` without the [fuzz] extra was skipped and the run green: a nightly deep run
    that never ran deep. Now it does not start."""
    before = counting.requests
    done = subprocess.run(
        [sys.executable, "-c", NO_SCHEMATHESIS, "--target-url", url_of(counting), "--model", "m",
         "--fuzz", "50"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("ERROR: conformance: --fuzz 50 needs schemathesis")
    assert "[fuzz]" in lines[0]
    assert "Traceback" not in done.stdout
    assert counting.requests == before


def test_fuzz_with_schemathesis_is_no_problem() -> None:
    pytest.importorskip("schemathesis")
    from conformance.run.option_values import fuzz_problem

    assert fuzz_problem(5) is None and fuzz_problem(0) is None
