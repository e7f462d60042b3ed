"""Turn a strategy into a reproducible list of values without running a Hypothesis test.

Each value is an independent random draw. A plain ``@given`` run is a bug hunter, not a
sampler: it starts from the simplest example, grows examples slowly and mutates earlier
ones, so a short run repeats the same prompt form or parameter many times in a row. Here
each value comes from its own one-off run, seeded from ``seed_value`` and the value's
index: the run's first example is always the simplest one and is skipped, and a random
"salt" integer is drawn first so that the second example is novel through the salt
alone, every draw after it random.
"""

from __future__ import annotations

import random
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

try:
    from hypothesis.control import BuildContext
    from hypothesis.errors import StopTest
    from hypothesis.internal.conjecture.data import ConjectureData

    _INTERNALS = True
except ImportError:  # pragma: no cover - another Hypothesis: the public way only
    _INTERNALS = False
try:
    from hypothesis.internal.conjecture.providers import Constants  # type: ignore[attr-defined]
    from hypothesis.internal.floats import float_to_int
    from sortedcontainers import SortedSet  # type: ignore[import-untyped]

    # Hypothesis mixes in string and number literals of the modules loaded so far (its
    # "local constants"): the same seed would draw differently once one more module of
    # ours is imported. The suite's draws must depend on the seed alone.
    _NO_LOCAL_CONSTANTS: Any = Constants(
        integers=SortedSet(),
        floats=SortedSet(key=float_to_int),
        bytes=SortedSet(),
        strings=SortedSet(),
    )
except ImportError:  # pragma: no cover - another Hypothesis: nothing to switch off
    _NO_LOCAL_CONSTANTS = None

T = TypeVar("T")
# Spreads the per-value seeds of different seed_values apart (a large prime).
_SEED_STRIDE = 1_000_003
_SETTINGS = settings(
    max_examples=2,
    database=None,
    phases=[Phase.generate],
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _one(strategy: SearchStrategy[T], seed_value: int) -> T:
    """One random value of ``strategy`` for ``seed_value``.

    Drawn straight from a ConjectureData fed by a seeded Random: setting up a one-off
    ``@given`` run per value costs about twice the draw itself (benchmarks/RESULTS.md).
    Those are Hypothesis internals, so a rejected draw or another Hypothesis falls back
    to the public way.
    """
    if _INTERNALS:
        data = ConjectureData(random=random.Random(seed_value))
        if _NO_LOCAL_CONSTANTS is not None:
            vars(data.provider)["_local_constants"] = _NO_LOCAL_CONSTANTS
        try:
            with BuildContext(data, is_final=False, wrapped_test=_one):
                value: T = data.draw(strategy)
                return value
        except (StopTest, TypeError):
            pass
    return _one_via_given(strategy, seed_value)


def _one_via_given(strategy: SearchStrategy[T], seed_value: int) -> T:
    """One random value of ``strategy`` for ``seed_value``, through a Hypothesis test."""
    seen: list[tuple[int, Any]] = []

    @seed(seed_value)
    @_SETTINGS
    @given(st.tuples(st.integers(1, 2**62), strategy))
    def collect(salted: tuple[int, T]) -> None:
        seen.append(salted)

    collect()
    value: T = seen[-1][1]
    return value


def draw(
    strategy: SearchStrategy[T], count: int, *, seed_value: int = 0, part: tuple[int, int] = (0, 1)
) -> list[T]:
    """Draw ``count`` independent values from ``strategy``, the same ones for the same seed.

    ``part=(k, n)`` draws only the values at indexes k, k+n, k+2n, ...: since each value is
    seeded by its index, the n parts together are exactly the whole draw (the suite
    splits its generated tests into batches this way, for pytest-xdist and --shard).
    Only the generate phase runs: no shrinking (each example costs a request, not a
    retry) and no example database.
    """
    k, n = part
    return [_one(strategy, seed_value * _SEED_STRIDE + index) for index in range(k, count, n)]
