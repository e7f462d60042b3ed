"""``conformance-merge``: one report and one verdict from the results of several shards.

    conformance-merge SHARD1.json SHARD2.json ... [--report-dir DIR] [--baseline FILE]

Each shard (``pytest conformance --shard K/N``, or an xdist-free CI job) writes its own
results.json; this folds them together, writes every report (junit.xml, report.html,
results.json, summary.md) into DIR and exits 0 when the verdict is passed, 1 otherwise,
2 on bad input. Shards must agree on spec, target, model and shard count, and cover
1..N exactly once: otherwise one ``conformance-merge: error:`` line, exit 2. With
``--baseline``, the whole is gated like a single run: only new failure fingerprints fail
it (a baseline of another spec is refused, of another model or target warned about).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.attribution import attribute
from conformance.results import Results
from reports import write_all
from reports.baseline import check_baseline, compare_to_baseline
from reports.compare import InputError, load_results
from reports.summary import deciding_levels, is_strict

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


def _failed(merged: Results, baseline: Results | None) -> bool:
    """Whether a deciding requirement failed (only on new fingerprints, given a baseline)."""
    strict = is_strict(merged)
    if baseline is None:
        return bool(merged.failing(strict=strict))
    diff = compare_to_baseline(merged, baseline)
    levels = deciding_levels(strict=strict)
    return any(merged.tallies[rid].level in levels for rid in diff.new_failures)


def merge(runs: list[Results], baseline: Results | None = None) -> Results:
    """Fold the shards' results into one, with the verdict of the whole.

    Verdict, first that holds: ``error`` (a check raised, or a shard ended in error),
    ``failed`` (with a baseline: a new failure fingerprint of a deciding requirement),
    ``no-verdict`` (a shard was rate limited), ``incomplete`` (a MUST left untested in
    every shard), ``passed``.
    """
    merged = Results()
    for run in runs:
        merged.merge(run)
    merged.meta.pop("shard", None)
    merged.meta["shards"] = len(runs)
    merged.meta["wall_time"] = max(float(r.meta.get("wall_time", 0)) for r in runs)
    attribute(merged)  # a witness shown wrong in one shard is no evidence in another
    if any("coverage" in r.meta for r in runs):
        merged.meta["coverage"] = merge_coverage(runs, merged)
    verdicts = {r.meta.get("verdict") for r in runs}
    if baseline is not None:
        merged.meta["baseline"] = compare_to_baseline(merged, baseline).to_json()
    if merged.errors() or "error" in verdicts:
        verdict = "error"
    elif _failed(merged, baseline):
        verdict = "failed"
    elif "no-verdict" in verdicts:
        verdict = "no-verdict"
    elif (merged.meta.get("coverage") or {}).get("untested"):
        verdict = "incomplete"
    elif verdicts <= {"passed", "incomplete", "failed"}:  # a shard's failure may be known
        verdict = "passed"
    else:
        verdict = next(iter(sorted(str(v) for v in verdicts - {"passed", "incomplete"})))
    merged.meta["verdict"] = verdict
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.json of each shard")
    parser.add_argument("--report-dir", type=Path, default=Path("reports/out"))
    parser.add_argument("--baseline", type=Path, help="results.json of an accepted earlier run")
    args = parser.parse_args(argv)
    try:
        runs = [load_results(path) for path in args.results]
        check_shards([(str(p), r) for p, r in zip(args.results, runs, strict=True)])
        baseline = load_results(args.baseline) if args.baseline else None
        warnings: list[str] = []
        if baseline is not None:
            errors, warnings = check_baseline(runs[0].meta, baseline)
            if errors:
                raise InputError(f"--baseline {args.baseline}: {errors[0]}")
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    merged = merge(runs, baseline)
    if warnings:
        merged.meta["baseline_warnings"] = warnings
    if baseline is not None:
        merged.meta["baseline"]["file"] = str(args.baseline)
    for path in write_all(merged, args.report_dir):
        print(f"report: {path}")
    print(f"verdict: {merged.meta['verdict']} ({len(runs)} shards)")
    return 0 if merged.meta["verdict"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
