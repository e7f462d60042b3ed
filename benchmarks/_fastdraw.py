"""Prototype, not merged: ``strategies.draw`` without a Hypothesis test run per value.

``strategies/_draw.py`` draws each value in a one-off ``@given`` run (two examples, the
first, simplest one thrown away). Setting up that run costs about twice the draw itself.
This prototype draws each value straight from a ``ConjectureData`` fed by
``random.Random(seed)``: the same strategy, the same Hypothesis choice provider, one
draw, the same per-value seeds (so draws stay independent, reproducible and
prefix-stable), about 3x less CPU. It uses two Hypothesis internals (``ConjectureData``,
``BuildContext``), so it falls back to the current way when they are missing or the draw
is rejected.

The benchmarks load it as a pytest plugin (``-p _fastdraw`` with ``benchmarks/`` on
PYTHONPATH) to measure what the change would give; nothing in the suite imports it.
"""

from __future__ import annotations

import random
from typing import Any, TypeVar

T = TypeVar("T")

try:
    from hypothesis.control import BuildContext
    from hypothesis.errors import StopTest
    from hypothesis.internal.conjecture.data import ConjectureData
except ImportError:  # pragma: no cover - another Hypothesis
    ConjectureData = None


def one(strategy: Any, seed_value: int) -> Any:
    """One random value of ``strategy`` for ``seed_value``."""
    import strategies._draw as current

    if ConjectureData is None:
        return current._original_one(strategy, seed_value)
    data = ConjectureData(random=random.Random(seed_value))
    try:
        with BuildContext(data, is_final=False, wrapped_test=one):
            return data.draw(strategy)
    except (StopTest, TypeError):
        # Rejected draw (filters, size) or an incompatible Hypothesis: the current way.
        return current._original_one(strategy, seed_value)


def install() -> None:
    """Make ``strategies.draw`` use ``one`` (idempotent)."""
    import strategies._draw as current

    if not hasattr(current, "_original_one"):
        current._original_one = current._one  # type: ignore[attr-defined]
        current._one = one  # type: ignore[assignment]


def pytest_configure(config: Any) -> None:
    install()
