"""Benchmark: the suite with pytest-xdist ``-n 2`` against ``-n 0`` on a 50 ms target.

    python benchmarks/bench_parallel.py [--runs N] [--delay 0.05] [--sizes 10,40]
                                        [--budget 40] [--rps 10] [--json OUT]

The reference target runs in its own process behind a small ASGI wrapper that waits
``--delay`` seconds (``asyncio.sleep``, so requests in flight wait side by side) before
each completion request (``_target.py --delay``). The suite runs as the README says,
``pytest conformance --target-url URL --model reference-model --api-key KEY``, with
``-n 0`` and with ``-n 2``, interleaved, at each ``--max-examples`` of ``--sizes`` (10 is
the default run); the target counts the requests and notes when each arrived. Two
figures per run: the wall time of the whole command, and the sending phase, from the
second request's arrival (the first is the controller's preflight, sent before any
worker starts) to the last answer.

Then, with ``-n 2`` only, the run-wide limits:

* budget: ``--budget-requests B`` must hold over both workers (target count <= B);
* pacing: ``--rps R`` must hold over both workers: the sending phase of N requests lasts
  at least (N - 1 - 2) / R (the preflight and each worker's first request go at once,
  every later one waits its turn). Run with ``--budget-requests 60`` to stay short, and
  once unpaced, to show the suite goes faster than R when it may.

Last, from the ``-n 0`` runs' per-item durations (pytest's own ``--junitxml``), the
best a 2-worker schedule of these items can do (longest item first onto the least
loaded worker): the speed-up the item granularity allows, whatever the scheduler.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

API_KEY = "sk-bench-parallel"


def suite(url: str, workdir: Path, *extra: str) -> list[str]:
    junit = ("--junitxml", str(workdir / "items.xml"))
    return bench.suite_cmd(workdir / "reports", *junit, *extra, url=url, api_key=API_KEY)


def run(target: bench.Target, cmd: list[str], report_dir: Path) -> dict[str, Any]:
    target.reset()
    timed = bench.run_timed(cmd, timeout=280)
    stats = target.stats()
    if timed.returncode not in (0, 1):
        print(f"  ! exit {timed.returncode}:\n{bench.tail(timed.stdout + timed.stderr)}")
    n = stats["requests"]
    arrivals = stats["arrivals"]
    spent = json.loads((report_dir / "results.json").read_text())["spent"]
    return {
        "wall_s": timed.wall,
        "cpu_s": timed.cpu,
        "requests": n,
        "spent_requests": spent["requests"],
        # From the first request after the preflight to the last answer.
        "sending_s": (stats["last"] - arrivals[1]) if len(arrivals) > 1 else 0.0,
        "returncode": timed.returncode,
    }


def item_durations(junit: Path) -> dict[str, float]:
    """Seconds per test item, from pytest's own JUnit XML."""
    root = ET.parse(junit).getroot()
    return {
        f"{case.get('classname')}::{case.get('name')}": float(case.get("time") or 0)
        for case in root.iter("testcase")
    }


def best_makespan(durations: list[float], workers: int) -> float:
    """Longest item first onto the least loaded worker: a near-optimal schedule."""
    loads = [0.0] * workers
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--delay", type=float, default=0.05, help="target latency (seconds)")
    ap.add_argument("--sizes", default="10,40", help="--max-examples values (default 10,40)")
    ap.add_argument("--budget", type=int, default=40, help="--budget-requests for the check")
    ap.add_argument("--rps", type=float, default=10.0, help="--rps for the pacing check")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    info = bench.machine()
    bench.print_machine(info)
    variants = [f"-n {n} k={k}" for k in sizes for n in (0, 2)]
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    items: list[dict[str, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp,
        bench.Target("aihubmix", api_key=API_KEY, delay=args.delay) as target,
    ):
        work = Path(tmp)
        reports = work / "reports"
        print(f"target: {target.url} (aihubmix, {args.delay * 1000:.0f} ms before each answer)")

        def suite_run(n: int, *extra: str) -> dict[str, Any]:
            return run(target, suite(target.url, work, "-n", str(n), *extra), reports)

        suite_run(0, "--max-examples", "1")  # untimed warm-up
        for i in range(args.runs):
            for variant in variants if i % 2 == 0 else reversed(variants):
                n, k = int(variant.split()[1]), int(variant.split("=")[1])
                m = suite_run(n, "--max-examples", str(k))
                runs[variant].append(m)
                if n == 0 and k == sizes[0]:
                    items.append(item_durations(work / "items.xml"))
                print(
                    f"  run {i + 1} {variant}: {m['wall_s']:6.2f} s wall, "
                    f"sending {m['sending_s']:5.2f} s, {m['requests']} requests, "
                    f"exit {m['returncode']}"
                )
        k0 = ["--max-examples", str(sizes[0])]
        budget = suite_run(2, *k0, "--budget-requests", str(args.budget))
        unpaced = suite_run(2, *k0, "--budget-requests", "60")
        paced = suite_run(2, *k0, "--budget-requests", "60", "--rps", str(args.rps))

    summ = {
        v: {
            "wall_s": bench.summary([r["wall_s"] for r in rs]),
            "sending_s": bench.summary([r["sending_s"] for r in rs]),
            "requests": statistics.median(r["requests"] for r in rs),
        }
        for v, rs in runs.items()
    }
    speedups = {
        k: {
            what: summ[f"-n 0 k={k}"][what]["median"] / summ[f"-n 2 k={k}"][what]["median"]
            for what in ("wall_s", "sending_s")
        }
        for k in sizes
    }
    per_item = {name: statistics.median(d[name] for d in items) for name in items[0]}
    sequential = sum(per_item.values())
    makespan = best_makespan(list(per_item.values()), 2)
    print()
    print(f"median (min-max) over {args.runs} interleaved runs:")
    bench.print_table(
        ["variant", "requests", "wall s", "sending phase s"],
        [
            [
                v,
                f"{s['requests']:.0f}",
                bench.fmt_range(s["wall_s"]),
                bench.fmt_range(s["sending_s"]),
            ]
            for v, s in summ.items()
        ],
    )
    for k, s in speedups.items():
        print(
            f"speed-up -n 2 over -n 0 at --max-examples {k} (medians): "
            f"{s['wall_s']:.2f}x wall, {s['sending_s']:.2f}x sending phase (goal >= 1.7x)"
        )
    print()
    print(f"test items, median seconds in the -n 0 --max-examples {sizes[0]} runs:")
    bench.print_table(
        ["item", "s", "share"],
        [
            [name.split("::", 1)[1], f"{d:.2f}", f"{d / sequential:.0%}"]
            for name, d in sorted(per_item.items(), key=lambda kv: -kv[1])
        ],
    )
    print(
        f"items: {len(per_item)}, {sequential:.2f} s in all; best 2-worker schedule "
        f"{makespan:.2f} s: at most {sequential / makespan:.2f}x from the items alone"
    )
    print()
    ok_budget = budget["requests"] <= args.budget
    print(
        f"budget -n 2 --budget-requests {args.budget}: the target got {budget['requests']} "
        f"requests, results.json counts {budget['spent_requests']:.0f} "
        f"-> {'held' if ok_budget else 'EXCEEDED'}"
    )
    floor = max(0, paced["requests"] - 3) / args.rps
    ok_rps = paced["sending_s"] >= floor
    for name, m in (("unpaced", unpaced), (f"--rps {args.rps:g}", paced)):
        print(
            f"pacing -n 2 --budget-requests 60 {name}: {m['requests']} requests, sending "
            f"phase {m['sending_s']:.2f} s = {(m['requests'] - 1) / m['sending_s']:.1f} req/s"
        )
    print(
        f"pacing: at least {floor:.2f} s expected at --rps {args.rps:g} "
        f"-> {'held' if ok_rps else 'EXCEEDED'}"
    )
    pacing = {"rps": args.rps, "unpaced": unpaced, "paced": paced, "floor_s": floor}
    pacing["held"] = ok_rps
    return bench.finish(
        args.json,
        {
            "machine": info,
            "delay_s": args.delay,
            "sizes": sizes,
            "runs": runs,
            "summary": summ,
            "speedups": speedups,
            "items_median_s": per_item,
            "item_bound_speedup": sequential / makespan,
            "budget": {"limit": args.budget, **budget, "held": ok_budget},
            "pacing": pacing,
        },
    )


if __name__ == "__main__":
    sys.exit(main())
