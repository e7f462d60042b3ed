"""Benchmark: peak memory of the suite's client facing hostile targets, default bounds.

    python benchmarks/bench_hostile_memory.py [--runs N] [--only NAME] [--json OUT]

The parent serves each hostile scenario from a raw socket on 127.0.0.1 (in a thread, so
the target's memory is not counted) and, per run, starts a fresh child process that
builds a ``Client`` with the default ``Limits`` (16 MiB body cap, 50 000 events, 120 s),
sends one request, judges the answer by every requirement and builds the failure
evidence, as the suite does. The child reports its peak resident set size (VmHWM from
/proc/self/status; ru_maxrss where /proc is missing). A ``baseline`` child does the
imports and builds the client but sends nothing: the floor every scenario stands on.

The "at concurrency 32" scenarios send 32 requests at once from a pool of 32 threads
through one ``Client(concurrency=32)``, as the engine's ``--concurrency 32`` will, and
judge each answer: 32 endless streams at the same time (goal: < 250 MB).

Prints, per scenario, the median and min-max peak RSS over the runs (goal: < 200 MB for
one request) and the bound that ended the exchange(s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

ROOT = bench.ROOT

MIB = 1024 * 1024
GOAL_MB = 200
BLOCK = 64 * 1024

Serve = Callable[[socket.socket, threading.Event], None]


def _head(content_type: str, **headers: str | int) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Type: {content_type}", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def huge_body(conn: socket.socket, stop: threading.Event) -> None:
    """100 MB of JSON-looking bytes behind an honest Content-Length."""
    size = 100 * MIB
    conn.sendall(_head("application/json", Content_Length=size))
    block = b" " * BLOCK
    for _ in range(size // BLOCK):
        if stop.is_set():
            return
        conn.sendall(block)


def _endless_sse(event: bytes) -> Serve:
    def serve(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(_head("text/event-stream", Transfer_Encoding="chunked"))
        block = _chunk(event * max(1, BLOCK // len(event)))
        while not stop.is_set():
            conn.sendall(block)

    return serve


def endless_plain(conn: socket.socket, stop: threading.Event) -> None:
    """A chunked JSON body that never ends."""
    conn.sendall(_head("application/json", Transfer_Encoding="chunked"))
    block = _chunk(b"a" * BLOCK)
    while not stop.is_set():
        conn.sendall(block)


_SMALL = b'data: {"id":"cmpl-1","object":"text_completion","created":1,"choices":[{"text":"x","index":0}]}\n\n'
_LARGE = b'data: {"text": "' + b"y" * (BLOCK - 32) + b'"}\n\n'

SCENARIOS: dict[str, tuple[Serve | None, bool, int]] = {
    # name: (server behaviour, streamed request, requests at once)
    "baseline (no request)": (None, False, 1),
    "100 MB body": (huge_body, False, 1),
    "endless plain body": (endless_plain, False, 1),
    "endless SSE, small events": (_endless_sse(_SMALL), True, 1),
    "endless SSE, 64 KiB events": (_endless_sse(_LARGE), True, 1),
    "32 endless SSE (small events) at concurrency 32": (_endless_sse(_SMALL), True, 32),
    "32 endless SSE (64 KiB events) at concurrency 32": (_endless_sse(_LARGE), True, 32),
}
GOAL_CONCURRENT_MB = 250


class Server:
    """One behaviour per connection, on 127.0.0.1, until stopped."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(BLOCK)
                conn.settimeout(None)
                self.serve(conn, self.stop)
            except OSError:
                pass  # the client hung up once its bound was hit

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def peak_rss_kib() -> int:
    """The peak resident set size of this process, in KiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def child(url: str | None, stream: bool, concurrency: int = 1) -> dict[str, Any]:
    """What suite requests cost: send ``concurrency`` at once, judge each, keep evidence."""
    from concurrent.futures import ThreadPoolExecutor

    from conformance.judging.checks import load_checks
    from conformance.judging.document.spec import load_spec
    from conformance.judging.requirements import REGISTRY
    from conformance.judging.verdict.results import Results, evaluate
    from conformance.judging.wire.case import Case
    from conformance.judging.wire.exchange import Exchange
    from conformance.run.client import Client, Limits

    spec = load_spec("aihubmix")
    load_checks()
    requirements = list(REGISTRY.values())
    client = Client(
        url or "http://127.0.0.1:9", api_key="sk-bench", limits=Limits(), concurrency=concurrency
    )
    out: dict[str, Any] = {"bound": None, "elapsed": 0.0}
    if url is not None:
        body = {
            "model": "m",
            "prompt": "hi",
            "max_tokens": 4,
            **({"stream": True} if stream else {}),
        }
        results = Results.for_requirements(requirements)

        def one(_: int) -> Exchange:
            exchange = client.send(Case(body))
            findings = evaluate(requirements, spec, exchange)
            results.record(exchange, findings)
            return exchange

        began = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            exchanges = list(pool.map(one, range(concurrency)))
        bounds = sorted({str(ex.bound or ex.transport_error) for ex in exchanges})
        out.update(
            elapsed=round(time.perf_counter() - began, 3),
            bound=", ".join(bounds),
            kept_bytes=sum(len(ex.body) for ex in exchanges),
            events=sum(len(ex.events) for ex in exchanges if ex.events is not None),
            report_bytes=len(results.dumps()),
            peak_in_flight=client.stats.peak_in_flight,
        )
    client.close()
    out["peak_rss_kib"] = peak_rss_kib()
    return out


def run_child(url: str | None, stream: bool, concurrency: int = 1) -> dict[str, Any]:
    args = [
        sys.executable,
        __file__,
        "--child",
        url or "-",
        "--stream" if stream else "--no-stream",
        "--concurrency",
        str(concurrency),
    ]
    done = subprocess.run(args, capture_output=True, text=True, check=True, timeout=300)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = bench.parser(__doc__, runs=5)
    parser.add_argument("--only", help="run only the scenarios whose name holds this")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url = None if args.child == "-" else args.child
        print(json.dumps(child(url, bool(args.stream), args.concurrency)))
        return

    bench.print_machine(bench.machine())
    print(f"{args.runs} runs per scenario, default Limits")
    print(f"{'scenario':<50} {'median MB':>10} {'min-max MB':>14} {'s':>6}  ended by")
    report: dict[str, Any] = {}
    for name, (serve, stream, concurrency) in SCENARIOS.items():
        if args.only and args.only not in name:
            continue
        server = Server(serve) if serve else None
        try:
            runs = [
                run_child(server.url if server else None, stream, concurrency)
                for _ in range(args.runs)
            ]
        finally:
            if server:
                server.close()
        mb = [r["peak_rss_kib"] / 1024 for r in runs]
        elapsed = statistics.median(r["elapsed"] for r in runs)
        ended = runs[0]["bound"] or "-"
        goal = GOAL_CONCURRENT_MB if concurrency > 1 else GOAL_MB
        report[name] = {
            "peak_rss_mb": mb,
            "median_mb": statistics.median(mb),
            "goal_mb": goal,
            "load": [round(x, 2) for x in os.getloadavg()],
            "runs": runs,
        }
        print(
            f"{name:<50} {statistics.median(mb):>10.1f} {min(mb):>6.1f}-{max(mb):<7.1f}"
            f" {elapsed:>6.2f}  {ended}"
        )
    for name, entry in report.items():
        verdict = "met" if entry["median_mb"] < entry["goal_mb"] else "MISSED"
        print(f"{name}: {entry['median_mb']:.1f} MB, goal < {entry['goal_mb']} MB {verdict}")
    bench.write_json(args.json, report)


if __name__ == "__main__":
    main()
