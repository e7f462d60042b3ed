"""Benchmark: what OpenAI's 3 MB document costs, loaded and in a whole run, beside a vendored one.

    python benchmarks/bench_spec_load.py [--runs N] [--json OUT] [--no-suite]

Part 1, loading only (each measurement in a fresh interpreter, modules imported before the
clock starts, so only the document's cost is timed):

* ``aihubmix``: ``load_spec("aihubmix")``, a vendored 40 KB document;
* ``openai before``: what the suite did before (PyYAML's pure-Python ``safe_load`` of the
  whole file, then every ``$ref`` of the whole document inlined);
* ``openai cold``: ``load_spec("openai")`` with an empty cache (LibYAML's C loader, the
  completions operation resolved, the slimmed document written to the cache);
* ``openai warm``: ``load_spec("openai")`` again (the slimmed document read by digest).

Part 2, whole runs (``pytest conformance``, embedded target, warm bytecode): ``--spec
aihubmix`` against ``--spec openai`` with a warm and with a cold document cache, runs
interleaved, medians and the ratio openai / aihubmix of the medians (goal: <= 2).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

GOAL_RATIO = 2.0

_LOAD = """
import json, sys, time
from conformance.judging.document.spec import load_spec, resolve_refs, specs_dir
import yaml
variant = sys.argv[1]
start = time.perf_counter()
if variant == "openai before":
    document = yaml.safe_load((specs_dir() / "openai.yaml").read_text(encoding="utf-8"))
    resolve_refs(document)
else:
    load_spec(variant.split()[0])
print(json.dumps(time.perf_counter() - start))
"""

LOAD_VARIANTS = ("aihubmix", "openai before", "openai cold", "openai warm")


def _load_once(variant: str, cache: Path) -> float:
    env = bench.bench_env(CONFORMANCE_CACHE_DIR=str(cache))
    if variant == "openai cold":
        for entry in cache.glob("*"):
            entry.unlink()
    out = subprocess.run(
        [bench.PYTHON, "-c", _LOAD, variant],
        cwd=bench.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def _suite_once(spec: str, cache: Path, report_dir: Path, *, cold: bool) -> dict[str, Any]:
    if cold:
        for entry in cache.glob("*"):
            entry.unlink()
    timed = bench.run_timed(
        bench.suite_cmd(report_dir, spec=spec),
        env=bench.bench_env(CONFORMANCE_CACHE_DIR=str(cache)),
    )
    verdict = json.loads((report_dir / "results.json").read_text())["meta"].get("verdict")
    return {"wall_s": timed.wall, "cpu_s": timed.cpu, "verdict": verdict}


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=5)
    ap.add_argument("--no-suite", action="store_true", help="part 1 only")
    args = ap.parse_args(argv)
    info = bench.machine()
    bench.print_machine(info)
    loads: dict[str, list[float]] = {v: [] for v in LOAD_VARIANTS}
    suites: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-spec-load-") as tmp:
        cache, report_dir = Path(tmp) / "cache", Path(tmp) / "reports"
        cache.mkdir()
        _load_once("openai cold", cache)  # warm the bytecode and the cache once
        for i in range(args.runs):
            order = LOAD_VARIANTS if i % 2 == 0 else tuple(reversed(LOAD_VARIANTS))
            for variant in order:
                if variant == "openai warm":
                    _load_once("openai cold", cache)  # the warm run reads what cold wrote
                loads[variant].append(_load_once(variant, cache))
            print(f"  load run {i + 1}: " + ", ".join(f"{v} {loads[v][-1]:.3f} s" for v in order))
        if not args.no_suite:
            variants = (("aihubmix", False), ("openai", False), ("openai", True))
            bench.run_timed(bench.suite_cmd(report_dir, spec="openai"))  # bytecode, cache
            for i in range(args.runs):
                for spec, cold in variants if i % 2 == 0 else tuple(reversed(variants)):
                    name = f"{spec} {'cold cache' if cold else 'warm cache'}"
                    if spec == "aihubmix":
                        name = "aihubmix"
                    m = _suite_once(spec, cache, report_dir, cold=cold)
                    suites.setdefault(name, []).append(m)
                    print(
                        f"  run {i + 1} {name:18s}: {m['wall_s']:6.2f} s wall, "
                        f"{m['cpu_s']:5.2f} s CPU, {m['verdict']}"
                    )
    print()
    rows = []
    base = bench.summary(loads["aihubmix"])["median"]
    for variant, values in loads.items():
        s = bench.summary(values)
        rows.append([variant, bench.fmt_range(s, "s", 3), f"{s['median'] / base:.1f}x"])
    bench.print_table(["load", "median (min-max)", "vs aihubmix"], rows)
    result: dict[str, Any] = {
        "machine": info,
        "loads": {v: bench.summary(x) for v, x in loads.items()},
    }
    if suites:
        print()
        wall = {n: bench.summary([m["wall_s"] for m in ms]) for n, ms in suites.items()}
        cpu = {n: bench.summary([m["cpu_s"] for m in ms]) for n, ms in suites.items()}
        rows = [
            [
                name,
                bench.fmt_range(wall[name], "s"),
                bench.fmt_range(cpu[name], "s"),
                f"{wall[name]['median'] / wall['aihubmix']['median']:.2f}",
                f"{cpu[name]['median'] / cpu['aihubmix']['median']:.2f}",
                ",".join(sorted({str(m["verdict"]) for m in suites[name]})),
            ]
            for name in suites
        ]
        bench.print_table(
            ["run", "wall median (min-max)", "CPU median (min-max)", "wall ratio", "CPU ratio",
             "verdicts"],
            rows,
        )  # fmt: skip
        worst = max(wall[n]["median"] / wall["aihubmix"]["median"] for n in wall)
        print(
            f"goal: a run on openai costs <= {GOAL_RATIO:g}x a run on aihubmix; worst {worst:.2f}x"
        )
        result["suites"] = {"wall": wall, "cpu": cpu, "runs": suites}
    return bench.finish(args.json, result)


if __name__ == "__main__":
    sys.exit(main())
