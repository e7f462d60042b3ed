"""THE wrap-up of a run: attributed, compared with a baseline, recorded and decided, once.

Every door ends a run here: the run (conformance.run.assembly.conclude, a whole run or one
shard), the judge of traffic (each snapshot, per model and over all:
conformance.judging.traffic_judge) and ``conformance-merge`` (the shards folded by
:func:`fold_shards`: :func:`merge`). :func:`conclude`, in this order:

1. attribution (one defect, one finding: conformance.judging.verdict.attribution), before
   anything reads the tallies;
2. what the caller records only now: ``record`` (the shards' combined record, which
   replaces what the parts recorded) and ``settle`` (judged traffic's context, record and
   what traffic cannot show, all read from the attributed tallies);
3. the baseline: the diff in ``info.baseline``, the requirements failing there known and
   those failing here with a new fingerprint in the record
   (conformance.judging.verdict.baseline);
4. what the runner saw break (``errors``), how a Ctrl-C stopped it (``interrupted``), the
   client's figures;
5. ``decide()`` (conformance.judging.verdict.decision), kept on the Results and returned.

Every write goes through the Results' own methods (conformance.judging.verdict.state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from conformance.judging.verdict.attribution import attribute
from conformance.judging.verdict.baseline import compare_to_baseline, known_failures
from conformance.judging.verdict.decision import decide, recorded_record
from conformance.judging.verdict.record import RunRecord, combine_shards
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.verdict import Verdict


def conclude(
    results: Results,
    baseline: Results | None = None,
    *,
    baseline_file: str | None = None,
    record: RunRecord | None = None,
    settle: Callable[[Results], None] | None = None,
    errors: Iterable[str] = (),
    interrupted: str | None = None,
    figures: Mapping[str, int] | None = None,
    partial: bool = False,
) -> Verdict:
    """Attribute, record, compare with ``baseline`` and decide the verdict of ``results``;
    the verdict is kept on them (``results.verdict``) and returned.

    ``baseline``: an accepted earlier run (``--baseline``), read from ``baseline_file``.
    ``record``: the record to decide from, set once attribution is done (the shards'
    combined record). ``settle``: called with the attributed Results to record what
    depends on them. ``errors``: what the runner saw break; ``interrupted``: how a Ctrl-C
    stopped the run; ``figures``: the client's (results.json ``meta.client``).
    ``partial``: the Results are one shard's, whose untested MUSTs the merge decides.
    """
    attribute(results)  # one defect, one finding: before the baseline and the verdict
    if record is not None:
        results.set_record(record)
    if settle is not None:
        settle(results)
    if baseline is not None:
        diff = compare_to_baseline(results, baseline)
        if baseline_file is not None:
            diff = replace(diff, file=baseline_file)
        # Gated so: what failed there is known, unless it fails here with a new fingerprint.
        results.note_baseline(diff, known_failures(baseline))
    if broke := tuple(errors):
        results.note_errors(*broke)
    if interrupted:
        results.note_interrupted(interrupted)
    if figures is not None:
        results.note_client(figures)
    return results.decided(decide(results, partial=partial))


def shard_record(results: Results) -> RunRecord:
    """A shard's run record (from what it recorded when it kept none: an older
    results.json)."""
    record = results.run_record
    return recorded_record(results) if record.blank else record


def fold_shards(runs: Sequence[Results]) -> Results:
    """The shards' Results folded into the whole run's: tallies, capabilities, latency, what
    each saw and recorded (the record of the whole is combine_shards', set by conclude)."""
    merged = Results()
    for run in runs:
        merged.merge(run)
    merged.note_merged(len(runs), max(float(r.info.wall_time or 0) for r in runs))
    return merged


def merge(
    runs: Sequence[Results],
    baseline: Results | None = None,
    record: RunRecord | None = None,
    *,
    baseline_file: str | None = None,
) -> tuple[Results, Verdict]:
    """Fold the shards' results into one and decide its verdict, as the unsharded run's.

    ``record``: the shards' combined run record (combine_shards), combined here when not
    given (ShardMismatch unless ``runs`` are the shards of one run, each exactly once).
    With ``baseline``, the whole is gated like a single run of ``--baseline``.
    """
    if record is None:
        record = combine_shards([(str(i), shard_record(r)) for i, r in enumerate(runs)])
    merged = fold_shards(runs)
    verdict = conclude(merged, baseline, baseline_file=baseline_file, record=record)
    return merged, verdict
