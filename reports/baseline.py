"""Compare a run with an earlier one: which failures are known, new or fixed.

How the plugin's ``--baseline FILE`` uses it (the plugin owns the option and the verdict):

1. load FILE with ``Results.from_json`` (a ``results.json`` of an accepted earlier run);
2. ``diff = compare_to_baseline(results, baseline)`` at session end, before the verdict;
3. the run fails only on ``diff.new`` requirements whose level decides the verdict (MUST,
   and SHOULD under ``--strict-should``); ``diff.known`` failures are still reported in full but
   do not fail the run; ``diff.fixed`` is listed so the baseline can be refreshed;
4. ``results.meta["baseline"] = diff.to_json() | {"file": str(FILE)}`` so that the HTML
   and Markdown reports show the three lists.

A requirement "fails" here when at least one exchange failed it, whatever its level; the
level filter belongs to the verdict, not to the diff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.results import Results


@dataclass(frozen=True, slots=True)
class BaselineDiff:
    """Failures of the current run relative to a baseline run, as sorted requirement IDs.

    ``unverified`` holds baseline failures that the current run did not test (skipped by
    ``--checks``, out of budget): neither known nor fixed, since nothing was observed.
    """

    known: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The form stored in ``results.meta["baseline"]``."""
        return {
            "known": list(self.known),
            "new": list(self.new),
            "fixed": list(self.fixed),
            "unverified": list(self.unverified),
        }


def _failing(results: Results) -> set[str]:
    return {rid for rid, tally in results.tallies.items() if tally.failed}


def compare_to_baseline(current: Results, baseline: Results) -> BaselineDiff:
    """Split the failures of ``current`` into known and new, and find the fixed ones."""
    now, before = _failing(current), _failing(baseline)
    checked_clean = {
        rid for rid, tally in current.tallies.items() if tally.checked and not tally.failed
    }
    return BaselineDiff(
        known=tuple(sorted(now & before)),
        new=tuple(sorted(now - before)),
        fixed=tuple(sorted(before & checked_clean)),
        unverified=tuple(sorted(before - now - checked_clean)),
    )
