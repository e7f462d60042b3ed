"""``completions-conformance proxy``: a reverse proxy that judges the traffic it forwards.

    completions-conformance proxy --upstream URL [--listen HOST:PORT] [--sample RATE]

Users point their SDK's base URL at it. Two processes share the work:

* the forwarding process (conformance.front.forward) relays each request upstream as it came
  and each answer back as it arrives, read by read, never buffered, and hands a copy of
  each answer of the judged operation (``--sample`` of them) to
* this process, which judges them in a worker thread with the suite's requirements
  (conformance.judging.traffic_judge), serves the live verdict (per model and per requirement,
  with the evidence of each finding) at ``/_conformance/`` (HTML) and
  ``/_conformance/verdict.json`` through the forwarding process, writes ``--har FILE``
  (the judged exchanges, redacted, HAR 1.2 for ``completions-conformance judge``) and,
  on SIGINT or SIGTERM, the reports (a second Ctrl-C quits at once, without them). A
  forwarding process that dies (killed) ends the proxy too: one ``ERROR:`` line, the
  reports of what was judged, verdict ``error`` (the suite's own machinery broke).

Judging is CPU work in Python: in the forwarding process it would hold the GIL while
chunks wait. Apart, it never sits on the request path, and a judge that fails leaves the
traffic flowing and shows as a suite error. The copies held for the judge share one byte
budget, and the queue is bounded: what the judge cannot take is forwarded and counted as
not judged, with why, so memory stays bounded whatever the traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from conformance.front import forward, interrupt, option_table
from conformance.front.forward import LIVE, Plan, Shared
from conformance.judging.document.contract import Contract
from conformance.judging.document.spec import Spec
from conformance.judging.traffic_judge import Snapshot, TrafficJudge
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.wire.exchange import Exchange
from conformance.judging.wire.traffic import Seen, har_document, har_of
from conformance.reference.serving import ThreadedServer

PROG = "completions-conformance proxy"
#: Exchanges waiting for the judge, at most; more are forwarded and counted as not judged.
#: Their bytes are bounded by MAX_HELD; this bounds a burst of short answers (1,000 streams
#: that end at once fit).
QUEUE = 4096
#: How long stop() waits for the judge to take what is queued; the rest is counted.
DRAIN_TIMEOUT = 60.0
#: The judge thread's niceness: the forwarding process gets the CPU first when both want
#: it, mildly (at 10, on a machine busy with other work, the judge all but stopped).
JUDGE_NICE = 5
#: Why an exchange queued when the proxy stopped was not judged.
STOPPED = "still queued when the proxy stopped"
#: The largest answer copied for the judge (--max-body-bytes's default, the suite's own).
MAX_BODY_BYTES = option_table.MAX_BODY_BYTES
#: The bytes of all answers copied for the judge at once (being recorded or queued).
MAX_HELD = option_table.MAX_HELD_BYTES
#: How long the forwarding process may take to start (a spawned interpreter).
START_TIMEOUT = 30.0


class HarWriter:
    """The judged exchanges as HAR 1.2: one JSON line per entry while running, the HAR
    document assembled on close (so a long session never sits in memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.part = path.with_name(path.name + ".part")
        self._file: TextIO | None = self.part.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def add(self, seen: Seen, exchange: Exchange) -> None:
        line = json.dumps(har_of(exchange, seen.started or time.time()), ensure_ascii=False)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is None:
                return
            self._file.close()
            self._file = None
        with (
            self.part.open(encoding="utf-8") as lines,
            self.path.open("w", encoding="utf-8") as out,
        ):
            for piece in har_document(line.rstrip("\n") for line in lines if line.strip()):
                out.write(piece)
        self.part.unlink()


class ProxyServer:
    """The proxy: the forwarding process on ``host``:``port`` (0: a free port), and here
    the judge, its worker thread and the live verdict's server. ``start()`` returns the
    proxy's URL once it serves; ``stop()`` ends forwarding, judges what is left and
    returns the final verdict."""

    def __init__(
        self,
        upstream: str,
        spec: Spec,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        sample: float = 1.0,
        har: Path | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_held: int = MAX_HELD,
        queue_size: int = QUEUE,
    ) -> None:
        self.judge = TrafficJudge(spec, target=upstream)
        self.har = HarWriter(har) if har is not None else None
        if self.har is not None:
            self.judge.listeners.append(self.har.add)
        self.plan = Plan(
            upstream, "", spec.operation_path, host, port, sample, max_body_bytes, max_held
        )
        self._ctx = multiprocessing.get_context("spawn")
        self.shared = Shared(self._ctx)
        self._outbox: Any = self._ctx.Queue(maxsize=queue_size)
        self._taken = 0
        self._closing = threading.Event()
        self._stopped = threading.Event()
        self._worker = threading.Thread(target=self._judge, name="conformance-judge", daemon=True)
        self._process: Any = None
        self._live: ThreadedServer | None = None
        self.url = ""

    # -- the judge ---------------------------------------------------------------------------

    def _judge(self) -> None:
        # The judge yields the CPU to the forwarding process when both want it.
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), JUDGE_NICE)
        while not self._stopped.is_set():
            try:
                fields, held = self._outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if self._closing.is_set():
                self.judge.note_seen()
                self.judge.note_unjudged(STOPPED)
            else:
                self._take(fields)
            self.shared.release(held)
            self._taken += 1

    def _take(self, fields: dict[str, Any]) -> None:
        """Judge one exchange handed over. Nothing here may end the worker (every later
        exchange would go unjudged, unseen): what fails is a suite error, shown."""
        try:
            seen = Seen(**fields, body=b"".join(fields.get("writes", ())))
        except Exception as exc:
            self.judge.note_seen()
            where = fields.get("where", "an exchange")
            self.judge.note_error(
                f"suite error: the judge could not read {where}: {type(exc).__name__}: {exc}"
            )
            return
        self.judge.take(seen)  # never raises: a failure is noted as a suite error

    def drain(
        self, timeout: float = 60.0, *, copies: bool = True, stall: float | None = None
    ) -> None:
        """Wait until every exchange the forwarding process handed over is judged and (with
        ``copies``) no copy is held: an answer a client has read whole may be handed over
        just after. Once the forwarding process is gone, copies no longer matter. With
        ``stall``, stop waiting too once nothing was taken for that long (a forwarding
        process that died may have lost what it was handing over)."""
        deadline = time.monotonic() + timeout
        taken, moved = self._taken, time.monotonic()
        while time.monotonic() < deadline:
            held = self.shared.held.value if copies else 0
            if self._taken >= self.shared.offered.value and held == 0:
                return
            if self._taken != taken:
                taken, moved = self._taken, time.monotonic()
            elif stall is not None and time.monotonic() - moved > stall:
                return
            time.sleep(0.01)

    def snapshot(self) -> Snapshot:
        """The verdict now, with what the forwarding process passed without judging."""
        return self.judge.snapshot(elsewhere=self.shared.counts())

    # -- the live verdict ---------------------------------------------------------------------

    def _live_app(self) -> Starlette:
        async def page(request: Request) -> Response:
            from conformance.reports.traffic import render_traffic

            data = await asyncio.to_thread(lambda: self.snapshot().to_json())
            return HTMLResponse(render_traffic(data, refresh=5))

        async def verdict(request: Request) -> Response:
            return JSONResponse(await asyncio.to_thread(lambda: self.snapshot().to_json()))

        routes = [
            Route(LIVE + "/", page),
            Route(LIVE, page),
            Route(LIVE + "/verdict.json", verdict),
        ]
        return Starlette(routes=routes)

    def _start_live(self) -> str:
        self._live = ThreadedServer(self._live_app(), name="live verdict's server")
        return self._live.start()

    # -- the forwarding process ------------------------------------------------------------------

    def start(self) -> str:
        """Start judging, the live server and the forwarding process; the proxy's URL."""
        self._worker.start()
        plan = Plan(**{**_fields(self.plan), "live": self._start_live()})
        receive, send = self._ctx.Pipe(duplex=False)
        self._process = self._ctx.Process(
            target=forward.run,
            args=(plan, self.shared, self._outbox, send),
            name="conformance-forward",
            daemon=True,
        )
        self._process.start()
        send.close()
        if not receive.poll(START_TIMEOUT):
            self.stop()
            raise RuntimeError("the forwarding process did not start")
        kind, value = receive.recv()
        if kind != "ready":
            self.stop()
            raise RuntimeError(value)
        self.url = value
        return self.url

    def died(self) -> str | None:
        """What became of the forwarding process if it ended without being stopped
        (killed), in words; None while it runs (or once stopped)."""
        process = self._process
        if process is None or process.is_alive():
            return None
        code = process.exitcode
        how = f"exit status {code}"
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                how = f"killed by {signal.Signals(-code).name}"
        return (
            f"the proxy's forwarding process (pid {process.pid}) ended unasked ({how}): "
            f"nothing listens on {self.url or 'its address'} any more"
        )

    def kill(self) -> None:
        """End the forwarding process at once (safe in a signal handler: one signal)."""
        process = self._process
        if process is not None and process.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)

    def stop(self) -> Snapshot:
        """Stop forwarding (in-flight answers end first), judge what is left, close the
        HAR; the final verdict."""
        process, self._process = self._process, None
        died = process is not None and not process.is_alive()
        if process is not None and process.is_alive():
            process.terminate()  # SIGTERM: uvicorn's graceful shutdown
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join(5)
        if self._worker.is_alive():
            # The forwarding process is gone. One that died may have lost a hand-over half
            # done: what is still coming comes at once, or not at all.
            self.drain(DRAIN_TIMEOUT, copies=False, stall=2.0 if died else None)
            self._closing.set()  # what the judge has not taken by now is counted, not judged
            self.drain(5, copies=False)
            self._stopped.set()
            # A forwarding process killed in the middle of handing one over leaves the
            # worker waiting for the rest of it: it is a daemon, and is left to wait.
            self._worker.join(5)
        lost = self.shared.offered.value - self._taken
        if lost > 0:  # handed over but never arrived (the forwarding process was stopped)
            self.judge.note_seen(lost)
            self.judge.note_unjudged(STOPPED, lost)
            self._taken += lost
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.har is not None:
            self.har.close()
        return self.snapshot()

    def __enter__(self) -> ProxyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _fields(plan: Plan) -> dict[str, Any]:
    return {name: getattr(plan, name) for name in Plan.__slots__}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="A reverse proxy that forwards every request to --upstream unchanged, "
        "streams every answer back as it arrives, and judges the traffic with the suite's "
        f"requirements: live verdict at {LIVE}/ and {LIVE}/verdict.json, reports on exit.",
    )
    option_table.add_arguments(p, option_table.PROXY, first=(option_table.FORWARDING,))
    return p


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(
    argv: list[str] | None = None, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    args = parser().parse_args(argv)
    from conformance.judging.document.spec import SpecError
    from conformance.reports.traffic import write_traffic_reports
    from conformance.run.fetch import load_spec

    problem = None
    if not 0 <= args.sample <= 1:
        problem = f"--sample {args.sample}: a share between 0 and 1"
    elif not args.upstream.startswith(("http://", "https://")):
        problem = f"--upstream {args.upstream}: an http(s) URL"
    try:
        host, port = _listen(args.listen)
    except ValueError:
        problem = problem or f"--listen {args.listen}: HOST:PORT"
    if problem:
        print(f"ERROR: {problem}", file=err)
        return BAD_INPUT
    try:
        spec = load_spec(args.spec, strict=args.strict_spec, contract=Contract(args.contract))
    except SpecError as exc:
        print(f"ERROR: --spec {args.spec}: {exc}", file=err)
        return BAD_INPUT
    server = ProxyServer(
        args.upstream,
        spec,
        host=host,
        port=port,
        sample=args.sample,
        har=Path(args.har) if args.har else None,
        max_body_bytes=args.max_body_bytes,
        max_held=args.max_held_bytes,
    )
    stop = _signalled(server)  # before the first request: a signal always ends in the reports
    try:
        url = server.start()
    except (OSError, RuntimeError) as exc:
        print(f"ERROR: --listen {args.listen}: {exc}", file=err)
        return BAD_INPUT
    print(f"{PROG}: {url} -> {args.upstream}; live verdict at {url}{LIVE}/", file=out, flush=True)
    while not stop.wait(0.5):
        if (died := server.died()) is not None:
            # A proxy that forwards nothing must not look as if it still served: it ends,
            # with the reports of what it judged, and the verdict says its machinery broke.
            print(f"ERROR: {died}; writing the reports of what was judged", file=err, flush=True)
            server.judge.note_error(f"suite error: {died}")
            break
    snapshot = server.stop()
    written = write_traffic_reports(snapshot, Path(args.report_dir))
    if args.har:
        written.append(Path(args.har))
    print(f"reports: {', '.join(str(p) for p in written)}", file=out)
    reasons = "; ".join(snapshot.verdict.reasons)
    print(f"verdict: {snapshot.verdict.word}" + (f" ({reasons})" if reasons else ""), file=out)
    return snapshot.verdict.exit_code


def _signalled(server: ProxyServer) -> threading.Event:
    """An event set on SIGINT or SIGTERM (set explicitly: a shell may start background jobs
    with SIGINT ignored). Once it is set, the proxy is judging what is left and writing the
    reports: a Ctrl-C then quits at once, its forwarding process with it."""
    stop = threading.Event()
    quit_now = interrupt.quit_at_once(before=server.kill, unwind=True)

    def first(signum: int, frame: object) -> None:
        if not stop.is_set():
            stop.set()
            signal.signal(signal.SIGINT, quit_now)
            interrupt.say(f"{PROG}: stopping, writing the reports (Ctrl-C again to quit at once)")

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, first)
    return stop
