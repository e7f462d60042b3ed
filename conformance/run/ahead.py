"""The case lists a run builds once and its batches slice, and building them ahead.

The edge and invalid scenarios are split into batches (``scenarios.BATCHES``) that slice
one list each, built once per run (``RunState.shared``): every boundary request of the
document, each validated, and one invalid request per rule it states. ``build_ahead``
builds both before any item asks, which the assembly does while the preflight is on the
wire, so that against a slow target the first round leaves as soon as the preflight is
answered instead of ~0.17 s later (benchmarks/RESULTS.md §12). The lists are the same
whenever they are built (neither draws at random); a build that fails is left for the
scenario, which meets the same error where it always did.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

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


def build_ahead(run: RunState) -> None:
    """Build both lists now; an error is left for the scenario that slices the list."""
    for build in (edge_list, invalid_list):
        with contextlib.suppress(Exception):
            build(run)
