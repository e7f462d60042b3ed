"""Benchmark: does the run keep ``--concurrency`` requests in flight against a slow target?

    python benchmarks/bench_capacity.py [--runs 5] [--delay 1] [--concurrency 16]
        [--baseline DIR] [--engine-only N] [--json OUT]

The reference target runs in its own process and answers every completion request after
``--delay`` seconds, side by side (``_target.py --delay``). A target of that latency and
unbounded capacity is served by C requests in flight in ``latency x requests / C`` seconds:
the ideal. Two measures, each run ``--runs`` times, variants interleaved:

* **the default run**, ``pytest conformance --target-url URL --concurrency C``, as a user
  runs it. From the target's arrival times: the *sending phase* (from the preflight's
  arrival to the last answer; the preflight goes alone, one latency in which nothing else
  may go) and the *run phase* (from the first request after the preflight to the last
  answer); for each, the concurrency achieved (latency x requests / phase) and its ratio
  to the ideal; and the whole command's wall time;
* with ``--engine-only N``: N independent requests through the engine alone
  (``Run(...).item().send_all``), no suite around them: what the pool, the slots and the
  throttle cost per round.

``--baseline DIR`` runs the same from another source tree (``git archive`` of an older
commit, unpacked) beside this one: a before/after on the same machine at the same load.
Figures: median (min-max) over the runs, and the load average at each run (the machine
is shared: note it).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

API_KEY = "sk-bench-capacity"
SPEC = "aihubmix"
#: The suite's arbitrary model names are served (as in bench_time_to_verdict.py).
FAULTS = ("unknown-model-200",)

ENGINE_ONLY = """
import json, sys, time
from conformance.judging.wire.case import Case
from conformance.run.client import Client
from conformance.run.engine import Run
from conformance.run.session import Settings
from conformance.judging.document.spec import load_spec

url, n, c, key, spec = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
client = Client(url, api_key=key, concurrency=c)
run = Run(Settings(concurrency=c, budget_requests=10 * n), load_spec(spec), client)
body = {"model": "reference-model", "prompt": "Say hi", "max_tokens": 1}
cases = [Case(dict(body), mode="probe", label=str(i)) for i in range(n)]
began = time.perf_counter()
sent = run.item().send_all(cases)
elapsed = time.perf_counter() - began
run.close()
client.close()
print(json.dumps({"elapsed": elapsed, "ok": sum(ex.status == 200 for ex in sent)}))
"""


def suite_run(target: bench.Target, tree: Path, work: Path, concurrency: int) -> dict[str, Any]:
    """One default run from ``tree``: its phases from the target's arrival times."""
    target.reset()
    report = work / f"reports-{tree.name}"
    cmd = bench.suite_cmd(
        report, "--concurrency", str(concurrency), url=target.url, api_key=API_KEY
    )
    timed = bench.run_timed(cmd, cwd=tree, timeout=900)
    stats = target.stats()
    arrivals = sorted(stats["arrivals"])
    n = len(arrivals)
    if timed.returncode not in (0, 1) or n < 2:
        print(f"  ! exit {timed.returncode}:\n{bench.tail(timed.stdout + timed.stderr)}")
    ideal = target.delay * n / concurrency
    sending = stats["last"] - arrivals[0]
    running = stats["last"] - arrivals[1]
    client = json.loads((report / "results.json").read_text())["meta"].get("client", {})
    return {
        "wall_s": timed.wall,
        "requests": n,
        "sending_s": sending,
        "sending_ratio": sending / ideal,
        "achieved_sending": target.delay * n / sending,
        "run_s": running,
        "run_ratio": running / (target.delay * (n - 1) / concurrency),
        "achieved_run": target.delay * (n - 1) / running,
        "peak_in_flight": client.get("peak_in_flight"),
        "min_limit": client.get("min_concurrency_limit"),
        "load": bench.load(),
    }


def engine_run(target: bench.Target, tree: Path, requests: int, concurrency: int) -> dict[str, Any]:
    """N independent requests through the engine of ``tree``, timed in its process."""
    target.reset()
    cmd = [bench.PYTHON, "-c", ENGINE_ONLY, target.url, str(requests), str(concurrency), API_KEY,
           SPEC]  # fmt: skip
    timed = bench.run_timed(cmd, cwd=tree, timeout=600)
    if timed.returncode != 0:
        print(f"  ! exit {timed.returncode}:\n{bench.tail(timed.stdout + timed.stderr)}")
    out = json.loads(timed.stdout.strip().splitlines()[-1])
    ideal = target.delay * requests / concurrency
    return {
        "engine_s": out["elapsed"],
        "ok": out["ok"],
        "engine_ratio": out["elapsed"] / ideal,
        "achieved_engine": target.delay * requests / out["elapsed"],
        "load": bench.load(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--delay", type=float, default=1.0, help="target latency, seconds")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--baseline", type=Path, help="also run the suite of this source tree")
    ap.add_argument("--engine-only", type=int, default=0, metavar="N",
                    help="also N independent requests through the engine alone")  # fmt: skip
    args = ap.parse_args(argv)
    info = bench.machine()
    bench.print_machine(info)
    trees = {"this": bench.ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    runs: dict[str, list[dict[str, Any]]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp,
        bench.Target(SPEC, faults=FAULTS, api_key=API_KEY, delay=args.delay) as target,
    ):
        print(f"target latency {args.delay:g} s, concurrency {args.concurrency}: {target.url}")
        variants = [(f"{name} suite", tree, False) for name, tree in trees.items()]
        if args.engine_only:
            variants += [(f"{name} engine", tree, True) for name, tree in trees.items()]
        for i in range(args.runs):
            for name, tree, engine in variants if i % 2 == 0 else reversed(variants):
                if engine:
                    m = engine_run(target, tree, args.engine_only, args.concurrency)
                    line = (f"engine {m['engine_s']:6.2f} s  ratio {m['engine_ratio']:.3f}  "
                            f"achieved {m['achieved_engine']:5.2f}")  # fmt: skip
                else:
                    m = suite_run(target, tree, Path(tmp), args.concurrency)
                    line = (f"{m['requests']} requests  wall {m['wall_s']:6.2f} s  sending "
                            f"{m['sending_s']:6.2f} s (x{m['sending_ratio']:.3f})  run "
                            f"{m['run_s']:6.2f} s (x{m['run_ratio']:.3f})")  # fmt: skip
                runs.setdefault(name, []).append(m)
                print(f"  run {i + 1} {name:16s} {line}  load {m['load']}", flush=True)
    summary = {name: summarise(rs) for name, rs in runs.items()}
    print_summary(summary, args.delay, args.concurrency)
    return bench.finish(args.json, {"machine": info, "delay": args.delay,
                                    "concurrency": args.concurrency, "runs": runs,
                                    "summary": summary})  # fmt: skip


def summarise(rs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in rs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return {k: bench.summary([r[k] for r in rs if r.get(k) is not None]) for k in keys} | {
        "loads": [r["load"] for r in rs]
    }


def print_summary(summary: dict[str, Any], delay: float, concurrency: int) -> None:
    print(f"\nmedian (min-max) over the runs; ideal = {delay:g} s x requests / {concurrency}")
    rows = []
    for name, s in summary.items():
        if "engine_s" in s:
            rows.append([name, "-", "-", bench.fmt_range(s["engine_s"], digits=2),
                         bench.fmt_range(s["engine_ratio"], digits=3),
                         bench.fmt_range(s["achieved_engine"], digits=1)])  # fmt: skip
            continue
        rows.append([
            name, f"{s['requests']['median']:.0f}",
            bench.fmt_range(s["wall_s"], digits=1),
            f"{bench.fmt_range(s['sending_s'], digits=2)} / {bench.fmt_range(s['run_s'], digits=2)}",
            f"{bench.fmt_range(s['sending_ratio'], digits=3)} / {bench.fmt_range(s['run_ratio'], digits=3)}",
            f"{bench.fmt_range(s['achieved_sending'], digits=1)} / {bench.fmt_range(s['achieved_run'], digits=1)}",
        ])  # fmt: skip
    bench.print_table(
        ["variant", "requests", "wall s", "sending / run phase s", "x ideal", "achieved"], rows
    )


if __name__ == "__main__":
    sys.exit(main())
