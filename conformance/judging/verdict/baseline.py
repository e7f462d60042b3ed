"""A run against an earlier one (``--baseline``): which failures are known, new or fixed,
by fingerprint, and whether the earlier run may judge this one at all.

How a door with ``--baseline FILE`` uses it (the run, ``conformance-merge``, the gate):

1. read FILE back as ``Results`` (a ``results.json`` of an accepted earlier run);
2. ``errors, warnings = check_baseline(results.info.taken_with(), baseline)``: an error
   (another spec) refuses the baseline with one line; warnings (another model or target)
   go to the terminal header and ``results.info.baseline_warnings`` (every report shows
   them);
3. ``conclude(results, baseline)`` (conformance.judging.verdict.conclusion) compares at the
   end, before the verdict (:func:`compare_to_baseline`), and records the diff in
   ``results.info.baseline`` and its ``new_failures`` in the run record;
4. the run fails when ``diff.new_failures`` holds a requirement whose level decides the
   verdict (MUST, and SHOULD under ``--strict-should``): a requirement with a failure
   fingerprint the baseline does not have, even if the requirement failed there on
   another field. ``diff.known`` failures are reported in full but do not fail the run;
   ``diff.fixed`` is listed so the baseline can be refreshed.

A fingerprint is ``REQUIREMENT|request class|path|message`` (conformance.judging.verdict.fingerprint): it
names a defect, not the generated request that showed it, so a baseline keeps its defects
known at another ``--seed`` or ``--max-examples``. What the baseline was taken with (seed,
example count, suite version, every option of ``meta.options``) is compared: a difference
in what is sent is one warning line, one in how it is judged another; a baseline of an
older suite, whose fingerprints named generated requests, is refused.
A requirement "fails" here when at least one exchange failed it, whatever its level; the
level filter belongs to the verdict, not to the diff.
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance.judging.verdict.fingerprint import is_current
from conformance.judging.verdict.recorded_options import JUDGED, SENT, differences
from conformance.judging.verdict.results import Results, Tally
from conformance.judging.verdict.run_info import BaselineDiff

#: What a run was taken with that changes which requests it sends (RunInfo fields), with
#: the option that sets each: a baseline that differs is still used, with a warning.
TAKEN_WITH = (
    ("seed", "--seed"),
    ("max_examples", "--max-examples"),
    ("fuzz", "--fuzz"),
    ("suite_version", "suite version"),
)


def requirement_of(fingerprint: str) -> str:
    """The requirement ID a fingerprint belongs to."""
    return fingerprint.split("|", 1)[0]


def known_failures(baseline: Results) -> frozenset[str]:
    """The requirements failing in the baseline: they fail no test of a run gated by it."""
    return frozenset(t.id for t in baseline.tallies.values() if t.failed)


def _prints(tally: Tally | None) -> set[str]:
    if tally is None or not tally.failed:
        return set()
    # A failure recorded without a fingerprint (it cannot happen in schema 2, but a hand-made
    # file could) still counts, under the requirement alone.
    return set(tally.fingerprints) or {f"{tally.id}|||"}


def compare_to_baseline(current: Results, baseline: Results) -> BaselineDiff:
    """Split the failure fingerprints of ``current`` into known and new; find the fixed ones."""
    known: set[str] = set()
    new: set[str] = set()
    fixed: set[str] = set()
    unverified: set[str] = set()
    new_failures: set[str] = set()
    for rid in set(current.tallies) | set(baseline.tallies):
        mine, theirs = current.tallies.get(rid), baseline.tallies.get(rid)
        now, before = _prints(mine), _prints(theirs)
        known |= now & before
        fresh = now - before
        new |= fresh
        # Past the fingerprint cap a failure cannot be named: more dropped than the
        # baseline dropped means failures the baseline may not have had.
        overflow = (mine.fingerprints_dropped if mine else 0) > (
            theirs.fingerprints_dropped if theirs else 0
        )
        if fresh or (now and overflow):
            new_failures.add(rid)
        if mine is not None and mine.checked:
            fixed |= before - now
        else:
            unverified |= before
    return BaselineDiff(
        known=tuple(sorted(known)),
        new=tuple(sorted(new)),
        fixed=tuple(sorted(fixed)),
        unverified=tuple(sorted(unverified)),
        new_failures=tuple(sorted(new_failures)),
    )


def check_baseline(
    this_run: Mapping[str, object], baseline: Results
) -> tuple[list[str], list[str]]:
    """Whether ``baseline`` may judge this run: (errors that refuse it, warnings to show).

    A baseline of another spec compares different requirements and bounds: refused. One of
    another model or target is allowed (a gateway compared with its upstream), with a
    warning, since its failures may not be the same failures. ``this_run``: what the run
    is taken with (``RunInfo.taken_with``: spec, model, target, seed...).
    """
    errors: list[str] = []
    warnings: list[str] = []
    theirs = baseline.info.taken_with()
    for key, severity in (("spec", errors), ("model", warnings), ("target", warnings)):
        mine, before = this_run.get(key), theirs.get(key)
        if mine is not None and before is not None and mine != before:
            severity.append(
                f"the baseline was recorded with {key} {before!r}, this run uses {mine!r}"
            )
    old = sorted(
        {f for t in baseline.tallies.values() for f in t.fingerprints if not is_current(f)}
    )
    if old:
        # Refused, not compared coarsely: those fingerprints named generated requests, so
        # every failure would be "new" (a red gate for nothing) and a per-requirement
        # comparison would hide new defects of requirements that already failed.
        errors.append(
            f"its fingerprints are of an older suite (e.g. {old[0]!r}): re-take the baseline "
            "with this version (run once without --baseline and keep its results.json)"
        )
    if differs := taken_with_differences(this_run, theirs):
        warnings.append(
            f"the baseline was taken with {differs}: its defects are matched by fingerprint, "
            "but requests it never drew may find more"
        )
    if judged := differences(this_run, theirs, JUDGED):
        warnings.append(
            f"the baseline was judged with {', '.join(judged)}: a failure new or fixed "
            "against it may come from the judging, not from the target"
        )
    return errors, warnings


def taken_with_differences(mine: Mapping[str, object], theirs: Mapping[str, object]) -> str:
    """``seed 0 (this run: 1), --max-examples 10 (this run: 20)``, or empty."""
    parts = []
    for key, option in TAKEN_WITH:
        now, before = mine.get(key), theirs.get(key)
        if now is not None and before is not None and now != before:
            parts.append(f"{option} {before} (this run: {now})")
    # The other options that change what is sent (meta.options), each compared once.
    parts += differences(mine, theirs, SENT, skip=(option for _, option in TAKEN_WITH))
    return ", ".join(parts)
