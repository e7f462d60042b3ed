"""Benchmark: the suite with pytest-xdist ``-n 2`` against ``-n 0`` on a 50 ms target.

    python benchmarks/bench_parallel.py [--runs N] [--delay 0.05] [--max-examples 10]
                                        [--json OUT]

The reference target runs in its own process behind a small ASGI wrapper that waits
``--delay`` seconds (``asyncio.sleep``, so requests in flight wait side by side) before
each completion request (``_target.py --delay``). The suite runs as the README says,
``pytest conformance --target-url URL --model reference-model --api-key KEY``, with
``-n 0`` and with ``-n 2``, interleaved; the target counts the requests.

Then, with ``-n 2`` only, the run-wide limits:

* budget: ``--budget-requests B`` must hold over both workers (target count <= B);
* pacing: ``--rps R`` must hold over both workers: the span from the first request to
  the last answer is at least (requests - 2) / R (each worker's first request goes at
  once, every later one waits its turn).

Last, from the ``-n 0`` runs' per-item durations (pytest's own ``--junitxml``), the
best a 2-worker schedule of these items can do (longest item first onto the least
loaded worker): the speed-up the item granularity allows, whatever the scheduler.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PYTHON,
    Target,
    fmt_range,
    machine,
    parser,
    print_machine,
    print_table,
    run_timed,
    summary,
    tail,
    write_json,
)

API_KEY = "sk-bench-parallel"


def suite(url: str, workdir: Path, *extra: str) -> list[str]:
    return [
        PYTHON,
        "-m",
        "pytest",
        "conformance",
        "-q",
        "-p",
        "no:cacheprovider",
        "--target-url",
        url,
        "--model",
        "reference-model",
        "--api-key",
        API_KEY,
        "--report-dir",
        str(workdir / "reports"),
        "--junitxml",
        str(workdir / "items.xml"),
        *extra,
    ]


def run(target: Target, cmd: list[str]) -> dict[str, Any]:
    target.reset()
    timed = run_timed(cmd, timeout=280)
    stats = target.stats()
    if timed.returncode not in (0, 1):
        print(f"  ! exit {timed.returncode}:\n{tail(timed.stdout + timed.stderr)}")
    n = stats["requests"]
    return {
        "wall_s": timed.wall,
        "cpu_s": timed.cpu,
        "requests": n,
        "span_s": (stats["last"] - stats["first"]) if n else 0.0,
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
    ap = parser(__doc__, runs=5)
    ap.add_argument("--delay", type=float, default=0.05, help="target latency (seconds)")
    ap.add_argument("--max-examples", type=int, default=10)
    ap.add_argument("--budget", type=int, default=40, help="--budget-requests for the check")
    ap.add_argument("--rps", type=float, default=20.0, help="--rps for the pacing check")
    args = ap.parse_args(argv)
    info = machine()
    print_machine(info)
    common = ["--max-examples", str(args.max_examples)]
    runs: dict[str, list[dict[str, Any]]] = {"-n 0": [], "-n 2": []}
    items: list[dict[str, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp,
        Target("aihubmix", api_key=API_KEY, delay=args.delay) as target,
    ):
        work = Path(tmp)
        print(f"target: {target.url} (aihubmix, {args.delay * 1000:.0f} ms before each answer)")
        run(target, suite(target.url, work, "-n", "0", *common))  # untimed warm-up
        for i in range(args.runs):
            order = ["-n 0", "-n 2"] if i % 2 == 0 else ["-n 2", "-n 0"]
            for name in order:
                m = run(target, suite(target.url, work, *name.split(), *common))
                runs[name].append(m)
                if name == "-n 0":
                    items.append(item_durations(work / "items.xml"))
                print(
                    f"  run {i + 1} {name}: {m['wall_s']:6.2f} s wall, {m['requests']} requests, "
                    f"span {m['span_s']:5.2f} s, exit {m['returncode']}"
                )
        budget = run(
            target,
            suite(target.url, work, "-n", "2", *common, "--budget-requests", str(args.budget)),
        )
        paced = run(target, suite(target.url, work, "-n", "2", *common, "--rps", str(args.rps)))

    walls = {name: summary([r["wall_s"] for r in rs]) for name, rs in runs.items()}
    speedup = walls["-n 0"]["median"] / walls["-n 2"]["median"]
    per_item = {name: statistics.median(d[name] for d in items) for name in items[0]}
    sequential = sum(per_item.values())
    makespan = best_makespan(list(per_item.values()), 2)
    print()
    print(f"wall time, median (min-max) over {args.runs} interleaved runs:")
    print_table(
        ["variant", "wall s", "requests (target count)"],
        [
            [name, fmt_range(walls[name]), f"{statistics.median(r['requests'] for r in rs):.0f}"]
            for name, rs in runs.items()
        ],
    )
    print(f"speed-up -n 2 over -n 0 (medians): {speedup:.2f}x (goal >= 1.7x)")
    print()
    print("test items, median seconds in the -n 0 runs:")
    print_table(
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
        f"budget -n 2 --budget-requests {args.budget}: {budget['requests']} requests "
        f"-> {'held' if ok_budget else 'EXCEEDED'}"
    )
    floor = max(0, paced["requests"] - 2) / args.rps
    ok_rps = paced["span_s"] >= floor
    print(
        f"pacing -n 2 --rps {args.rps:g}: {paced['requests']} requests in {paced['span_s']:.2f} s "
        f"({paced['requests'] / paced['span_s']:.1f} req/s; at least {floor:.2f} s expected) "
        f"-> {'held' if ok_rps else 'EXCEEDED'}"
    )
    write_json(
        args.json,
        {
            "machine": info,
            "delay_s": args.delay,
            "max_examples": args.max_examples,
            "runs": runs,
            "wall_s": walls,
            "speedup": speedup,
            "items_median_s": per_item,
            "item_bound_speedup": sequential / makespan,
            "budget": {"limit": args.budget, **budget, "held": ok_budget},
            "pacing": {"rps": args.rps, **paced, "floor_s": floor, "held": ok_rps},
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
