"""Benchmark: time to verdict against a target that answers in 0, 0.5 and 1.0 s.

    python benchmarks/bench_time_to_verdict.py [--runs 5] [--delays 0,0.5,1]
        [--concurrency 1,8,16,32] [--tools ours,st-run,st-fuzz] [--fit] [--json OUT]
        [--requests M] [--fixed-from JSON]

The reference target runs in its own process (``_target.py --delay D``: each completion
waits D seconds, side by side, before it is answered; ``--fault unknown-model-200`` so
that schemathesis's arbitrary model names are served). Per delay, interleaved, each
variant ``--runs`` times:

* ``ours cN``: the default run, ``pytest conformance --target-url URL ...``, with
  ``--concurrency N`` (the suite has it now; results/time_to_verdict_merged.json). For a
  suite without the option (an older checkout), N > 1 falls back to a **proxy**:
  a child process sends the cases of a default run (10 generated requests, 10 generated
  streams, the edge list, the invalid list) through one ``Client`` from a pool of N
  threads and judges every exchange, as the engine's pool will. Its figure is the
  sending phase at the target; the estimate of the whole run adds the suite's fixed
  cost (the serial run's wall time minus its sending phase).
* ``st-run w8``: ``st run --workers 8 --max-examples M`` with M the suite's request
  count (schemathesis's workers split per operation: one operation here);
* ``st-fuzz w8``: ``st fuzz --workers 8`` for a fixed time; its time to the suite's
  request count is read from the target's arrival times (start to the M-th answer).

``--requests M`` skips the untimed calibration run (a serial default run: 2 minutes at
1 s latency) and takes M as the suite's request count; ``--fixed-from`` takes the suite's
fixed cost from an earlier ``--json`` (of delay 0) when ``ours c1`` is not among the
variants, so the proxy's estimate needs no serial run at every latency.

With ``--fit`` (at delay 0): the fixed cost and the marginal CPU per request of both
tools, from the line through two run sizes (ours ``--max-examples`` 10 and 60, so about
150 and 250 requests; ``st run --workers 1`` at 120 and 400 examples). With
``--fit-baseline DIR``, also the suite of another source tree (e.g. ``git archive`` of the
commit before a change), interleaved with the rest: a before/after of the same machine.

Figures: median (min-max) wall seconds per variant, requests counted by the target,
req/s, and the load average at each run (the machine is shared: note it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

API_KEY = "sk-bench-time-to-verdict"
SPEC = "aihubmix"
FAULTS = ("unknown-model-200",)
#: --max-examples of the two run sizes of the fit.
FIT_SIZES = (10, 60)
ST_FIT_SIZES = (120, 400)


# -- the proxy: the engine's thread pool, before it is merged --------------------------------


def proxy(url: str, concurrency: int) -> dict[str, Any]:
    """Send a default run's cases from ``concurrency`` threads through one Client; judge all."""
    sys.path.insert(0, str(bench.ROOT))
    from conformance.judging.checks import load_checks
    from conformance.judging.document.spec import load_spec
    from conformance.judging.requirements import REGISTRY
    from conformance.judging.verdict.results import evaluate
    from conformance.run.client import Client
    from conformance.strategies import draw, edge_requests, invalid_cases, valid_requests

    spec = load_spec(SPEC)
    load_checks()
    requirements = list(REGISTRY.values())
    model, max_tokens = bench.MODEL, 8
    cases = [
        *draw(valid_requests(spec, model=model, max_tokens=max_tokens), 10),
        *draw(valid_requests(spec, model=model, max_tokens=max_tokens, stream=True), 10),
        *edge_requests(spec, model=model, max_tokens=max_tokens),
        *invalid_cases(spec, model=model, max_tokens=1),
    ]
    client = Client(
        url, api_key=API_KEY, media_type=spec.request_media_type, concurrency=concurrency
    )

    def send_and_judge(case: Any) -> int:
        exchange = client.send(case)
        evaluate(requirements, spec, exchange)
        return exchange.status or 0

    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        statuses = list(pool.map(send_and_judge, cases))
    sending = time.perf_counter() - began
    client.close()
    return {
        "cases": len(cases),
        "sending_s": sending,
        "ok": statuses.count(200),
        **client.stats.to_dict(),
    }


# -- one measured run -----------------------------------------------------------------------


def measure(
    target: bench.Target, cmd: list[str], cwd: Path, *, count: int | None = None
) -> dict[str, Any]:
    """Run ``cmd`` against ``target``; wall, CPU, requests; ``count``: time to that many."""
    target.reset()
    began = time.time()
    timed = bench.run_timed(cmd, cwd=cwd, timeout=900)
    stats = target.stats()
    arrivals = stats["arrivals"]
    n = stats["requests"]
    out: dict[str, Any] = {
        "wall_s": timed.wall,
        "cpu_s": timed.cpu,
        "requests": n,
        "returncode": timed.returncode,
        "load": bench.load(),
        # From the first request to the last answer: the sending phase.
        "sending_s": (stats["last"] - arrivals[0]) if n else float("nan"),
    }
    if count is not None:
        # Time from the command's start to the count-th answer (arrival + the delay).
        done = arrivals[count - 1] + target.delay if len(arrivals) >= count else float("nan")
        out["time_to_count_s"] = done - began
    if timed.returncode not in (0, 1, 6, 7) or not n:
        print(f"  ! {' '.join(cmd[:4])} ... exited {timed.returncode}:")
        print(bench.tail(timed.stdout + timed.stderr))
    if cmd[1:3] == [__file__, "--proxy"]:
        out["proxy"] = json.loads(timed.stdout.strip().splitlines()[-1])
    return out


def variants(
    args: Any, url: str, work: Path, requests: int, has_concurrency: bool
) -> dict[str, tuple[list[str], Path, int | None]]:
    """Name -> (command, working directory, request count to time) for one delay."""
    spec_path = bench.ROOT / "specs" / f"{SPEC}.yaml"
    out: dict[str, tuple[list[str], Path, int | None]] = {}
    for n in args.concurrency:
        if n == 1 or has_concurrency:
            extra = ["--concurrency", str(n)] if has_concurrency else []
            out[f"ours c{n}"] = (
                bench.suite_cmd(work / "ours", *extra, url=url, api_key=API_KEY),
                bench.ROOT,
                None,
            )
        else:
            cmd = [bench.PYTHON, __file__, "--proxy", url, "--proxy-concurrency", str(n)]
            out[f"ours c{n} (proxy)"] = (cmd, bench.ROOT, None)
    if "st-run" in args.tools:
        cmd = bench.st_run_cmd(spec_path, url, requests, seed=1, workers=8, api_key=API_KEY)
        out["st-run w8"] = (cmd, work, requests)
    if "st-fuzz" in args.tools:
        # Long enough for the suite's request count at about 7 in flight, plus a start-up
        # that a loaded machine stretches.
        seconds = 30 + requests * args.delay / 4
        cmd = bench.st_fuzz_cmd(spec_path, url, seconds, workers=8, api_key=API_KEY)
        out["st-fuzz w8"] = (cmd, work, requests)
    return out


def fit(
    target: bench.Target, work: Path, runs: int, baseline: Path | None = None
) -> dict[str, Any]:
    """Fixed cost and marginal CPU per request at delay 0, from two run sizes per tool.

    ``baseline``: also the suite as found in that source tree (a ``git archive`` of an
    older commit; ``python -m pytest conformance`` run there imports its own packages).
    """
    spec_path = bench.ROOT / "specs" / f"{SPEC}.yaml"
    trees = {"ours": bench.ROOT, **({"baseline": baseline} if baseline else {})}
    sizes = {
        **{
            f"{tree} k={k}": (
                bench.suite_cmd(
                    work / tree, "--max-examples", str(k), url=target.url, api_key=API_KEY
                ),
                root,
            )
            for tree, root in trees.items()
            for k in FIT_SIZES
        },
        **{
            f"st-run w1 m={m}": (
                bench.st_run_cmd(spec_path, target.url, m, seed=1, api_key=API_KEY),
                work,
            )
            for m in ST_FIT_SIZES
        },
    }
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in sizes}
    for i in range(runs):
        for name in sizes if i % 2 == 0 else reversed(sizes):
            cmd, cwd = sizes[name]
            got[name].append(measure(target, cmd, cwd))
            m = got[name][-1]
            print(f"  fit {i + 1} {name:16s} {m['requests']:4d} requests  "
                  f"wall {m['wall_s']:6.2f} s  cpu {m['cpu_s']:6.2f} s  load {m['load']}")  # fmt: skip
    out: dict[str, Any] = {"runs": got}
    for tool, names in (
        *((tree, [f"{tree} k={k}" for k in FIT_SIZES]) for tree in trees),
        ("schemathesis", [f"st-run w1 m={m}" for m in ST_FIT_SIZES]),
    ):
        med = [
            {k: statistics.median(r[k] for r in got[n]) for k in ("requests", "wall_s", "cpu_s")}
            for n in names
        ]
        wall_fixed, wall_marginal = bench.fit_line([(m["requests"], m["wall_s"]) for m in med])
        cpu_fixed, cpu_marginal = bench.fit_line([(m["requests"], m["cpu_s"]) for m in med])
        out[tool] = {
            "sizes": med,
            "fixed_wall_s": wall_fixed,
            "fixed_cpu_s": cpu_fixed,
            "marginal_wall_ms": wall_marginal * 1000,
            "marginal_cpu_ms": cpu_marginal * 1000,
        }
        print(f"{tool}: fixed {wall_fixed:.2f} s wall / {cpu_fixed:.2f} s CPU; marginal "
              f"{wall_marginal * 1000:.1f} ms wall / {cpu_marginal * 1000:.1f} ms CPU per request")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--delays", default="0,0.5,1", help="target latencies, seconds")
    ap.add_argument("--concurrency", default="1,8,16,32", help="our concurrency levels")
    ap.add_argument("--tools", default="ours,st-run,st-fuzz", help="which tools to run")
    ap.add_argument("--fit", action="store_true", help="also fit fixed and marginal cost")
    ap.add_argument("--requests", type=int, help="the suite's request count (no calibration)")
    ap.add_argument("--fixed-from", type=Path, help="the suite's fixed cost from this JSON")
    ap.add_argument(
        "--fit-baseline", type=Path, help="with --fit: also fit the suite of this source tree"
    )
    ap.add_argument("--proxy", help=argparse.SUPPRESS)
    ap.add_argument("--proxy-concurrency", type=int, default=8, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.proxy:
        print(json.dumps(proxy(args.proxy, args.proxy_concurrency)))
        return 0
    args.concurrency = [int(x) for x in args.concurrency.split(",")] if "ours" in args.tools else []
    info = bench.machine()
    bench.print_machine(info)
    has_concurrency = bench.suite_has_option("--concurrency")
    print(f"the suite {'has' if has_concurrency else 'has no'} --concurrency "
          f"({'real runs' if has_concurrency else 'c > 1 measured by the client-level proxy'})")  # fmt: skip
    report: dict[str, Any] = {"machine": info, "has_concurrency": has_concurrency, "delays": {}}
    with tempfile.TemporaryDirectory(prefix="bench-ttv-") as tmp:
        work = Path(tmp)
        for delay in [float(x) for x in args.delays.split(",")]:
            args.delay = delay
            with bench.Target(SPEC, faults=FAULTS, api_key=API_KEY, delay=delay) as target:
                print(f"\ntarget latency {delay:g} s: {target.url}")
                # Untimed: warm caches, count the default run's requests.
                requests = (
                    args.requests
                    or measure(
                        target,
                        bench.suite_cmd(work / "ours", url=target.url, api_key=API_KEY),
                        bench.ROOT,
                    )["requests"]
                )
                todo = variants(args, target.url, work, requests, has_concurrency)
                runs: dict[str, list[dict[str, Any]]] = {name: [] for name in todo}
                for i in range(args.runs):
                    for name in todo if i % 2 == 0 else reversed(todo):
                        cmd, cwd, count = todo[name]
                        m = measure(target, cmd, cwd, count=count)
                        runs[name].append(m)
                        print(f"  run {i + 1} {name:18s} {m['requests']:4d} requests  "
                              f"wall {m['wall_s']:6.2f} s  sending {m['sending_s']:6.2f} s  "
                              f"cpu {m['cpu_s']:6.2f} s  load {m['load']}")  # fmt: skip
                fixed = None
                if args.fixed_from:
                    earlier = json.loads(args.fixed_from.read_text())
                    fixed = next(iter(earlier["delays"].values()))["ours_fixed_s"]
                entry = summarise(runs, requests, fixed)
                if args.fit and delay == 0:
                    entry["fit"] = fit(target, work, args.runs, args.fit_baseline)
                report["delays"][f"{delay:g}"] = entry
    print_summary(report)
    bench.write_json(args.json, report)
    return 0


def summarise(
    runs: dict[str, list[dict[str, Any]]], requests: int, fixed: float | None = None
) -> dict[str, Any]:
    """Per variant: median (min-max) time to verdict, requests and req/s."""
    out: dict[str, Any] = {"suite_requests": requests, "runs": runs, "summary": {}}
    serial = runs.get("ours c1")
    if serial:
        fixed = statistics.median(r["wall_s"] - r["sending_s"] for r in serial)
    fixed = float("nan") if fixed is None else fixed
    out["ours_fixed_s"] = fixed
    for name, rs in runs.items():
        if name.startswith("st-"):
            times = [r["time_to_count_s"] for r in rs]
        elif "proxy" in name:
            # The sending phase of the pool, plus the suite's fixed cost (serial run).
            times = [r["sending_s"] + fixed for r in rs]
        else:
            times = [r["wall_s"] for r in rs]
        rates = [r["requests"] / r["sending_s"] for r in rs if r["sending_s"] > 0]
        reached = [t for t in times if t == t]  # NaN: st fuzz did not reach the count
        out["summary"][name] = {
            "time_to_verdict_s": bench.summary(reached) if reached else None,
            "runs_reaching_count": len(reached),
            "requests": statistics.median(r["requests"] for r in rs),
            "req_per_s_sending": bench.summary(rates) if rates else None,
            "cpu_s": bench.summary([r["cpu_s"] for r in rs]),
            "loads": [r["load"] for r in rs],
        }
    return out


def print_summary(report: dict[str, Any]) -> None:
    print("\ntime to verdict, median (min-max) s over the runs; req/s in the sending phase")
    rows = []
    for delay, entry in report["delays"].items():
        for name, s in entry["summary"].items():
            rate = s["req_per_s_sending"]
            rows.append([
                f"{delay} s", name, f"{s['requests']:.0f}",
                bench.fmt_range(s["time_to_verdict_s"], digits=1) if s["time_to_verdict_s"]
                else "not reached",
                bench.fmt_range(rate, digits=1) if rate else "-",
                f"{s['loads'][0]} .. {s['loads'][-1]}",
            ])  # fmt: skip
    bench.print_table(
        ["latency", "variant", "requests", "time to verdict s", "req/s", "load"], rows
    )


if __name__ == "__main__":
    sys.exit(main())
