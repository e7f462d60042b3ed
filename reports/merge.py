"""``conformance-merge``: one report and one verdict from the results of several shards.

    conformance-merge SHARD1.json SHARD2.json ... [--report-dir DIR]

Each shard (``pytest conformance --shard K/N``, or an xdist-free CI job) writes its own
results.json; this folds them together, writes junit.xml, report.html and results.json
into DIR and exits 0 when no deciding requirement failed, 1 when one did, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.results import Results
from reports import write_all
from reports.compare import InputError, load_results
from reports.summary import is_strict

PROG = "conformance-merge"


def merge(runs: list[Results]) -> Results:
    """Fold the shards' results into one, with the verdict of the whole."""
    merged = Results()
    for run in runs:
        merged.merge(run)
    merged.meta.pop("shard", None)
    merged.meta["shards"] = len(runs)
    merged.meta["wall_time"] = max(float(r.meta.get("wall_time", 0)) for r in runs)
    verdicts = {r.meta.get("verdict") for r in runs}
    failing = merged.failing(strict=is_strict(merged))
    if failing:
        merged.meta["verdict"] = "failed"
    elif verdicts <= {"passed"}:
        merged.meta["verdict"] = "passed"
    else:
        merged.meta["verdict"] = next(
            v for v in ("error", "no-verdict", "not-run") if v in verdicts
        )
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.json of each shard")
    parser.add_argument("--report-dir", type=Path, default=Path("reports/out"))
    args = parser.parse_args(argv)
    try:
        runs = [load_results(path) for path in args.results]
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    merged = merge(runs)
    for path in write_all(merged, args.report_dir):
        print(f"report: {path}")
    print(f"verdict: {merged.meta['verdict']} ({len(runs)} shards)")
    return 0 if merged.meta["verdict"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
