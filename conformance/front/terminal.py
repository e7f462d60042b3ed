"""The run's closing lines, printed after pytest's own summary so that pytest's footer
("3 passed, 24 skipped") is never the last word: what was spent and seen, what failed
(deciding and advisory), the capabilities not offered, what was not run or not tested and
why, the report files, one line of counts, and the verdict last."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.judging.document.spec import Spec
from conformance.judging.verdict.events import Event, RunFinished
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.verdict import Verdict
from conformance.run.engine import status_summary

SHOWN = 12  # untested requirements listed one per line; the rest are counted
SHOWN_IDS = 8  # deselected requirement IDs named on their line


def closing_lines(
    verdict: Verdict,
    results: Results,
    spec: Spec,
    reports: Iterable[Path],
    notes: Iterable[str],
    *,
    tests_deselected: int = 0,
) -> list[str]:
    lines = [*notes, status_summary(results, spec), *sent_alone_lines(results)]
    info = results.info
    if info.baseline is not None:
        from conformance.reports.baseline import baseline_line

        lines.append(baseline_line(info.baseline))
        lines += [f"baseline warning: {w}" for w in info.baseline_warnings or ()]
    from conformance.reports.summary import intermittent_note, refused_of

    deciding = {rid for rid, _, _ in verdict.failed}
    for rid, failed, checked in verdict.failed:
        tally = results.tallies[rid]
        note = intermittent_note(tally)
        lines.append(
            f"failed {tally.level}: {rid} on {failed} of {checked} exchange(s)"
            + (f" ({note})" if note else "")
        )
    advisory = [t for t in results.tallies.values() if t.failed and t.id not in deciding]
    for t in advisory:
        why = "known: in the baseline" if t.level == "MUST" else "advisory: does not decide"
        note = intermittent_note(t)
        why += f"; {note}" if note else ""
        lines.append(f"failed {t.level} ({why}): {t.id} on {t.failed} of {t.checked} exchange(s)")
    errored = [t for t in results.tallies.values() if t.errored]
    lines += [
        f"suite error: the check of {t.id} raised on {t.errored} exchange(s)" for t in errored
    ]
    missing = {f: e for f, e in sorted(results.capabilities.items()) if e.outcome != "offered"}
    for feature, entry in missing.items():
        detail = f" ({entry.detail})" if entry.detail else ""
        lines.append(f"capability {feature}: {entry.outcome}{detail}")
    refused = refused_of(results)
    if refused is not None:
        lines.append(refused.line())
        lines += [f"refused: {message}" for message in refused.examples[:SHOWN]]
    lines += _not_run(results, tests_deselected)
    untested = verdict.coverage.untested
    shard = f" (in shard {info.shard})" if info.shard is not None else ""
    for u in untested[:SHOWN]:
        lines.append(f"untested MUST{shard}: {u.id}: {u.reason}")
    if len(untested) > SHOWN:
        lines.append(f"untested MUST: ... and {len(untested) - SHOWN} more (see the reports)")
    deselected = verdict.coverage.deselected
    if deselected:
        named = ", ".join(deselected[:SHOWN_IDS]) + (", ..." if len(deselected) > SHOWN_IDS else "")
        lines.append(
            f"deselected: {len(deselected)} MUST requirement(s) by --checks/--skip-checks "
            f"(not tested, not counted): {named}"
        )
    # Each with its reason: a stated reason is what lets a run pass without judging it.
    not_applicable = verdict.coverage.not_applicable
    for u in not_applicable[:SHOWN]:
        lines.append(f"not applicable MUST: {u.id}: {u.reason}")
    if len(not_applicable) > SHOWN:
        lines.append(
            f"not applicable MUST: ... and {len(not_applicable) - SHOWN} more (see the reports)"
        )
    lines += [f"report: {path}" for path in reports]
    counts: dict[str, int] = {}
    for rid in deciding:
        what = f"{results.tallies[rid].level} failed"
        counts[what] = counts.get(what, 0) + 1
    for t in advisory:
        what = f"{t.level} failed ({'known' if t.level == 'MUST' else 'advisory'})"
        counts[what] = counts.get(what, 0) + 1
    counts |= {
        "suite error(s)": len(errored),
        "capability(ies) not offered": len(missing),
        "MUST untested": len(untested),
        "MUST deselected": len(deselected),
        "MUST not applicable": len(verdict.coverage.not_applicable),
    }
    shown = [f"{n} {what}" for what, n in counts.items() if n]
    lines.append("counts: " + (", ".join(shown) or "nothing failed, untested or left out"))
    lines.append(verdict_line(verdict, results))
    return lines


def sent_alone_lines(results: Results) -> list[str]:
    """The time-outs met beside other requests that were answered alone: not findings, and
    the requests that held the target, each named once."""
    entries = results.info.sent_alone or ()
    if not entries:
        return []
    holders = sorted({e.held_by for e in entries if e.held_by})
    out = [
        f"sent again alone: {len(entries)} request(s) met a time-out or a cut while others "
        "were in flight and were answered alone (not findings; results.json meta.sent_alone)"
    ]
    out += [f"the target was held by: {held}" for held in holders[:SHOWN_IDS]]
    return out


def _not_run(results: Results, tests_deselected: int) -> list[str]:
    """What was not run, and why: skipped scenarios (with the requirements they leave
    unjudged) and suite tests deselected on pytest's side (-k, -m, --shard...)."""
    lines, seen = [], set()
    for run in results.run_record.scenarios:  # the record the verdict was decided from
        if run.cause is None or (run.cause, run.reason) in seen:
            continue
        seen.add((run.cause, run.reason))
        leaves = f" (leaves {', '.join(run.covers)} unjudged)" if run.covers else ""
        cut = f", {run.unsent} request(s) unsent" if run.unsent else ""
        lines.append(f"not run ({run.cause}{cut}): {run.id}: {run.reason}{leaves}")
    if tests_deselected:
        lines.append(
            f"not run: {tests_deselected} suite test(s) deselected (pytest -k/-m, --shard); "
            "their requirements count as untested unless another test judged them"
        )
    return lines


def shard_words(verdict: Verdict, shard: str) -> str:
    """What a shard's own verdict says, in words that leave the run's verdict to the merge:
    a shard judges only its slice, so "passed" over MUSTs other shards test would be false."""
    if verdict.word == "passed":
        parts = [f"shard {shard}: nothing failed"]
    else:
        parts = [f"shard {shard}: {verdict.word} here: {', '.join(verdict.reasons)}"]
    untested = len(verdict.coverage.untested)
    if untested:
        parts.append(f"{untested} MUST untested in this shard, which other shards may test")
    parts.append("conformance-merge over every shard's results.json gives the run's verdict")
    return f"left to the merge ({'; '.join(parts)})"


def verdict_line(verdict: Verdict, results: Results) -> str:
    spent = results.spent
    why = f" ({'; '.join(verdict.reasons)})" if verdict.reasons else ""
    shard = results.info.shard
    said = shard_words(verdict, str(shard)) if shard else f"{verdict.word}{why}"
    return (
        f"verdict: {said}; spent {spent.requests} requests, "
        f"{spent.tokens} tokens, {spent.retries} retries; "
        f"{results.info.wall_time or 0.0:.1f} s"
    )


@dataclass
class ClosingBlock:
    """A listener of the run's events that builds the closing lines when it hears
    RunFinished (the reports already written: ``reports`` says which), verdict last."""

    spec: Spec
    reports: Callable[[], Iterable[Path]] = tuple
    notes: tuple[str, ...] = ()
    tests_deselected: int = 0
    lines: list[str] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.lines = closing_lines(
                event.verdict,
                event.results,
                self.spec,
                self.reports(),
                self.notes,
                tests_deselected=self.tests_deselected,
            )
