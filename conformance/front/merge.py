"""``conformance-merge``: one report and one verdict from the results of several shards.

    conformance-merge SHARD1.json SHARD2.json ... [--report-dir DIR] [--baseline FILE]

Each shard (``pytest conformance --shard K/N``) writes its own results.json; this folds
them together, writes every report (junit.xml, report.html, results.json, summary.md) into
DIR and exits with the verdict's exit code (0 passed, 1 failed, 7 incomplete...), 2 on bad
input. The fold and the verdict are the judge core's (conformance.judging.verdict.conclusion:
``merge`` folds the Results and ``conclude`` decides over the merged tallies and the
shards' combined run record, conformance.judging.verdict.record.combine_shards), so the
verdict is the unsharded run's: required capabilities, the budget, skipped scenarios and
strictness all count. Shards must agree on spec, target, model, strictness, required
capabilities and seed, and cover 1..N exactly once (a doubled shard, the same run given
twice, or whole runs are refused): else one ``conformance-merge: error:`` line, exit 4 (bad
input). With ``--baseline``, the whole is gated like a single run: only new failure
fingerprints fail it (a baseline of another spec is refused, of another model or target
warned about).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.front.compare import InputError, load_results
from conformance.front.option_table import MERGE, add_arguments
from conformance.judging.verdict.baseline import check_baseline
from conformance.judging.verdict.conclusion import merge, shard_record
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.verdict.record import RunRecord, ShardMismatch, combine_shards
from conformance.judging.verdict.results import Results
from conformance.reports import write_all

PROG = "conformance-merge"


def check_shards(runs: list[tuple[str, Results]]) -> RunRecord:
    """The run record of the whole; InputError unless ``runs`` are the shards of one run,
    each exactly once."""
    try:
        return combine_shards([(name, shard_record(r)) for name, r in runs])
    except ShardMismatch as exc:
        raise InputError(str(exc)) from None


def parser() -> argparse.ArgumentParser:
    """conformance-merge's parser: the shards' results, then its options from the table."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.json of each shard")
    add_arguments(parser, MERGE)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report_dir = Path(args.report_dir)
    baseline_path = Path(args.baseline) if args.baseline else None
    try:
        runs = [load_results(path) for path in args.results]
        record = check_shards([(str(p), r) for p, r in zip(args.results, runs, strict=True)])
        baseline = load_results(baseline_path) if baseline_path else None
        warnings: list[str] = []
        if baseline is not None:
            errors, warnings = check_baseline(runs[0].info.taken_with(), baseline)
            if errors:
                raise InputError(f"--baseline {args.baseline}: {errors[0]}")
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return BAD_INPUT
    file = None if args.baseline is None else str(args.baseline)
    merged, verdict = merge(runs, baseline, record, baseline_file=file)
    if warnings:
        merged.note_baseline_warnings(warnings)
    for path in write_all(merged, report_dir):
        print(f"report: {path}")
    why = f"; {'; '.join(verdict.reasons)}" if verdict.reasons else ""
    print(f"verdict: {verdict.word} ({len(runs)} shards{why})")
    return verdict.exit_code


if __name__ == "__main__":
    sys.exit(main())
