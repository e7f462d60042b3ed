"""The baseline diff in one line, for the terminal and the reports.

The diff itself (known, new and fixed failures against an earlier run, by fingerprint) and
whether an earlier run may judge this one are the judge core's
(conformance.judging.verdict.baseline); ``conclude`` records the diff in
``results.info.baseline`` before the verdict.
"""

from __future__ import annotations

from conformance.judging.verdict.baseline import requirement_of
from conformance.judging.verdict.run_info import BaselineDiff

__all__ = ["baseline_line"]


def baseline_line(diff: BaselineDiff) -> str:
    """The terminal line of a diff (``results.info.baseline``): counts of fingerprints,
    with the requirements they belong to, e.g.
    ``baseline: 69 known (RESP-ID), 2 new (RESP-CREATED), 0 fixed (-)``."""

    def part(key: str, prints: tuple[str, ...]) -> str:
        rids = sorted({requirement_of(f) for f in prints})
        return f"{len(prints)} {key} ({', '.join(rids) or '-'})"

    parts = (("known", diff.known), ("new", diff.new), ("fixed", diff.fixed))
    return "baseline: " + ", ".join(part(k, prints) for k, prints in parts)
