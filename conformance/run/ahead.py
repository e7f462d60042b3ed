"""The case lists a run builds once and its batches slice, and building them ahead.

The edge and invalid scenarios are split into batches (``BATCHES``) that slice
one list each, built once per run (``RunState.shared``): every boundary request of the
document, each validated, and one invalid request per rule it states. ``build_ahead``
builds both before any item asks, and the parts of the drawn valid requests, which the
assembly does while the preflight is on the wire, so that against a slow target the
first round leaves as soon as the preflight is answered instead of ~0.17 s later
(benchmarks/RESULTS.md §12), and the first rounds' answers are not read beside Hypothesis
drawing on the main thread (§12b). The lists are the same whenever they are built (the
edge and invalid lists are not drawn, and each drawn valid request is seeded by its
index); a build that fails is left for the scenario, which meets the same error where it
always did.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

#: Generated scenarios are split into this many items (the same cases in all), so that
#: pytest-xdist and --shard can balance a run (conformance/run/scenarios.py).
BATCHES = 4

if TYPE_CHECKING:
    from conformance.judging.wire.case import Case
    from conformance.run.session import RunState


def edge_list(run: RunState) -> list[Case]:
    """Every edge request of the run's document, built once per run."""
    from conformance.strategies import edge_requests

    s = run.settings

    def build() -> list[Case]:
        return edge_requests(
            run.spec, model=s.model, max_tokens=s.max_tokens, vocab_size=s.vocab_size
        )

    return run.shared("edge_requests", build)


def invalid_list(run: RunState) -> list[Case]:
    """One invalid request per rule the document states, built once per run (each
    candidate is validated)."""
    from conformance.strategies import invalid_cases

    def build() -> list[Case]:
        return invalid_cases(run.spec, model=run.settings.model, max_tokens=1)

    return run.shared("invalid_cases", build)


def valid_part(run: RunState, batch: int, *, stream: bool = False) -> list[Case]:
    """The ``batch``-th of the run's parts of drawn valid requests (streamed or not),
    drawn once per run: each value is seeded by its index, so a part is the same whenever
    it is drawn (conformance.strategies.draw)."""
    from conformance.strategies import draw, valid_requests

    s = run.settings

    def build() -> list[Case]:
        strategy = valid_requests(
            run.spec, model=s.model, max_tokens=s.max_tokens, vocab_size=s.vocab_size,
            stream=stream,
        )  # fmt: skip
        return draw(strategy, s.max_examples, seed_value=s.seed, part=(batch, BATCHES))

    return run.shared(f"valid_{'streams' if stream else 'requests'}[{batch}]", build)


def build_ahead(
    run: RunState, answered: Callable[[], bool] = lambda: False, *, draws: bool = True
) -> None:
    """Build the lists now, until ``answered()`` (the preflight is back: the run goes on and
    what is left is built where the scenarios ask for it). ``draws``: the valid requests'
    parts too, which Hypothesis draws (~0.2 s; in one process only: an xdist worker draws
    only the parts its items play). An error is left for the scenario that asks."""
    builds: list[Callable[[RunState], object]] = [edge_list, invalid_list]
    if draws:
        builds += [
            functools.partial(valid_part, batch=b, stream=stream)
            for stream in (False, True)
            for b in range(BATCHES)
        ]
    for build in builds:
        if answered():
            return
        with contextlib.suppress(Exception):
            build(run)
