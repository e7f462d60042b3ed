"""The run's verdict, decided once, from the tallies and the typed run record.

Never a false green: a run is ``passed`` only when every MUST requirement that applies
was exercised and held, or has a stated reason why it could not apply (the spec does not
declare the feature, the target declined it with a proper 4xx, it was deselected, no API
key was given to probe auth with), and
every scenario ran, or was not run for one of those reasons. A budget that cut the run
short, a missing generator, a probe the target left nothing for: ``incomplete``, naming
what was not run. A run Ctrl-C stopped is ``interrupted``, whatever it saw until then.
Every door ends a run with conformance.judging.verdict.conclusion.conclude (a run, the
traffic judge, conformance-merge), which calls :func:`decide`; the reports and the tools
call it (:func:`verdict_of`) for a results.json that kept no record. None decides on its own. The verdict's types (``Verdict``,
``Coverage``, ``Word``) are conformance.judging.verdict.verdict's, below the Results that keep one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from conformance.judging.checks import load_checks
from conformance.judging.requirements import REGISTRY, Level
from conformance.judging.verdict.outcomes import Word
from conformance.judging.verdict.record import RunRecord, ScenarioRun, SkipCause, scenario_names
from conformance.judging.verdict.verdict import Coverage, Uncovered, Verdict, deciding_levels

if TYPE_CHECKING:
    from conformance.judging.document.spec import Spec
    from conformance.judging.verdict.results import Results, Tally


def applicability(spec: Spec, selected: Callable[[str], bool]) -> dict[str, Any]:
    """The record's view of the registry under ``spec``: every MUST, why each that cannot
    apply under ``spec`` does not, and the deselected ones (RunRecord fields)."""
    load_checks()
    musts = tuple(rid for rid, req in REGISTRY.items() if req.under(spec).level == Level.MUST)
    not_applicable = {}
    for rid in musts:
        reason = REGISTRY[rid].not_applicable(spec)
        if reason:
            not_applicable[rid] = reason
    deselected = tuple(rid for rid in musts if not selected(rid))
    return {"musts": musts, "not_applicable": not_applicable, "deselected": deselected}


def coverage(results: Results, record: RunRecord) -> Coverage:
    """Where each applicable MUST requirement ended, when it ended neither passed nor failed."""
    # Per requirement, the skip that left it unjudged; one a pass cannot excuse wins, so the
    # order the items were played in (or the shards merged in) never matters.
    skipped: dict[str, ScenarioRun] = {}
    for run in sorted(record.scenarios, key=lambda r: (r.excused, r.id, r.reason)):
        if run.cause is not None and run.unsent == 0:
            for rid in run.covers:
                skipped.setdefault(rid, run)
    untested, not_applicable, deselected = [], [], []
    for rid in record.musts:
        if rid in record.deselected:
            deselected.append(rid)
            continue
        tally = results.tallies.get(rid)
        if tally is not None and (tally.failed or tally.checked > tally.unsupported):
            continue  # exercised: passed or failed
        reason = record.not_applicable.get(rid)
        declined, feature = _feature_reason(results, rid)
        if reason:
            not_applicable.append(Uncovered(rid, reason))
        elif declined:
            not_applicable.append(Uncovered(rid, feature))
        elif tally is not None and tally.unsupported:
            why = f"the target declined the feature with a proper 4xx ({tally.unsupported}x)"
            not_applicable.append(Uncovered(rid, why))
        elif rid in skipped and skipped[rid].excused:
            not_applicable.append(Uncovered(rid, f"scenario skipped: {skipped[rid].reason}"))
        elif feature:
            untested.append(Uncovered(rid, feature))
        elif tally is not None and tally.not_judged:
            untested.append(Uncovered(rid, f"withheld: {'; '.join(tally.not_judged)}"))
        elif rid in skipped and skipped[rid].cause == SkipCause.NOT_OBSERVABLE:
            untested.append(Uncovered(rid, skipped[rid].reason))  # traffic says why itself
        elif rid in skipped:
            untested.append(Uncovered(rid, f"scenario not run: {skipped[rid].reason}"))
        elif record.interrupted:
            untested.append(Uncovered(rid, "not exercised before the run was interrupted"))
        elif record.budget:
            untested.append(Uncovered(rid, f"not exercised before the {record.budget}"))
        else:
            untested.append(Uncovered(rid, "no exchange of this run exercised it"))
    return Coverage(tuple(untested), tuple(not_applicable), tuple(deselected))


def _feature_reason(results: Results, rid: str) -> tuple[bool, str]:
    """Why a requirement that needs request features (``Requirement.needs``) was left
    untested, from the capability table: (True, the decline) when the target declined one
    of them with a proper 4xx, a stated reason; (False, what it did) when it ignored or broke
    one, the true reason it stays untested; (False, "") when the table says nothing.

    A feature's forms (``stop:max``, ``stop:string``) speak for it only when none of its
    entries shows it offered: ``logprobs`` offered and ``logprobs:max`` declined, or
    ``stop:max`` offered and ``stop:string`` declined, leave the requirement judgeable, so
    the decline of one form is no reason for it to stay unjudged."""
    req = REGISTRY.get(rid)
    table = results.capabilities
    entries = []
    for need in req.needs if req is not None else ():
        forms = sorted((f, e) for f, e in table.items() if f == need or f.startswith(need + ":"))
        if not any(e.outcome == "offered" for _, e in forms):
            entries += forms
    for name, entry in entries:
        if entry.outcome == "declined":
            return True, f"the target declined `{name}`: {entry.detail}"
    from conformance.judging.verdict.capabilities import owners

    for name, entry in entries:
        if entry.outcome in ("ignored", "broken"):
            prefixes = owners(name)
            shown = [
                t.id for t in results.tallies.values() if t.failed and t.id.startswith(prefixes)
            ]
            why = f" ({', '.join(sorted(shown))} failed)" if shown and prefixes else ""
            return False, f"the target {entry.outcome} `{name}`: {entry.detail}{why}"
    return False, ""


def failing(results: Results, record: RunRecord) -> list[Tally]:
    """The requirements whose failures decide: deciding level, not known from the baseline
    (unless failing with a new fingerprint), or any whose check raised."""
    new = frozenset(record.baseline_new_failures or ())
    known = frozenset(record.known_failures) - new
    return results.failing(strict=record.strict, known=known)


def unmet_capabilities(results: Results, required: Iterable[str]) -> list[str]:
    """The required capabilities the target did not offer (conformance.judging.verdict.capabilities.unmet)."""
    names = list(required)
    if not names:
        return []
    from conformance.judging.verdict import capabilities

    return list(capabilities.unmet(results, names))


def _unrun_reasons(record: RunRecord) -> tuple[list[str], tuple[tuple[str, str, str], ...]]:
    unrun = record.unrun()
    listed = tuple((s.id, str(s.cause), s.reason) for s in unrun)
    reasons = []
    cut = [s for s in unrun if s.cause == SkipCause.BUDGET]
    if cut:
        note = record.budget or "the budget ran out"
        reasons.append(
            f"{len(cut)} scenario item(s) not run or cut short because {note}: "
            f"{scenario_names(cut)}"
        )
    elif record.budget:
        reasons.append(f"the run was cut short: {record.budget}")
    unseen = sorted({rid for s in unrun if s.cause == SkipCause.NOT_OBSERVABLE for rid in s.covers})
    if unseen:
        reasons.append(
            f"{len(unseen)} MUST requirement(s) not observable from traffic: {', '.join(unseen)}"
        )
    other = [s for s in unrun if s.cause not in (SkipCause.BUDGET, SkipCause.NOT_OBSERVABLE)]
    for s in other:
        reasons.append(f"scenario {s.id} not run ({s.cause}): {s.reason}")
    return reasons, listed


def recorded_record(results: Results) -> RunRecord:
    """The record of a run that kept none (an older results.json), from what it recorded:
    identity, selection and coverage as recorded (the MUSTs it left untested stay so
    unless another shard's tallies exercised them; a recorded error, no-verdict or
    interruption stays one)."""
    info, verdict = results.info, results.verdict
    cover = verdict.coverage if verdict is not None else Coverage()
    untested = [u.id for u in cover.untested]
    excused = {u.id: u.reason for u in cover.not_applicable}
    deselected = tuple(cover.deselected)
    word = verdict.word if verdict is not None else None
    return RunRecord(
        shards=(info.shard,) if info.shard else (),
        seed=info.seed if isinstance(info.seed, int) else None,
        spec=info.spec or "",
        contract=info.contract or "",
        target=info.target or "",
        model=info.model or "",
        strict=bool(info.strict),
        musts=tuple(dict.fromkeys([*untested, *excused, *deselected])),
        not_applicable=excused,
        deselected=deselected,
        errors=("recorded verdict: error",) if word == Word.ERROR else (),
        no_verdict="recorded verdict: no-verdict" if word == Word.NO_VERDICT else None,
        interrupted="recorded verdict: interrupted" if word == Word.INTERRUPTED else None,
    )


def decide(results: Results, record: RunRecord | None = None, *, partial: bool = False) -> Verdict:
    """The run's verdict from its merged tallies and its record (``results.run_record``
    unless given), the first that holds: interrupted (Ctrl-C stopped it), error (a check
    raised, the runner saw a suite defect), failed, no-verdict (rate limited), incomplete,
    passed.

    ``partial``: the Results are one shard of a run; what a shard did not cover is listed
    but judged only once the shards are merged (conformance-merge), so it does not decide.
    """
    if record is None:
        record = results.run_record
        record = recorded_record(results) if record.blank else record
    failing_now = failing(results, record)
    failed = tuple((t.id, t.failed, t.checked) for t in failing_now)
    # A requirement whose check raised decides too, but as "error" (a suite defect), not as
    # a failure of the target, unless the target also failed it.
    levels = deciding_levels(strict=record.strict)
    failing_now = [t for t in failing_now if t.failed and t.level in levels]
    cover = coverage(results, record)
    errors = [t.id for t in results.errors()]
    unmet = unmet_capabilities(results, record.require_capabilities)
    reasons: list[str] = []
    if failing_now:
        ids = ", ".join(t.id for t in failing_now)
        reasons.append(f"{len(failing_now)} requirement(s) failed: {ids}")
    if unmet:
        reasons.append(f"required capabilities not offered: {', '.join(unmet)}")
    unrun_reasons, unrun = _unrun_reasons(record)
    if record.interrupted:
        # First: a run stopped half-way vouches for nothing, whatever it saw until then
        # (what failed or broke is still said, and reported).
        broke = [*record.errors, *(f"a check raised: {rid}" for rid in errors)]
        return Verdict(
            Word.INTERRUPTED, (record.interrupted, *broke, *reasons), failed, cover, unrun
        )
    if record.errors or errors:
        # A suite defect first: a judge that broke cannot vouch for any other word.
        raised = f"a check raised an unexpected error: {', '.join(errors)}"
        why = record.errors[0] if record.errors else raised
        return Verdict(Word.ERROR, (why, *reasons), failed, cover, unrun)
    if failing_now or unmet:
        return Verdict(Word.FAILED, tuple(reasons), failed, cover, unrun)
    if record.no_verdict:
        return Verdict(Word.NO_VERDICT, (record.no_verdict,), failed, cover, unrun)
    untested = bool(cover.untested) and not partial
    if untested or unrun_reasons:
        if untested:
            unrun_reasons.insert(0, f"{len(cover.untested)} MUST requirement(s) untested")
        return Verdict(Word.INCOMPLETE, tuple(unrun_reasons), failed, cover, unrun)
    return Verdict(Word.PASSED, (), failed, cover, unrun)


def verdict_of(results: Results) -> Verdict:
    """The verdict a report shows: the one decided at the end of the run when the run kept
    its record, else decided now from what it recorded (an older results.json): its
    recorded word, but never ``passed`` over what ``decide`` finds untested, failed or
    broken."""
    recorded = results.verdict
    if recorded is not None and not results.run_record.blank:
        return recorded
    decided = decide(results)
    if recorded is None or recorded.word == Word.PASSED:
        return decided
    return recorded


def verdict_word(results: Results) -> Word:
    """The word of :func:`verdict_of`."""
    return verdict_of(results).word
