"""Benchmark: what ``completions-conformance proxy`` adds to a stream, and what it holds.

    python benchmarks/bench_proxy.py [--part latency|throughput|memory|all] [--runs N]
                                     [--json OUT]

The upstream is ``_stream_target.py`` (its own process): paced completion chunks, each
stamped with ``time.monotonic_ns()`` when written. Every variant talks to that one
upstream, in one run, interleaved (direct, proxy judging every exchange, proxy with
``--sample 0``, in rotating order), each proxy in its own process as a user runs it:

* **latency**: one stream at a time, ``--chunks`` chunks ``--interval`` s apart. Per chunk,
  arrival time minus its stamp (read by read, as the client's socket delivers them); per
  stream, the time to the first byte. Added latency is the proxy's percentile minus the
  direct one, over all chunks of all runs.
* **throughput**: ``--concurrency`` streams at once (asyncio + httpx), ``--streams`` in all,
  chunks as fast as the upstream writes them; streams/s, chunks/s, and the proxy's own CPU
  seconds per 1,000 streams (from /proc, far less inflated by a busy machine than wall).
* **memory**: ``--long`` streams at once, each ``--long-chunks`` chunks one ``--long-interval``
  s apart; the proxy's resident memory before, its peak (VmHWM), and what it judged.

Client, proxies and upstream share the machine's cores: the figures are the whole
machine's, stated with its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
import httpx

STAMP = re.compile(rb'"t":(\d+)')
MODEL = "bench-model"
KEY = "sk-bench-0123456789"


class Process:
    """A child process that prints its URL on its first line of output."""

    def __init__(self, cmd: list[str], marker: str, env: dict[str, str] | None = None) -> None:
        self.cmd, self.marker, self.env = cmd, marker, env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115  (its stderr, read on failure)

    def start(self) -> str:
        env = bench.bench_env(PYTHONUNBUFFERED="1", **self.env)
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=bench.ROOT,
            env=env,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + bench.START_TIMEOUT
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if self.marker in line:
                self.url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)  # type: ignore[union-attr]
                return self.url
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError(f"did not start: {' '.join(self.cmd)}")

    def pids(self) -> dict[str, int]:
        """The proxy's processes by role: this one (``judge``: the judge, the live verdict,
        the reports) and its children (``forward``: the forwarding process; the resource
        tracker that multiprocessing starts for the shared counters)."""
        assert self.proc is not None
        out = {"judge": self.proc.pid}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) != self.proc.pid:
                    continue
                cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
            except (OSError, IndexError, ValueError):
                continue
            role = "tracker" if "resource_tracker" in cmdline else "forward"
            out[role] = int(stat.parent.name)
        return out

    def status(self, key: str) -> dict[str, int]:
        """A /proc/PID/status figure in kB (VmRSS, VmHWM) of each of the proxy's processes."""
        out = {}
        for role, pid in self.pids().items():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    out[role] = int(line.split()[1])
        return out

    def cpu(self) -> dict[str, float]:
        """User + system CPU seconds so far of each of the proxy's processes."""
        out = {}
        for role, pid in self.pids().items():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[role] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return out

    def stop(self) -> str:
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        return out


def upstream(server: str = "pure") -> Process:
    return Process(
        [bench.PYTHON, str(bench.BENCH_DIR / "_stream_target.py"), "--server", server], "URL "
    )


#: The proxies a run may compare (--variants), each with its options and environment:
#: judging every exchange (the default) or none (``--sample 0``), forwarding as the proxy
#: does (several upstream pools) or as before issue 36 ("pure": one pool; measured there:
#: uvloop's loop as well, "asyncio" meaning without it); conformance.front.forward.SERVER_ENV.
PURE = {"CONFORMANCE_FORWARD_SERVER": "pure"}
VARIANTS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "proxy": ((), {}),
    "proxy-sample-0": (("--sample", "0"), {}),
    "proxy-pure": ((), PURE),
    "proxy-pure-sample-0": (("--sample", "0"), PURE),
    # The judge validating every chunk with jsonschema alone, as before issue 36's
    # one-pass check (conformance.judging.document.sure_valid.SURE_ENV).
    "proxy-jsonschema": ((), {"CONFORMANCE_SURE_VALID": "off"}),
}


def proxy(target: str, report_dir: Path, *extra: str, env: dict[str, str] | None = None) -> Process:
    cmd = [
        bench.PYTHON,
        "-m",
        "conformance",
        "proxy",
        "--upstream",
        target,
        "--listen",
        "127.0.0.1:0",
        "--report-dir",
        str(report_dir),
        *extra,
    ]
    return Process(cmd, "live verdict at", env)


def body(chunks: int) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "Hi", "max_tokens": chunks, "stream": True}


def headers(interval: float) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}", "X-Bench-Interval": str(interval)}


# -- latency ---------------------------------------------------------------------------------


def one_stream(
    client: httpx.Client, url: str, chunks: int, interval: float
) -> tuple[float, list[float]]:
    """Time to the first byte, and each chunk's latency (arrival minus its stamp), in s."""
    latencies: list[float] = []
    buffer = b""
    start = time.monotonic_ns()
    first = None
    with client.stream(
        "POST", url + "/v1/completions", json=body(chunks), headers=headers(interval)
    ) as r:
        for raw in r.iter_raw():
            now = time.monotonic_ns()
            first = first or now
            buffer += raw
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                if m := STAMP.search(event):
                    latencies.append((now - int(m.group(1))) / 1e9)
    assert len(latencies) == chunks, f"{len(latencies)} of {chunks} chunks"
    return ((first or start) - start) / 1e9, latencies


def latency(urls: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {name: {"ttfb": [], "chunk": []} for name in urls}
    names = list(urls)
    with httpx.Client(timeout=60) as client:
        for name in names:  # warm-up: connections, imports, the judge's first spec use
            one_stream(client, urls[name], 5, 0.0)
        for run in range(args.runs):
            order = names[run % len(names) :] + names[: run % len(names)]
            for _ in range(args.streams_per_run):
                for name in order:
                    ttfb, chunks = one_stream(client, urls[name], args.chunks, args.interval)
                    per[name]["ttfb"].append(ttfb)
                    per[name]["chunk"].extend(chunks)
    out: dict[str, Any] = {}
    for name, figures in per.items():
        out[name] = {
            what: {f"p{q}": bench.percentile(values, q) * 1000 for q in (50, 90, 99)}
            | {"n": len(values)}
            for what, values in figures.items()
        }
    for name in names[1:]:
        out[name]["added_ms"] = {
            what: {q: out[name][what][q] - out["direct"][what][q] for q in ("p50", "p90", "p99")}
            for what in ("ttfb", "chunk")
        }
    return out


# -- throughput ------------------------------------------------------------------------------


async def many_streams(
    url: str, total: int, concurrency: int, chunks: int, interval: float
) -> tuple[float, list[str]]:
    """Wall seconds for ``total`` streams, ``concurrency`` at once, and the errors seen
    (a stream that failed is not retried; an answer other than 200, such as the proxy's
    502 when the upstream gave none, is a failed stream too)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=concurrency)
    left = total
    errors: list[str] = []

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            try:
                async with client.stream(
                    "POST", url + "/v1/completions", json=body(chunks), headers=headers(interval)
                ) as r:
                    async for _ in r.aiter_raw():
                        pass
                    if r.status_code != 200:
                        errors.append(f"status {r.status_code}")
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return time.perf_counter() - start, errors


def throughput(
    urls: dict[str, str], procs: dict[str, Process], args: argparse.Namespace
) -> dict[str, Any]:
    names = list(urls)
    walls: dict[str, list[float]] = {n: [] for n in names}
    errors: dict[str, list[str]] = {n: [] for n in names}
    cpus: dict[str, dict[str, list[float]]] = {n: {} for n in names if n in procs}
    judged: dict[str, list[int]] = {n: [] for n in names if n in procs}
    for run in range(args.runs):
        for name in names[run % len(names) :] + names[: run % len(names)]:
            before = procs[name].cpu() if name in procs else {}
            wall, failed = asyncio.run(
                many_streams(urls[name], args.streams, args.concurrency, args.tp_chunks, 0.0)
            )
            walls[name].append(wall)
            errors[name] += failed
            if name in procs:
                # The judge's CPU for these streams, not the next ones; its count so far.
                judged[name].append(settled(urls[name]))
                for role, seconds in procs[name].cpu().items():
                    spent = (seconds - before.get(role, 0.0)) / args.streams * 1000
                    cpus[name].setdefault(role, []).append(spent)
    out = {}
    for name in names:
        wall = bench.summary(walls[name])
        out[name] = {
            "wall_s": wall,
            "streams_per_s": args.streams / wall["median"],
            "chunks_per_s": args.streams * args.tp_chunks / wall["median"],
            "failed_streams": len(errors[name]),
            "errors": sorted(set(errors[name]))[:5],
        }
        if name in cpus:
            out[name]["cpu_s_per_1000_streams"] = {
                r: bench.summary(v) for r, v in cpus[name].items()
            }
            out[name]["cpu_s_per_run_per_1000_streams"] = cpus[name]
            out[name]["judged_so_far_after_each_run"] = judged[name]
    return out


def settled(url: str, quiet: float = 2.0, timeout: float = 600.0) -> int:
    """Wait until the proxy's judge has judged nothing new for ``quiet`` s; its count."""
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        judged = int(
            httpx.get(url + "/_conformance/verdict.json", timeout=60).json()["traffic"]["judged"]
        )
        if judged != last:
            last, since = judged, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
        time.sleep(0.5)
    return last


# -- memory ----------------------------------------------------------------------------------


def memory(target: str, args: argparse.Namespace, report_dir: Path) -> dict[str, Any]:
    proc = proxy(target, report_dir, "--max-held-bytes", str(args.max_held))
    url = proc.start()
    try:
        asyncio.run(many_streams(url, 5, 5, 5, 0.0))  # warm-up
        before = proc.status("VmRSS")
        peak: dict[str, int] = dict(before)
        done = False

        async def watch() -> None:
            while not done:
                for role, kb in proc.status("VmRSS").items():
                    peak[role] = max(peak.get(role, 0), kb)
                await asyncio.sleep(0.5)

        async def both() -> tuple[float, list[str]]:
            nonlocal done
            watcher = asyncio.create_task(watch())
            result = await many_streams(
                url, args.long, args.long, args.long_chunks, args.long_interval
            )
            done = True
            await watcher
            return result

        wall, errors = asyncio.run(both())
        hwm = proc.status("VmHWM")
    finally:
        out = proc.stop()
    if not (report_dir / "verdict.json").is_file():
        proc.log.seek(0)
        raise RuntimeError(f"the proxy wrote no reports: {out}\n{proc.log.read()[-3000:]}")
    verdict = json.loads((report_dir / "verdict.json").read_text())
    return {
        "streams": args.long,
        "chunks_each": args.long_chunks,
        "interval_s": args.long_interval,
        "max_held_bytes": args.max_held,
        "wall_s": wall,
        "failed_streams": len(errors),
        "errors": sorted(set(errors))[:5],
        "rss_before_mb": {r: kb / 1024 for r, kb in before.items()},
        "rss_peak_sampled_mb": {r: kb / 1024 for r, kb in peak.items()},
        "vmhwm_mb": {r: kb / 1024 for r, kb in hwm.items()},
        "judged": verdict["traffic"]["judged"],
        "unjudged": verdict["traffic"]["unjudged"],
    }


# -- the judge alone ------------------------------------------------------------------------


def judge_cost(args: argparse.Namespace) -> dict[str, Any]:
    """CPU per exchange of the proxy's judge (TrafficJudge.take), in this process, for
    streams of the upstream's shape, and of one snapshot (the live page's cost)."""
    from _stream_target import chunk

    from conformance.judging.document.spec import load_spec
    from conformance.judging.traffic_judge import TrafficJudge
    from conformance.judging.wire.traffic import Seen

    def stream(n: int, prompt: str) -> Seen:
        created = int(time.time())
        writes = (*(chunk(MODEL, created, i == n - 1) for i in range(n)), b"data: [DONE]\n\n")
        request = json.dumps({**body(n), "prompt": prompt}).encode()
        return Seen(
            "bench",
            "POST",
            "http://u/v1/completions",
            (("Authorization", f"Bearer {KEY}"), ("Content-Type", "application/json")),
            request,
            200,
            (("content-type", "text/event-stream"), ("x-request-id", "r")),
            b"".join(writes),
            writes=writes,
            times=tuple(0.01 * k for k in range(len(writes))),
            ttfb=0.01,
            elapsed=0.5,
        )

    out: dict[str, Any] = {}
    for n in (30, 100):
        judge = TrafficJudge(load_spec("aihubmix"), target="bench")
        judge.take(stream(n, "warm-up"))
        per = []
        for run in range(args.runs):
            start = time.thread_time()
            for i in range(20):
                judge.take(stream(n, f"prompt {run} {i}"))  # distinct requests: no memo hits
            per.append((time.thread_time() - start) / 20 * 1000)
        start = time.thread_time()
        judge.snapshot()
        out[f"{n}_chunks"] = {
            "cpu_ms_per_exchange": bench.summary(per),
            "snapshot_cpu_ms": (time.thread_time() - start) * 1000,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--part", choices=["latency", "throughput", "memory", "judge", "all"], default="all"
    )
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--streams-per-run", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--tp-chunks", type=int, default=50)
    ap.add_argument("--long", type=int, default=1000)
    ap.add_argument("--long-chunks", type=int, default=30)
    ap.add_argument("--long-interval", type=float, default=1.0)
    ap.add_argument("--max-held", type=int, default=256 * 1024 * 1024)
    ap.add_argument(
        "--variants",
        default="direct,proxy,proxy-sample-0",
        help="comma-separated, run interleaved in this rotating order: direct and any of "
        + ", ".join(VARIANTS),
    )
    ap.add_argument(
        "--upstream-server",
        choices=["pure", "c"],
        default="pure",
        help="the upstream's uvicorn: h11 on asyncio (pure, as in §11) or httptools on uvloop",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result: dict[str, Any] = {
        "machine": bench.machine(),
        "load_at_start": bench.load(),
        "args": vars(args) | {"json": str(args.json)},
    }
    if args.part in ("judge", "all"):
        result["judge"] = judge_cost(args)
        print("judge", json.dumps(result["judge"], indent=1), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        up = upstream(args.upstream_server)
        target = up.start()
        names = [n.strip() for n in args.variants.split(",") if n.strip()]
        unknown = set(names) - {"direct", *VARIANTS}
        if unknown or names[:1] != ["direct"]:
            raise SystemExit(f"--variants: direct first, then some of {', '.join(VARIANTS)}")
        procs = {
            name: proxy(target, Path(tmp) / name, *VARIANTS[name][0], env=VARIANTS[name][1])
            for name in names[1:]
        }
        try:
            urls = {"direct": target} | {name: p.start() for name, p in procs.items()}
            if args.part in ("latency", "all"):
                result["latency"] = latency(urls, args)
                print("latency", json.dumps(result["latency"], indent=1), flush=True)
            if args.part in ("throughput", "all"):
                result["throughput"] = throughput(urls, procs, args)
                print("throughput", json.dumps(result["throughput"], indent=1), flush=True)
        finally:
            for name, p in procs.items():
                p.stop()
                p.log.seek(0)
                # What the proxy said on stderr (a judge thread that died says so there).
                result.setdefault("stderr", {})[name] = p.log.read()[-4000:]
        try:
            if args.part in ("memory", "all"):
                result["memory"] = memory(target, args, Path(tmp) / "memory")
                print("memory", json.dumps(result["memory"], indent=1), flush=True)
        finally:
            up.stop()
    result["load_at_end"] = bench.load()
    print("load", result["load_at_start"], "->", result["load_at_end"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
