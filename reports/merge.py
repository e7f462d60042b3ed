"""``conformance-merge``: one report and one verdict from the results of several shards.

    conformance-merge SHARD1.json SHARD2.json ... [--report-dir DIR]

Each shard (``pytest conformance --shard K/N``, or an xdist-free CI job) writes its own
results.json; this folds them together, writes every report (junit.xml, report.html,
results.json, summary.md) into DIR and exits 0 when the verdict is passed, 1 otherwise,
2 on bad input. Shards must agree on spec, target, model and shard count, and cover
1..N exactly once: otherwise one ``conformance-merge: error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.results import Results
from reports import write_all
from reports.compare import InputError, load_results
from reports.summary import is_strict

PROG = "conformance-merge"
#: What every shard of one run has in common.
SAME = ("spec", "target", "model")


def check_shards(runs: list[tuple[str, Results]]) -> None:
    """Raise InputError unless ``runs`` are the shards of one run, each exactly once."""
    for key in SAME:
        values = {name: r.meta.get(key) for name, r in runs}
        if len(set(map(repr, values.values()))) > 1:
            listed = ", ".join(f"{name}: {v!r}" for name, v in values.items())
            raise InputError(f"the shards are of different {key}s ({listed})")
    shards = {name: r.meta.get("shard") for name, r in runs}
    if all(s is None for s in shards.values()):
        return  # whole runs (e.g. xdist-free jobs): nothing to pair up
    parsed: dict[str, tuple[int, int]] = {}
    for name, shard in shards.items():
        try:
            k, n = (int(x) for x in str(shard).split("/"))
        except ValueError:
            raise InputError(f"{name}: shard {shard!r} is not K/N") from None
        parsed[name] = (k, n)
    counts = {n for _, n in parsed.values()}
    if len(counts) > 1:
        listed = ", ".join(f"{name}: {k}/{n}" for name, (k, n) in parsed.items())
        raise InputError(f"the shards are of different shard counts ({listed})")
    total = counts.pop()
    seen = Counter(k for k, _ in parsed.values())
    doubled = sorted(k for k, c in seen.items() if c > 1)
    missing = [k for k in range(1, total + 1) if k not in seen]
    if doubled:
        raise InputError(f"shard {', '.join(f'{k}/{total}' for k in doubled)} given twice")
    if missing:
        raise InputError(f"shard {', '.join(f'{k}/{total}' for k in missing)} missing")


def merge_coverage(runs: list[Results], merged: Results) -> dict[str, Any]:
    """The coverage of the whole: a requirement untested in one shard may be tested in another."""
    untested: dict[str, str] = {}
    not_applicable: dict[str, str] = {}
    deselected: set[str] = set()
    for run in runs:
        coverage = run.meta.get("coverage") or {}
        for entry in coverage.get("untested") or []:
            untested.setdefault(entry["id"], entry.get("reason", ""))
        for entry in coverage.get("not_applicable") or []:
            not_applicable.setdefault(entry["id"], entry.get("reason", ""))
        deselected |= set(coverage.get("deselected") or [])
    tested = {rid for rid, t in merged.tallies.items() if t.checked}
    return {
        "untested": [
            {"id": rid, "reason": why}
            for rid, why in untested.items()
            if rid not in tested and rid not in not_applicable
        ],
        "not_applicable": [{"id": rid, "reason": why} for rid, why in not_applicable.items()],
        "deselected": sorted(deselected),
    }


def merge(runs: list[Results]) -> Results:
    """Fold the shards' results into one, with the verdict of the whole.

    Verdict, first that holds: ``error`` (a check raised, or a shard ended in error),
    ``failed``, ``no-verdict`` (a shard was rate limited), ``incomplete`` (a MUST left
    untested in every shard), ``passed``.
    """
    merged = Results()
    for run in runs:
        merged.merge(run)
    merged.meta.pop("shard", None)
    merged.meta["shards"] = len(runs)
    merged.meta["wall_time"] = max(float(r.meta.get("wall_time", 0)) for r in runs)
    if any("coverage" in r.meta for r in runs):
        merged.meta["coverage"] = merge_coverage(runs, merged)
    verdicts = {r.meta.get("verdict") for r in runs}
    if merged.errors() or "error" in verdicts:
        verdict = "error"
    elif merged.failing(strict=is_strict(merged)):
        verdict = "failed"
    elif "no-verdict" in verdicts:
        verdict = "no-verdict"
    elif (merged.meta.get("coverage") or {}).get("untested"):
        verdict = "incomplete"
    elif verdicts <= {"passed", "incomplete"}:
        verdict = "passed"
    else:
        verdict = next(iter(sorted(str(v) for v in verdicts - {"passed", "incomplete"})))
    merged.meta["verdict"] = verdict
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.json of each shard")
    parser.add_argument("--report-dir", type=Path, default=Path("reports/out"))
    args = parser.parse_args(argv)
    try:
        runs = [load_results(path) for path in args.results]
        check_shards([(str(p), r) for p, r in zip(args.results, runs, strict=True)])
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
