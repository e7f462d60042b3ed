"""A pytest plugin for bench_fixed_cost.py: the wall-clock time of each phase of a run.

Loaded with ``-p _phases`` (benchmarks/ on PYTHONPATH); writes ``{phase: time.time()}`` as
JSON to ``$PHASES_OUT`` at the interpreter's exit. It imports nothing beyond pytest, so the
run it watches loads what it loads without it.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from typing import Any

import pytest

T: dict[str, float] = {}


def mark(name: str) -> None:
    T.setdefault(name, time.time())


mark("plugins_loading")


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_phases_configure_start(config: Any) -> None:
    mark("configure_start")


@pytest.hookimpl(trylast=True, specname="pytest_configure")
def pytest_phases_configure_end(config: Any) -> None:
    mark("configure_end")


def pytest_collection_finish(session: Any) -> None:
    mark("collected")


@pytest.hookimpl(tryfirst=True, specname="pytest_sessionfinish")
def pytest_phases_finish_start(session: Any) -> None:
    mark("sessionfinish_start")


@pytest.hookimpl(trylast=True, specname="pytest_sessionfinish")
def pytest_phases_finish_end(session: Any) -> None:
    mark("sessionfinish_end")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: Any) -> None:
    mark("unconfigured")
    atexit.register(mark, "atexit")  # registered last: the first handler run at exit


def _dump() -> None:
    out = os.environ.get("PHASES_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(T, f)


atexit.register(_dump)
