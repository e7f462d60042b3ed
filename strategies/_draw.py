"""Turn a strategy into a reproducible list of Cases without running a Hypothesis test."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.strategies import SearchStrategy

T = TypeVar("T")


def draw(strategy: SearchStrategy[T], count: int, *, seed_value: int = 0) -> list[T]:
    """Draw up to ``count`` values from ``strategy``, the same ones for the same seed.

    Only the generate phase runs: no shrinking (each example costs a request, not a
    retry) and no example database unless Hypothesis is configured for one.
    """
    drawn: list[T] = []

    @seed(seed_value)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        drawn.append(value)

    collect()
    return drawn[:count]
