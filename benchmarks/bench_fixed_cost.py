"""Benchmark: the fixed cost of a run, before its first request and after its last answer.

    python benchmarks/bench_fixed_cost.py [--runs 5] [--delays 0,1] [--baseline DIR]
        [--st-examples 32] [--no-st] [--json OUT]

The reference target runs in its own process (``_target.py --delay D``, ``--fault
unknown-model-200`` so that schemathesis's arbitrary model names are served) and stamps
every completion request's arrival and the end of the last answer (``time.time()``, one
clock with this process). Per delay, interleaved (the order reversed every other round),
each variant ``--runs`` times:

* ``this``: the default run from this checkout, ``pytest conformance --target-url URL``
  (``_common.suite_cmd``), with ``-p _phases`` (benchmarks/_phases.py: the wall-clock time
  of pytest's phases, written at exit);
  (``--this DIR``: another tree, e.g. an unpacked commit without uncommitted edits);
* ``baseline``: the same from another source tree (``--baseline DIR``: ``git archive`` of
  an earlier commit, unpacked; run with it as the working directory, so its ``conformance``
  is the one imported);
* ``st run``: schemathesis, ``st run --workers 8 --max-examples N`` (``_common.st_run_cmd``).

Per run: the whole command's wall and CPU time; *before*: from the command's start to the
first request's arrival; *after*: from the last answer to the command's exit; *fixed* =
before + after; and for the suite its *floor*, the latency times the rounds its requests
need at ``--concurrency`` 16 (the preflight alone, then ceil((requests - 1) / 16) rounds),
and how far the whole command is above it. Figures: median (min-max); the load average at
each run (the machine is shared: note it).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

API_KEY = "sk-bench-fixed-cost"
SPEC = "aihubmix"
FAULTS = ("unknown-model-200",)
CONCURRENCY = 16
PHASES = (
    "configure_start",
    "configure_end",
    "collected",
    "sessionfinish_start",
    "sessionfinish_end",
    "unconfigured",
    "atexit",
)


def timed_at(
    target: bench.Target, cmd: list[str], cwd: Path, env: dict[str, str]
) -> dict[str, Any]:
    """Run ``cmd`` against ``target``: wall, CPU, and what happened before the first request
    and after the last answer, from the target's own stamps."""
    target.reset()
    start = time.time()
    done = bench.run_timed(cmd, cwd=cwd, env=env, timeout=900)
    end = start + done.wall
    stats = target.stats()
    if done.returncode not in (0, 1) or not stats["arrivals"]:
        print(f"  ! exit {done.returncode}:\n{bench.tail(done.stdout + done.stderr)}")
    arrivals = sorted(stats["arrivals"])
    before = arrivals[0] - start
    after = end - stats["last"]
    return {
        "wall_s": done.wall,
        "cpu_s": done.cpu,
        "requests": len(arrivals),
        "before_s": before,
        "after_s": after,
        "fixed_s": before + after,
        "sending_s": stats["last"] - arrivals[0],
        "start": start,
        "load": bench.load(),
    }


def suite_run(target: bench.Target, tree: Path, work: Path) -> dict[str, Any]:
    phases_file = work / "phases.json"
    phases_file.unlink(missing_ok=True)
    env = bench.bench_env(PYTHONPATH=str(bench.BENCH_DIR), PHASES_OUT=str(phases_file))
    cmd = bench.suite_cmd(work / "reports", "-p", "_phases", url=target.url, api_key=API_KEY)
    m = timed_at(target, cmd, tree, env)
    rounds = 1 + math.ceil((m["requests"] - 1) / CONCURRENCY)
    m["floor_s"] = target.delay * rounds
    m["over_floor_s"] = m["wall_s"] - m["floor_s"]
    phases = json.loads(phases_file.read_text()) if phases_file.exists() else {}
    for name in PHASES:
        if name in phases:
            m[f"at_{name}"] = phases[name] - m["start"]
    if "at_atexit" in m:
        m["exit_s"] = m["wall_s"] - m["at_atexit"]  # the interpreter's teardown
    return m


def st_run(target: bench.Target, examples: int, work: Path) -> dict[str, Any]:
    """schemathesis from the scratch directory: its cache (.schemathesis/) stays out of the
    checkout."""
    spec_path = bench.ROOT / "specs" / f"{SPEC}.yaml"
    cmd = bench.st_run_cmd(spec_path, target.url, examples, seed=1, workers=8, api_key=API_KEY)
    return timed_at(target, cmd, work, bench.bench_env())


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--delays", default="0,1", help="target latencies, seconds")
    ap.add_argument("--baseline", type=Path, help="also run the suite of this source tree")
    ap.add_argument("--this", type=Path, default=bench.ROOT,
                    help="the tree of the 'this' variant (default: this checkout)")  # fmt: skip
    ap.add_argument("--st-examples", type=int, default=32, help="st run --max-examples")
    ap.add_argument("--no-st", action="store_true", help="leave schemathesis out")
    args = ap.parse_args(argv)
    info = bench.machine()
    bench.print_machine(info)
    trees = {"this": args.this, **({"baseline": args.baseline} if args.baseline else {})}
    variants = [*trees, *([] if args.no_st else ["st run"])]
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fixed-cost-") as tmp:
        work = Path(tmp)
        for delay in [float(d) for d in args.delays.split(",")]:
            with bench.Target(SPEC, faults=FAULTS, api_key=API_KEY, delay=delay) as target:
                print(f"target latency {delay:g} s: {target.url}")
                for tree in trees.values():  # bytecode cached for every tree
                    suite_run(target, tree, work)
                for i in range(args.runs):
                    for name in variants if i % 2 == 0 else reversed(variants):
                        if name == "st run":
                            m = st_run(target, args.st_examples, work)
                        else:
                            m = suite_run(target, trees[name], work)
                        key = f"{name} @{delay:g}s"
                        runs.setdefault(key, []).append(m)
                        print(f"  run {i + 1} {key:18s} {line(m)}", flush=True)
    summary = {name: summarise(rs) for name, rs in runs.items()}
    print_summary(summary)
    return bench.finish(args.json, {"machine": info, "runs": runs, "summary": summary,
                                    "load_at_end": bench.load()})  # fmt: skip


def line(m: dict[str, Any]) -> str:
    text = (f"{m['requests']:3d} req  wall {m['wall_s']:6.2f}  cpu {m['cpu_s']:5.2f}  before "
            f"{m['before_s']:5.2f}  after {m['after_s']:5.2f}  fixed {m['fixed_s']:5.2f}")  # fmt: skip
    if "floor_s" in m:
        text += f"  over floor {m['over_floor_s']:5.2f}"
    return f"{text}  load {m['load']}"


def summarise(rs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = sorted({k for r in rs for k, v in r.items() if isinstance(v, int | float)} - {"start"})
    return {k: bench.summary([r[k] for r in rs if k in r]) for k in keys} | {
        "loads": [r["load"] for r in rs]
    }


def print_summary(summary: dict[str, Any]) -> None:
    print(f"\nmedian (min-max) over the runs, seconds; load at the end {bench.load()}")
    rows = []
    for name, s in summary.items():

        def cell(key: str, s: dict[str, Any] = s) -> str:
            return bench.fmt_range(s[key], digits=2) if key in s else "-"

        rows.append([name, f"{s['requests']['median']:.0f}", cell("wall_s"), cell("cpu_s"),
                     cell("before_s"), cell("after_s"), cell("fixed_s"), cell("over_floor_s"),
                     cell("exit_s")])  # fmt: skip
    bench.print_table(
        ["variant", "req", "wall", "cpu", "before 1st request", "after last answer", "fixed",
         "over floor", "exit (teardown)"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
