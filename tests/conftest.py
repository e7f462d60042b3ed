"""Fixtures shared by the project's tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio._backends._asyncio
import anyio._core._sockets
import anyio._core._synchronization
import anyio._core._tasks  # noqa: F401
import httpcore  # noqa: F401  (see below)
import hypothesis
import pytest
import support
from hypothesis import strategies as st
from support import Targets

import conformance.run.engine
import conformance.run.scenarios  # noqa: F401
from conformance.strategies import draw

ROOT = Path(__file__).resolve().parents[1]

# pytester's in-process runs drop the modules they imported. httpx maps httpcore's
# exceptions through a table it fills on first use: if httpcore were first imported inside
# one inner run, a later inner run would import it afresh and its ReadTimeout would no
# longer match the table (it escapes unmapped). Importing it here keeps one httpcore.
# Likewise the suite's scenarios: ``from conformance.run import scenarios`` (the suite's test
# modules) finds the module a previous inner run left on the package, bound to that run's
# engine, whose ScenarioSkipped a re-imported engine would no longer catch.
#
# For the same reason, anyio's modules that a reference target's server thread imports on
# its first requests are imported here: else every inner run imports them again on that
# thread, assertion-rewriting them (ast.parse) while the main thread parses too (pytest
# rewriting a test module, Hypothesis reading a local module's constants), and CPython
# 3.11's ast is not thread-safe ("AST constructor recursion depth mismatch": the target
# answers 500). One draw first, likewise, loads what Hypothesis imports on its first run
# (a session fixture: Hypothesis warns of draws while conftest files load).


def pytest_configure(config: pytest.Config) -> None:
    """The tier of this session: exhaustive when the -m expression selects the tests marked
    ``exhaustive`` (``-m exhaustive``, or an empty -m: every test)."""
    expression = str(config.getoption("markexpr", "") or "")
    words = expression.split()
    support.EXHAUSTIVE = not expression or ("exhaustive" in words and "not" not in words)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In the exhaustive tier, every Hypothesis property runs too, at its full example
    count (``support.examples``): marked here, before -m selects (the default tier ran
    them at a fifth)."""
    if not support.EXHAUSTIVE:
        return
    for item in items:
        if hypothesis.is_hypothesis_test(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.exhaustive)


@pytest.fixture(scope="session", autouse=True)
def _hypothesis_loaded() -> None:
    draw(st.lists(st.integers(0, 10**6), min_size=50, max_size=50), 1)


@pytest.fixture(scope="session")
def targets() -> Iterator[Targets]:
    """Reference targets by (flavor, faults), started on first use."""
    running = Targets()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel users install, built from the checkout (test_packaging, test_installed)."""
    out = tmp_path_factory.mktemp("wheel")
    # A report written into the checkout (the main job's default reports/out) is not shipped
    # (named per process: xdist workers build at once).
    probe = ROOT / "reports" / "out" / f"wheel-probe-{os.getpid()}.json"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text("{}", encoding="utf-8")
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
             "-w", str(out), str(ROOT)],
            check=True, capture_output=True,
        )  # fmt: skip
    finally:
        probe.unlink()
    return next(out.glob("*.whl"))
