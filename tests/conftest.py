"""Fixtures shared by the project's tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpcore  # noqa: F401  (see below)
import pytest
from support import Targets

# pytester's in-process runs drop the modules they imported. httpx maps httpcore's
# exceptions through a table it fills on first use: if httpcore were first imported inside
# one inner run, a later inner run would import it afresh and its ReadTimeout would no
# longer match the table (it escapes unmapped). Importing it here keeps one httpcore.
# Likewise the suite's scenarios: ``from conformance import scenarios`` (the suite's test
# modules) finds the module a previous inner run left on the package, bound to that run's
# engine, whose ScenarioSkipped a re-imported engine would no longer catch.
import conformance.engine
import conformance.scenarios  # noqa: F401


@pytest.fixture(scope="session")
def targets() -> Iterator[Targets]:
    """Reference targets by (flavor, faults), started on first use."""
    running = Targets()
    yield running
    running.stop()
