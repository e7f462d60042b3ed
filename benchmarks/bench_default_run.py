"""Benchmark: wall time of the README's main command, ``pytest conformance``.

    python benchmarks/bench_default_run.py [--runs N] [--variants warm,cold] [--json OUT]
        [--baseline DIR]

Runs ``pytest conformance`` against the embedded reference target, once per spec
(``--spec aihubmix``, the default, and ``--spec nscale``), interleaved, with reports
written to a scratch directory (``--report-dir``) and ``-p no:cacheprovider`` so that
the checkout's own reports and pytest cache are left alone. Two environments:

* warm: bytecode cached (in a private PYTHONPYCACHEPREFIX), as on any machine where
  pytest ran once before;
* cold: the environment as given. Where PYTHONDONTWRITEBYTECODE is set (this sandbox,
  many CI images) pytest rewrites the assertions of every module of every installed
  pytest plugin's distribution (hypothesis, schemathesis, ours) on every run.

With ``--baseline DIR`` (a ``git archive`` of an older commit, unpacked), the same
commands run in that tree too, interleaved with this one's: a before/after on one machine.

Reported: wall and CPU seconds, median (min-max), and the requests each run spent.
Goal: under 60 s on 2 cores.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

SPECS = ("aihubmix", "nscale")
GOAL_S = 60.0


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--variants", default="warm,cold", help="warm, cold or both")
    ap.add_argument("--baseline", type=Path, help="also run the suite of this source tree")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    info = bench.machine()
    bench.print_machine(info)
    runs: dict[str, list[dict[str, Any]]] = {}
    trees = {"ours": bench.ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="bench-default-") as tmp:
        report_dir = Path(tmp)
        for root in trees.values():  # fills the warm cache
            bench.run_timed(
                bench.suite_cmd(report_dir, spec="aihubmix"), env=bench.bench_env(), cwd=root
            )
        for i in range(args.runs):
            order = [(t, v, s) for t in trees for v in variants for s in SPECS]
            for tree, variant, spec in order if i % 2 == 0 else reversed(order):
                timed = bench.run_timed(
                    bench.suite_cmd(report_dir, spec=spec),
                    env=bench.bench_env(cold=variant == "cold"),
                    cwd=trees[tree],
                )
                spent = json.loads((report_dir / "results.json").read_text())["spent"]
                m = {
                    "wall_s": timed.wall,
                    "cpu_s": timed.cpu,
                    "requests": spent["requests"],
                    "returncode": timed.returncode,
                }
                name = f"{spec} {variant}" if tree == "ours" else f"{spec} {variant} {tree}"
                runs.setdefault(name, []).append(m)
                print(
                    f"  run {i + 1} {name:24s}: {timed.wall:6.2f} s wall, "
                    f"{timed.cpu:5.2f} s CPU, {spent['requests']} requests, "
                    f"exit {timed.returncode}"
                )
                if timed.returncode != 0:
                    print(bench.tail(timed.stdout + timed.stderr))
    result = {
        name: {
            "wall_s": bench.summary([r["wall_s"] for r in rs]),
            "cpu_s": bench.summary([r["cpu_s"] for r in rs]),
            "requests": rs[-1]["requests"],
        }
        for name, rs in sorted(runs.items())
    }
    print()
    print(f"median (min-max) over {args.runs} runs:")
    bench.print_table(
        ["command", "environment", "wall s", "CPU s", "requests"],
        [
            [
                f"pytest conformance --spec {name.split()[0]}",
                " ".join(name.split()[1:]),
                bench.fmt_range(r["wall_s"]),
                bench.fmt_range(r["cpu_s"]),
                r["requests"],
            ]
            for name, r in result.items()
        ],
    )
    worst = max(r["wall_s"]["max"] for r in result.values())
    print(
        f"goal < {GOAL_S:.0f} s: {'met' if worst < GOAL_S else 'NOT met'} (slowest run {worst:.1f} s)"
    )
    return bench.finish(args.json, {"machine": info, "runs": runs, "summary": result})


if __name__ == "__main__":
    sys.exit(main())
