"""``conformance-merge``: one report and one verdict from the results of several shards.

    conformance-merge SHARD1.json SHARD2.json ... [--report-dir DIR] [--baseline FILE]

Each shard (``pytest conformance --shard K/N``) writes its own results.json; this folds
them together, writes every report (junit.xml, report.html, results.json, summary.md) into
DIR and exits with the verdict's exit code (0 passed, 1 failed, 7 incomplete...), 2 on bad
input. The verdict is the judge core's ``decide()`` over the merged tallies and the shards'
combined run record (conformance.judging.combine_shards), so it is the unsharded run's:
required capabilities, the budget, skipped scenarios and strictness all count. Shards must
agree on spec, target, model, strictness, required capabilities and seed, and cover 1..N
exactly once (a doubled shard, the same run given twice, or whole runs are refused): else
one ``conformance-merge: error:`` line, exit 4 (bad input). With ``--baseline``, the whole is gated
like a single run: only new failure fingerprints fail it (a baseline of another spec is
refused, of another model or target warned about).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from conformance.front.compare import InputError, load_results
from conformance.judging.verdict.attribution import attribute
from conformance.judging.verdict.decision import decide, recorded_record
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.verdict.record import RunRecord, ShardMismatch, combine_shards
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.verdict import Verdict
from conformance.reports import write_all
from conformance.reports.baseline import check_baseline, compare_to_baseline

PROG = "conformance-merge"


def record_of(results: Results) -> RunRecord:
    """The shard's run record (from what it recorded when it kept none: an older
    results.json)."""
    record = results.run_record
    return recorded_record(results) if record.blank else record


def check_shards(runs: list[tuple[str, Results]]) -> RunRecord:
    """The run record of the whole; InputError unless ``runs`` are the shards of one run,
    each exactly once."""
    try:
        return combine_shards([(name, record_of(r)) for name, r in runs])
    except ShardMismatch as exc:
        raise InputError(str(exc)) from None


def merge(
    runs: list[Results], baseline: Results | None = None, record: RunRecord | None = None
) -> tuple[Results, Verdict]:
    """Fold the shards' results into one and decide its verdict (the judge core's).

    ``record``: the shards' combined run record (check_shards), combined here when not given.
    """
    if record is None:
        record = combine_shards([(str(i), record_of(r)) for i, r in enumerate(runs)])
    merged = Results()
    for run in runs:
        merged.merge(run)
    merged.info.unset("shard")
    merged.info.shards = len(runs)
    merged.info.wall_time = max(float(r.info.wall_time or 0) for r in runs)
    attribute(merged)  # a witness shown wrong in one shard is no evidence in another
    if baseline is not None:
        diff = compare_to_baseline(merged, baseline)
        merged.info.baseline = diff
        # Gated like a single run of --baseline: what failed there is known, unless it
        # fails here with a new fingerprint.
        known = {*record.known_failures, *(t.id for t in baseline.tallies.values() if t.failed)}
        record = record.with_(
            known_failures=tuple(sorted(known)), baseline_new_failures=tuple(diff.new_failures)
        )
    merged.run_record = record
    return merged, merged.decided(decide(merged))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.json of each shard")
    parser.add_argument("--report-dir", type=Path, default=Path("reports/out"))
    parser.add_argument("--baseline", type=Path, help="results.json of an accepted earlier run")
    args = parser.parse_args(argv)
    try:
        runs = [load_results(path) for path in args.results]
        record = check_shards([(str(p), r) for p, r in zip(args.results, runs, strict=True)])
        baseline = load_results(args.baseline) if args.baseline else None
        warnings: list[str] = []
        if baseline is not None:
            errors, warnings = check_baseline(runs[0].info.taken_with(), baseline)
            if errors:
                raise InputError(f"--baseline {args.baseline}: {errors[0]}")
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return BAD_INPUT
    merged, verdict = merge(runs, baseline, record)
    if warnings:
        merged.info.baseline_warnings = tuple(warnings)
    if merged.info.baseline is not None:
        merged.info.baseline = replace(merged.info.baseline, file=str(args.baseline))
    for path in write_all(merged, args.report_dir):
        print(f"report: {path}")
    why = f"; {'; '.join(verdict.reasons)}" if verdict.reasons else ""
    print(f"verdict: {verdict.word} ({len(runs)} shards{why})")
    return verdict.exit_code


if __name__ == "__main__":
    sys.exit(main())
