"""Processes for run.py: logged commands with bounded waits, servers that always stop.

Standard library only. Every process is started in a session of its own, so that stopping
it (SIGTERM, then SIGKILL after a bounded wait) reaches its children too, and only them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

T0 = time.monotonic()


def log(msg: str) -> None:
    """One progress line, with the seconds since the start."""
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


class StepError(Exception):
    """A step failed; the message says which and where its log is."""


def run_logged(
    cmd: Sequence[str | os.PathLike[str]],
    log_path: Path,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    """Run ``cmd`` to completion with its output in ``log_path``; raise StepError on failure."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        out.write(f"\n$ {' '.join(map(str, cmd))}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(map(str, cmd)),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            raise StepError(f"{cmd[0]} timed out after {timeout:.0f} s (log: {log_path})") from None
        except BaseException:
            stop_group(proc)
            raise
    if rc != 0:
        raise StepError(f"{Path(str(cmd[0])).name} exited {rc} (log: {log_path})")


def stop_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop ``proc`` and its process group: SIGTERM, a bounded wait, then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)  # the group we created for this very process
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A server process on 127.0.0.1, its log, and a readiness probe."""

    def __init__(
        self,
        name: str,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        port: int,
        log_path: Path,
        ready_path: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name, self.cmd, self.port = name, [str(c) for c in cmd], port
        self.log_path, self.ready_path = log_path, ready_path
        self.env, self.cwd, self.headers = env, cwd, dict(headers or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_timeout: float) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "wb")  # noqa: SIM115 (closed with the process)
        out.write(f"$ {' '.join(self.cmd)}\n".encode())
        out.flush()
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(self.env) if self.env is not None else None,
            cwd=self.cwd,
            start_new_session=True,
        )
        out.close()
        _LIVE.append(self)
        self._wait_ready(ready_timeout)

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise StepError(
                    f"{self.name} exited {self.proc.returncode} while starting "
                    f"(log: {self.log_path}):\n{tail(self.log_path)}"
                )
            req = urllib.request.Request(self.url + self.ready_path, headers=self.headers)
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    if resp.status < 500:
                        return
                    last = f"status {resp.status}"
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    return  # it answers HTTP: up (404 or 401 on a probe path is fine)
                last = f"status {exc.code}"
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            time.sleep(0.5)
        raise StepError(
            f"{self.name} not ready after {timeout:.0f} s ({last}; log: {self.log_path}):\n"
            f"{tail(self.log_path)}"
        )

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)
        if self in _LIVE:
            _LIVE.remove(self)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


_LIVE: list[Server] = []


def stop_all() -> None:
    """Stop every server still running (on exit, on a signal, on failure)."""
    for server in list(reversed(_LIVE)):
        server.stop()


def _on_signal(signum: int, _frame: object) -> None:
    stop_all()
    log(f"interrupted by signal {signum}; servers stopped")
    sys.exit(128 + signum)


def install_signal_handlers() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])
