"""Turn a strategy into a reproducible list of values, through Hypothesis's public API only.

Each value is an independent random draw. A plain ``@given`` run is a bug hunter, not a
sampler: it starts from the simplest example, grows examples slowly and mutates earlier
ones, so a short run repeats the same prompt form or parameter many times in a row. Here
each value comes from its own two-example ``@given`` run, seeded with ``@seed`` from the
run's seed and the value's index: the first example of every run is the simplest one,
whose "salt" is 0 and which draws nothing; the second is random from its first choice on.
That is the idiom schemathesis uses to draw examples outside a test
(``generation/hypothesis/examples.py``: ``@given`` + ``@seed`` + generate-phase settings).

What "same seed, same requests" rests on: the seed, the Hypothesis version (a new version
may draw differently; tests/test_draw_determinism.py pins it across processes), and the
literals of the *local* modules loaded at the time (Hypothesis mixes string and number
constants of non-installed modules into its draws now and then; from an installed suite
none of ours are local; from a checkout the same command loads the same modules).
Hypothesis reads those constants with ``ast.parse`` on the drawing thread (and caches
them under ``.hypothesis/`` in the working directory). The suite used to switch them off
through a private attribute; there is no public switch, so they stay.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from conformance.judging.document.spec_source import user_cache
from conformance.judging.exceptions import ConformanceError

# Hypothesis keeps its caches (its Unicode tables) in ./.hypothesis unless told where
# (HYPOTHESIS_STORAGE_DIRECTORY, its documented setting): a suite run writes nothing
# outside its report dir, so unless the user chose a place they go to the user cache.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(user_cache() / "hypothesis"))

T = TypeVar("T")
# Spreads the per-value seeds of different seed_values apart (a large prime).
SEED_STRIDE = 1_000_003
_SALT = st.integers(0, 2**62)
_SETTINGS = settings(
    max_examples=2,  # the simplest example (skipped) and one random one
    database=None,  # no example database: a draw depends on the seed alone
    phases=[Phase.generate],  # no explicit examples, no replay, no shrinking
    deadline=None,
    derandomize=False,  # the seed is given per value (@seed)
    suppress_health_check=list(HealthCheck),
    verbosity=Verbosity.quiet,
)


class CannotDraw(ConformanceError):
    """Hypothesis found no value of the strategy for this seed (every draw was rejected)."""


# The test a value is drawn in, compiled from this text rather than written as a def here:
# on every run Hypothesis keys the test by a digest of its source (inspect.getsource, then
# ast.parse and tokenize), a third of a draw's cost, and the name alone when it has no
# source file. CPython 3.11's ast is also not thread-safe: parsing on a drawing thread
# while another thread parses (an import being assertion-rewritten) can crash either.
# ``salt`` 0 is the run's first, simplest example: it draws nothing.
_COLLECT = compile(
    "def collect(salt, data):\n"
    "    if salt and drawer.strategy is not None:\n"
    "        drawer.drawn.append(data.draw(drawer.strategy))\n",
    "<conformance.strategies._draw: a value's test>",
    "exec",
)


class _Drawer(threading.local):
    """One ``@given`` test per thread, run once per value with that value's ``@seed``.

    Built once per thread, not per value (building it costs as much as a draw); one per
    thread because ``@seed`` is set on the test function, so two threads must not share
    one. Hypothesis runs tests in several threads at once since 6.136.
    """

    def __init__(self) -> None:
        self.strategy: SearchStrategy[Any] | None = None
        self.drawn: list[Any] = []
        namespace: dict[str, Any] = {"drawer": self}
        exec(_COLLECT, namespace)
        self.collect: Callable[[], None] = _SETTINGS(given(_SALT, st.data())(namespace["collect"]))

    def one(self, strategy: SearchStrategy[T], seed_value: int) -> list[T]:
        """The value for ``seed_value`` (a list of one), or an empty list."""
        self.strategy, self.drawn = strategy, []
        try:
            seed(seed_value)(self.collect)()
            return self.drawn[-1:]
        finally:
            self.strategy, self.drawn = None, []


_DRAWER = _Drawer()


def draw_one(strategy: SearchStrategy[T], seed_value: int) -> T:
    """One random value of ``strategy`` for ``seed_value``; CannotDraw when none can be."""
    found = _DRAWER.one(strategy, seed_value)
    if not found:
        raise CannotDraw(f"no value drawn for seed {seed_value}: every draw was rejected")
    return found[0]


def draw_some(strategy: SearchStrategy[T], seed_values: range) -> list[T]:
    """A value for each seed that yields one (a strategy that may reject: schemathesis's)."""
    return [value for s in seed_values for value in _DRAWER.one(strategy, s)]


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
    return [draw_one(strategy, seed_value * SEED_STRIDE + index) for index in range(k, count, n)]
