"""The benchmarks' one harness: a target process, the commands, timing, summaries, the machine.

Every benchmark talks to 127.0.0.1 only and bounds every wait (process timeouts).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "benchmarks"
PYTHON = sys.executable
PACKAGES = (
    "completions-conformance",
    "schemathesis",
    "hypothesis",
    "pytest",
    "pytest-xdist",
    "httpx",
    "jsonschema",
    "openapi-schema-validator",
    "openai",
    "starlette",
    "uvicorn",
)
START_TIMEOUT = 30.0
MODEL = "reference-model"
ST = str(Path(PYTHON).parent / "st")


# -- the target process -------------------------------------------------------------------


class Target:
    """The reference target in a separate process (``benchmarks/_target.py``).

    Use as a context manager; ``url`` is its base URL, ``stats()`` what it counted since
    the last ``reset()``: completion requests, and the wall-clock time the first one
    arrived and the last one was answered.
    """

    def __init__(
        self,
        flavor: str = "aihubmix",
        *,
        faults: Sequence[str] = (),
        api_key: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.cmd = [PYTHON, str(BENCH_DIR / "_target.py"), "--flavor", flavor]
        for fault in faults:
            self.cmd += ["--fault", fault]
        if api_key:
            self.cmd += ["--api-key", api_key]
        if delay:
            self.cmd += ["--delay", str(delay)]
        self.api_key = api_key
        self.delay = delay
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT
        )
        deadline = time.monotonic() + START_TIMEOUT
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("URL "):
                self.url = line.split()[1]
                return self.url
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"the target did not start: {' '.join(self.cmd)}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def _get(self, path: str) -> dict[str, Any]:
        method = "POST" if path.endswith("reset") else "GET"
        req = urllib.request.Request(
            self.url + path, method=method, data=b"" if method == "POST" else None
        )
        with urllib.request.urlopen(req, timeout=10) as response:
            data: dict[str, Any] = json.loads(response.read())
            return data

    def stats(self) -> dict[str, Any]:
        return self._get("/_bench/stats")

    def reset(self) -> None:
        self._get("/_bench/reset")

    def __enter__(self) -> Target:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- running and timing commands -----------------------------------------------------------


#: Where benchmarked commands keep their bytecode (and pytest's rewritten test modules),
#: so that the shared checkout and virtualenv are left alone.
PYCACHE = Path(tempfile.gettempdir()) / "completions-conformance-bench-pycache"


def bench_env(*, cold: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a benchmarked command.

    Warm (the default): bytecode is cached in PYCACHE, as on any machine where the
    command ran once before. Cold: the caller's environment as it is; where it sets
    PYTHONDONTWRITEBYTECODE (as a fresh CI container or this sandbox does), pytest
    re-rewrites the assertions of every module of every pytest-plugin distribution
    (hypothesis, schemathesis, ours) on each run.
    Leftovers of an enclosing pytest or xdist run are removed either way.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "CONFORMANCE_")) and k != "COV_CORE_SOURCE"
    }
    if not cold:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env.update(extra)
    return env


@dataclass
class Timed:
    """A finished command: wall time, CPU time (it and its children), output."""

    wall: float
    cpu: float
    returncode: int
    stdout: str
    stderr: str


def run_timed(
    cmd: Sequence[str],
    *,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
) -> Timed:
    """Run ``cmd`` (in the checkout by default) and time it.

    CPU time is user + system of the command and every descendant it waited for,
    which a busy machine inflates far less than wall time.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        list(cmd),
        cwd=cwd,
        env=env if env is not None else bench_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu, proc.returncode, proc.stdout, proc.stderr)


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# -- the commands benchmarked -------------------------------------------------------------


def suite_cmd(
    report_dir: Path,
    *extra: str,
    url: str | None = None,
    api_key: str | None = None,
    spec: str | None = None,
) -> list[str]:
    """``pytest conformance`` as the README runs it: the embedded target, or ``url``.

    Reports go to ``report_dir`` and ``-p no:cacheprovider`` leaves the checkout's own
    pytest cache alone.
    """
    cmd = [PYTHON, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider"]
    if spec:
        cmd += ["--spec", spec]
    if url:
        cmd += ["--target-url", url, "--model", MODEL]
    if api_key:
        cmd += ["--api-key", api_key]
    return [*cmd, "--report-dir", str(report_dir), *extra]


def st_run_cmd(
    spec_path: Path, url: str, examples: int, *, seed: int, workers: int = 1, api_key: str
) -> list[str]:
    """schemathesis's ``st run``, fuzzing phase only, no shrinking, never stopping early."""
    return [
        ST, "run", str(spec_path), "--url", url, "--checks", "all", "--phases", "fuzzing",
        "--max-examples", str(examples), "--workers", str(workers), "--no-shrink",
        "--generation-database", "none", "--continue-on-failure", "--seed", str(seed),
        "--no-color", "-H", f"Authorization: Bearer {api_key}",
    ]  # fmt: skip


def st_fuzz_cmd(
    spec_path: Path, url: str, seconds: float, *, workers: int = 8, api_key: str
) -> list[str]:
    """schemathesis's ``st fuzz`` for ``seconds``: it has no request count, only a time."""
    return [
        ST, "fuzz", str(spec_path), "--url", url, "--checks", "all", "--workers", str(workers),
        "--max-time", str(math.ceil(seconds)), "--continue-on-failure", "--max-failures", "1000000",
        "--no-color", "-H", f"Authorization: Bearer {api_key}",
    ]  # fmt: skip


def suite_has_option(option: str) -> bool:
    """Whether ``pytest conformance`` knows ``option`` (e.g. --concurrency, absent from older checkouts)."""
    done = run_timed([PYTHON, "-m", "pytest", "conformance", "--help", "-p", "no:cacheprovider"])
    return option in done.stdout


# -- statistics ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max and p95 of ``values``."""
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "p95": percentile(values, 95),
    }


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Fixed cost and marginal cost per unit: the line through two (size, cost) medians."""
    (n1, c1), (n2, c2) = points[0], points[-1]
    marginal = (c2 - c1) / (n2 - n1)
    return c1 - marginal * n1, marginal


def load() -> str:
    """The load averages now (1, 5, 15 min), to print beside a figure."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def fmt_range(s: dict[str, float], unit: str = "", digits: int = 2) -> str:
    """``median (min-max) unit``."""
    f = f"{{:.{digits}f}}"
    text = f"{f.format(s['median'])} ({f.format(s['min'])}-{f.format(s['max'])})"
    return f"{text} {unit}".rstrip()


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain text table, columns as wide as their widest cell."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


# -- the machine and the command line --------------------------------------------------------


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "packages": versions,
    }


def print_machine(info: dict[str, Any]) -> None:
    pkgs = " ".join(f"{k}={v}" for k, v in info["packages"].items() if v)
    print(f"machine: nproc={info['nproc']} cpu={info['cpu']!r} python={info['python']}")
    print(f"packages: {pkgs}")
    print(f"load average at start: {info['load_average']}")


def parser(doc: str | None, runs: int = 5) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=runs, help=f"runs per variant (default {runs})")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    return ap


def write_json(path: Path | None, data: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(data, indent=2) + "\n")
        print(f"results written to {path}")


def finish(path: Path | None, data: dict[str, Any]) -> int:
    """Write the results (``--json``) and give the exit status: the end of every ``main``."""
    write_json(path, data)
    return 0
