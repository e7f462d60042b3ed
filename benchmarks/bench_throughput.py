"""Benchmark: requests per second of the suite and of schemathesis, same spec, same target.

    python benchmarks/bench_throughput.py [--runs N] [--requests 300] [--spec aihubmix]
                                          [--json OUT]

One reference target is started once, in its own process (``_target.py``, so its CPU is
not counted in either tool's), with the ``unknown-model-200`` fault: schemathesis sends
arbitrary ``model`` values and the target serves them instead of answering 404. It
counts the completion requests it receives, so both tools are counted the same way.

* schemathesis: ``st run SPEC --url URL --checks all --phases fuzzing --max-examples N
  --workers 1 --no-shrink --generation-database none --continue-on-failure`` with the
  target's key in an Authorization header. Only the fuzzing phase runs (the coverage and
  stateful phases would add requests of their own); no shrinking, so a failure found
  does not add replays; ``--continue-on-failure`` so it does not stop at the first.
* ours: ``pytest conformance --target-url URL --model reference-model --api-key KEY
  --max-examples K``, with K sized in an untimed first run so that the suite sends about
  N requests (its fixed tests send about 95, the two generated tests K each).
* ours, proposed drawer: the same with ``-p _fastdraw`` (``benchmarks/_fastdraw.py``, a
  prototype of a cheaper ``conformance.strategies.draw``, not merged), to show what it would give.

Every command runs with bytecode cached (``_common.bench_env``), as on a machine where
it ran before. Runs alternate A B C, C B A, ... Per run: wall time of the whole command, the span from the
first request's arrival to the last answer (the sending phase, start-up excluded), and
CPU time of the command (user + system, a busy machine inflates it far less). Reported:
median (min-max) requests/s both ways, CPU ms per request, and ours/schemathesis ratios.

For ``--spec nscale`` schemathesis gets a copy of the document with the Nscale errata
applied by hand (it refuses the document as written): ``type: object`` dropped beside the
anyOf of PromptValue and StopSequence.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

API_KEY = "sk-bench-throughput"


def nscale_for_schemathesis(workdir: Path) -> Path:
    """A copy of the Nscale document that schemathesis can load (errata applied by hand)."""
    text = (bench.ROOT / "specs" / "nscale.yaml").read_text(encoding="utf-8")
    # PromptValue and StopSequence: `type: object` beside an anyOf of strings and arrays.
    fixed, count = re.subn(r"^(\s+)type: object\n(\1anyOf:)", r"\2", text, flags=re.MULTILINE)
    if count == 0:
        raise RuntimeError("the Nscale erratum pattern was not found; update the patch")
    path = workdir / "nscale-errata.yaml"
    path.write_text(fixed, encoding="utf-8")
    return path


def st_cmd(spec_path: Path, url: str, n: int, seed: int) -> list[str]:
    return bench.st_run_cmd(spec_path, url, n, seed=seed, api_key=API_KEY)


def our_cmd(spec: str, url: str, k: int, report_dir: Path) -> list[str]:
    # The default budget (500 requests) would cut a larger comparison short.
    limits = ("--max-examples", str(k), "--budget-requests", "100000")
    return bench.suite_cmd(report_dir, *limits, url=url, api_key=API_KEY, spec=spec)


def measure(
    target: bench.Target, cmd: list[str], cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    target.reset()
    timed: bench.Timed = bench.run_timed(cmd, cwd=cwd, timeout=240, env=env)
    stats = target.stats()
    n = stats["requests"]
    span = (stats["last"] - stats["first"]) if n else float("nan")
    if timed.returncode not in (0, 1) or not n:
        print(f"  ! {' '.join(cmd[:4])} ... exited {timed.returncode}:")
        print(bench.tail(timed.stdout + timed.stderr))
    return {
        "requests": n,
        "wall_s": timed.wall,
        "span_s": span,
        "cpu_s": timed.cpu,
        "rps_wall": n / timed.wall,
        "rps_span": n / span if n else 0.0,
        "cpu_ms_per_request": timed.cpu * 1000 / n if n else float("nan"),
        "returncode": timed.returncode,
        "statuses": stats["statuses"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--requests", type=int, default=300, help="requests per tool and run")
    ap.add_argument("--spec", default="aihubmix", choices=("aihubmix", "nscale"))
    args = ap.parse_args(argv)
    info = bench.machine()
    bench.print_machine(info)
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        work = Path(tmp)
        spec_path = (
            nscale_for_schemathesis(work)
            if args.spec == "nscale"
            else bench.ROOT / "specs" / f"{args.spec}.yaml"
        )
        with bench.Target(args.spec, faults=["unknown-model-200"], api_key=API_KEY) as target:
            print(f"target: {target.url} (flavor {args.spec}, fault unknown-model-200)")
            # Untimed: warm the caches, and size K so that ours sends about --requests.
            calib = measure(target, our_cmd(args.spec, target.url, 10, work / "ours"), bench.ROOT)
            fixed = calib["requests"] - 2 * 10
            k = max(1, round((args.requests - fixed) / 2))
            measure(target, st_cmd(spec_path, target.url, args.requests, 0), work)
            print(f"ours: {fixed} requests from fixed tests, so --max-examples {k}")
            # Each tool runs in its own directory: schemathesis in a scratch one (it
            # writes .schemathesis/ there), the suite in the checkout, as documented.
            fast = ["-p", "_fastdraw"]
            fast_env = bench.bench_env(PYTHONPATH=str(bench.BENCH_DIR))
            tools = {
                "schemathesis": (
                    lambda seed: st_cmd(spec_path, target.url, args.requests, seed),
                    work,
                    None,
                ),
                "ours": (
                    lambda seed: our_cmd(args.spec, target.url, k, work / "ours"),
                    bench.ROOT,
                    None,
                ),
                "ours, proposed drawer": (
                    lambda seed: [*our_cmd(args.spec, target.url, k, work / "ours"), *fast],
                    bench.ROOT,
                    fast_env,
                ),
            }
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in tools}
            for i in range(args.runs):
                order = list(tools) if i % 2 == 0 else list(reversed(tools))
                for name in order:
                    make, cwd, env = tools[name]
                    m = measure(target, make(i + 1), cwd, env)
                    runs[name].append(m)
                    print(
                        f"  run {i + 1} {name:21s} {m['requests']:4d} requests  "
                        f"wall {m['wall_s']:6.2f} s  span {m['span_s']:6.2f} s  "
                        f"cpu {m['cpu_s']:6.2f} s  exit {m['returncode']}  {m['statuses']}"
                    )
            spent = json.loads((work / "ours" / "results.json").read_text())["spent"]
            print(f"ours, last run: results.json spent {spent}")

    metrics = ("requests", "rps_wall", "rps_span", "cpu_ms_per_request")
    result: dict[str, Any] = {
        name: {m: bench.summary([r[m] for r in rs]) for m in metrics} for name, rs in runs.items()
    }
    st = result["schemathesis"]
    ratios = {
        name: {
            "rps_wall": result[name]["rps_wall"]["median"] / st["rps_wall"]["median"],
            "rps_span": result[name]["rps_span"]["median"] / st["rps_span"]["median"],
            # CPU per request: schemathesis's over ours, so > 1 means ours is cheaper.
            "cpu_per_request": st["cpu_ms_per_request"]["median"]
            / result[name]["cpu_ms_per_request"]["median"],
        }
        for name in runs
        if name != "schemathesis"
    }
    print()
    print(f"median (min-max) over {args.runs} interleaved runs per tool:")
    bench.print_table(
        ["tool", "requests", "req/s (whole command)", "req/s (sending span)", "CPU ms/request"],
        [
            [
                name,
                f"{statistics.median(r['requests'] for r in runs[name]):.0f}",
                bench.fmt_range(result[name]["rps_wall"], digits=1),
                bench.fmt_range(result[name]["rps_span"], digits=1),
                bench.fmt_range(result[name]["cpu_ms_per_request"], digits=2),
            ]
            for name in runs
        ],
    )
    for name, r in ratios.items():
        print(
            f"ratio {name} / schemathesis: {r['rps_wall']:.2f}x req/s (whole command), "
            f"{r['rps_span']:.2f}x req/s (sending span), "
            f"{r['cpu_per_request']:.2f}x less CPU per request"
        )
    goal = "met" if ratios["ours"]["rps_wall"] >= 2 else "NOT met"
    print(f"goal ours >= 2x schemathesis req/s (whole command): {goal}")
    return bench.finish(
        args.json,
        {
            "machine": info,
            "spec": args.spec,
            "requests_asked": args.requests,
            "our_max_examples": k,
            "runs": runs,
            "summary": result,
            "ratios_over_schemathesis": ratios,
        },
    )


if __name__ == "__main__":
    sys.exit(main())
