"""Benchmark: the suite's own cost per exchange, the target's time excluded.

    python benchmarks/bench_overhead.py [--runs N] [--spec aihubmix|nscale]
                                        [--examples N] [--profile] [--json OUT]

Records once, then replays. The cases the suite sends (generated valid requests,
generated streams, the edge list, the invalid list) are sent once to a reference target
in its own process and the exchanges kept. Then, in each run, per exchange:

* generation: drawing its case (``conformance.strategies.draw`` of one value for generated cases;
  the edge and invalid lists' build time divided by their length);
* judging: ``results.evaluate`` by every registered requirement, on a fresh copy of the
  exchange (nothing cached from an earlier run);
* recording: what ``ItemRun.send`` / ``judge`` do besides ``evaluate``: the token count
  for the budget (``tokens_used``), ``Results.record`` and the streaming latency summary.

Generation is timed with the suite's drawer (``strategies/_draw.py``: a two-example
``@given`` run per value, Hypothesis's public API) and, in alternate runs, with the
former one through Hypothesis internals (``_fastdraw.py``, for comparison only): "total"
uses the suite's drawer, "total (internals)" the former one.

Wall time (perf_counter) and CPU time of the thread (thread_time, less sensitive to a
busy machine) are both reported; the summary is median and p95 per exchange over all
runs, and the per-run medians' min-max. ``--profile`` adds a cProfile of one run's
generation and judging, top functions by own time.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as bench
import _fastdraw

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import Spec, load_spec
from conformance.judging.requirements import REGISTRY
from conformance.judging.verdict.latency import stream_latency
from conformance.judging.verdict.results import Results, evaluate, tokens_used
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.client import Client
from conformance.strategies import _draw, draw, edge_requests, invalid_cases, valid_requests

MODEL = "reference-model"
API_KEY = "sk-bench-overhead"
MAX_TOKENS = 8
PHASES = ("generation", "judging", "recording", "total")
DRAWERS = ("current", "internals")


@dataclass
class Sample:
    """One case: its kind, how it was made, and the exchange recorded for it."""

    kind: str
    case: Case
    make: Callable[[], Any]  # re-creates the case (or its whole list) for timing
    share: int  # how many cases one call of ``make`` produces
    exchange: Exchange | None = None


def cases(spec: Spec, examples: int) -> list[Sample]:
    """The cases of one run of the suite's generated, edge and invalid tests."""
    valid = valid_requests(spec, model=MODEL, max_tokens=MAX_TOKENS)
    streams = valid_requests(spec, model=MODEL, max_tokens=MAX_TOKENS, stream=True)
    out: list[Sample] = []
    for kind, strategy in (("valid", valid), ("stream", streams)):
        for i in range(examples):
            [case] = draw(strategy, 1, seed_value=i)
            out.append(Sample(kind, case, lambda s=strategy, i=i: draw(s, 1, seed_value=i), 1))

    def edges() -> list[Case]:
        return edge_requests(spec, model=MODEL, max_tokens=MAX_TOKENS)

    def invalid() -> list[Case]:
        return invalid_cases(spec, model=MODEL, max_tokens=1)

    for kind, make in (("edge", edges), ("invalid", invalid)):
        made = make()
        out += [Sample(kind, case, make, len(made)) for case in made]
    return out


def fresh(exchange: Exchange) -> Exchange:
    """A copy with no cached parse, as the client hands it to the engine."""
    return replace(exchange, _json=None, _json_error=None, _json_parsed=False)


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def one_run(samples: list[Sample], spec: Spec) -> dict[str, dict[str, list[float]]]:
    """Time generation, judging and recording of every sample once (ms, wall and cpu)."""
    requirements = list(REGISTRY.values())
    results = Results.for_requirements(requirements)
    times: dict[str, dict[str, list[float]]] = {
        clock: {phase: [] for phase in PHASES} for clock in ("wall", "cpu")
    }
    made: dict[int, tuple[float, float]] = {}  # one timing per list-making function
    for sample in samples:
        key = id(sample.make) if sample.share > 1 else id(sample)
        if sample.share == 1 or key not in made:
            w0, c0 = clocks()
            sample.make()
            w1, c1 = clocks()
            made[key] = ((w1 - w0) / sample.share, (c1 - c0) / sample.share)
        gen = made[key]
        assert sample.exchange is not None
        exchange = fresh(sample.exchange)
        w0, c0 = clocks()
        findings = evaluate(requirements, spec, exchange)
        w1, c1 = clocks()
        tokens_used(exchange)  # ItemRun.send: the budget's token count
        results.record(exchange, findings)
        stream_latency(exchange)
        w2, c2 = clocks()
        for clock, g, judge, rec in (
            ("wall", gen[0], w1 - w0, w2 - w1),
            ("cpu", gen[1], c1 - c0, c2 - c1),
        ):
            t = times[clock]
            t["generation"].append(g * 1000)
            t["judging"].append(judge * 1000)
            t["recording"].append(rec * 1000)
            t["total"].append((g + judge + rec) * 1000)
    return times


def record(samples: list[Sample], spec: Spec) -> dict[str, float]:
    """Send every case once; keep the exchanges; return the client's CPU ms per exchange."""
    cpu: list[float] = []
    with bench.Target(spec.name, api_key=API_KEY) as target:
        client = Client(target.url, api_key=API_KEY, media_type=spec.request_media_type)
        try:
            for sample in samples:
                c0 = time.thread_time()
                sample.exchange = client.send(sample.case)
                cpu.append((time.thread_time() - c0) * 1000)
        finally:
            client.close()
    return {"median": statistics.median(cpu), "p95": sorted(cpu)[int(0.95 * (len(cpu) - 1))]}


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(values), "p95": ordered[int(0.95 * (len(values) - 1))]}


def use_drawer(name: str) -> None:
    """Make ``conformance.strategies.draw`` draw the suite's (public) way or through internals."""
    _fastdraw.install()
    _draw.draw_one = _fastdraw.one if name == "internals" else _draw._original_draw_one  # type: ignore[attr-defined]


def profile(samples: list[Sample], spec: Spec, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    one_run(samples, spec)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=10)
    ap.add_argument("--spec", default="aihubmix", choices=("aihubmix", "nscale"))
    ap.add_argument(
        "--examples",
        type=int,
        default=10,
        help="generated cases per kind (default 10, as --max-examples in a default run)",
    )
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one run")
    args = ap.parse_args(argv)
    info = bench.machine()
    bench.print_machine(info)
    load_checks()
    spec = load_spec(args.spec)
    samples = cases(spec, args.examples)
    client_cpu = record(samples, spec)
    kinds = sorted({s.kind for s in samples}, key=["valid", "stream", "edge", "invalid"].index)
    statuses: dict[str, int] = {}
    for s in samples:
        assert s.exchange is not None
        statuses[str(s.exchange.status)] = statuses.get(str(s.exchange.status), 0) + 1
    print(
        f"spec {spec.name}: {len(samples)} exchanges recorded "
        f"({', '.join(f'{k} {sum(s.kind == k for s in samples)}' for k in kinds)}); "
        f"statuses {statuses}; {len(REGISTRY)} requirements"
    )
    for drawer in DRAWERS:  # warm-up: imports, compiled validators, strategy caches
        use_drawer(drawer)
        one_run(samples, spec)
    runs: dict[str, list[dict[str, dict[str, list[float]]]]] = {d: [] for d in DRAWERS}
    for i in range(max(1, args.runs)):
        for drawer in DRAWERS if i % 2 == 0 else reversed(DRAWERS):
            use_drawer(drawer)
            runs[drawer].append(one_run(samples, spec))
    use_drawer("current")

    def entry(clock: str, phase: str, idx: list[int], drawers: tuple[str, ...]) -> dict[str, float]:
        chosen = [r for d in drawers for r in runs[d]]
        values = [r[clock][phase][i] for r in chosen for i in idx]
        medians = [statistics.median(r[clock][phase][i] for i in idx) for r in chosen]
        return {**stats(values), "run_median_min": min(medians), "run_median_max": max(medians)}

    columns = {
        "generation": ("generation", ("current",)),
        "generation (internals)": ("generation", ("internals",)),
        "judging": ("judging", DRAWERS),
        "recording": ("recording", DRAWERS),
        "total": ("total", ("current",)),
        "total (internals)": ("total", ("internals",)),
    }
    groups = {"all": kinds, "generated": ("valid", "stream"), **{k: (k,) for k in kinds}}
    pooled: dict[str, Any] = {}
    rows = []
    for clock in ("wall", "cpu"):
        for group, members in groups.items():
            idx = [i for i, s in enumerate(samples) if s.kind in members]
            cells = {name: entry(clock, phase, idx, ds) for name, (phase, ds) in columns.items()}
            pooled[f"{clock}/{group}"] = cells
            rows.append(
                [
                    clock,
                    group,
                    len(idx),
                    *(
                        f"{c['median']:.3f} / {c['p95']:.3f}"
                        f" ({c['run_median_min']:.3f}-{c['run_median_max']:.3f})"
                        for c in cells.values()
                    ),
                ]
            )
    print()
    print(
        f"ms per exchange, median / p95 (min-max of the runs' medians; {args.runs} runs "
        "per drawer, judging and recording over all runs):"
    )
    bench.print_table(["clock", "cases", "n", *columns], rows)
    print(
        f"client (for reference, not in total): CPU {client_cpu['median']:.3f} ms median, "
        f"{client_cpu['p95']:.3f} ms p95 per exchange (httpx + reading + SSE parsing)"
    )
    for group in ("all", "generated"):
        for name in ("total", "total (internals)"):
            t = pooled[f"wall/{group}"][name]
            verdict = "met" if t["median"] <= 1.0 else "NOT met"
            print(
                f"goal median {name} <= 1 ms, {group} cases: {verdict} (wall "
                f"{bench.fmt_range({'median': t['median'], 'min': t['run_median_min'], 'max': t['run_median_max']}, 'ms', 3)})"
            )
    report = profile(samples, spec, 25) if args.profile else None
    if report:
        print(report)
    return bench.finish(
        args.json,
        {
            "machine": info,
            "spec": spec.name,
            "exchanges": len(samples),
            "runs": args.runs,
            "ms_per_exchange": pooled,
            "client_cpu_ms": client_cpu,
            "profile": report,
        },
    )


if __name__ == "__main__":
    sys.exit(main())
