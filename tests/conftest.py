"""Fixtures shared by the project's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import Targets


@pytest.fixture(scope="session")
def targets() -> Iterator[Targets]:
    """Reference targets by (flavor, faults), started on first use."""
    running = Targets()
    yield running
    running.stop()
