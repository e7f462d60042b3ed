"""For comparison only: ``conformance.strategies.draw`` through Hypothesis internals.

``strategies/_draw.py`` draws each value in a ``@given`` run of two examples (the first,
simplest one draws nothing), Hypothesis's public API. The suite once drew each value
straight from a ``ConjectureData`` fed by ``random.Random(seed)`` instead: the same
strategy, the same per-value seeds, less CPU, but two Hypothesis internals
(``ConjectureData``, ``BuildContext``) that another Hypothesis may change. It was
replaced (issue 19); this copy lets the benchmarks measure what the public way costs.

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
    import conformance.strategies._draw as current

    if ConjectureData is None:
        return current._original_draw_one(strategy, seed_value)
    data = ConjectureData(random=random.Random(seed_value))
    try:
        with BuildContext(data, is_final=False, wrapped_test=one):
            return data.draw(strategy)
    except (StopTest, TypeError):
        # Rejected draw (filters, size) or an incompatible Hypothesis: the public way.
        return current._original_draw_one(strategy, seed_value)


def install() -> None:
    """Make ``conformance.strategies.draw`` use ``one`` (idempotent)."""
    import conformance.strategies._draw as current

    if not hasattr(current, "_original_draw_one"):
        current._original_draw_one = current.draw_one  # type: ignore[attr-defined]
        current.draw_one = one  # type: ignore[assignment]


def pytest_configure(config: Any) -> None:
    install()
