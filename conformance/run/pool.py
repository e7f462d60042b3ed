"""The engine's pools of sender threads: ``ThreadPoolExecutor``'s ``submit`` and
``shutdown``, on daemon threads that nothing has to wait for.

Why not ``ThreadPoolExecutor``: its threads are joined when the interpreter exits,
whatever ``shutdown(wait=False)`` said, so a run stopped by Ctrl-C would still wait for
every send in flight (a slow target's answer, up to ``--request-timeout``) before the
process could end. A run that is interrupted abandons them here: they end with the process.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

T = TypeVar("T")
_Job = tuple[Future[Any], Callable[[], Any]]


class Pool:
    """At most ``size`` daemon threads, started as work comes, taking jobs in order."""

    def __init__(self, size: int, name: str) -> None:
        self._size = max(1, size)
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: submit after shutdown")
            self._jobs.put((future, functools.partial(fn, *args)))
            if len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, call = job
            if future.done():
                # Failed while queued (Run.abandon). Checked first: set_running_or_notify_cancel
                # logs "Future ... in unexpected state" (CRITICAL, on stderr) before it raises.
                continue
            try:
                if not future.set_running_or_notify_cancel():
                    continue  # cancelled while queued
            except RuntimeError:
                continue  # failed while queued: its run was interrupted (Run.abandon)
            try:
                result = call()
            except BaseException as exc:  # as ThreadPoolExecutor: the future carries it
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(exc)
            else:
                # Failed meanwhile (Run.abandon): what this job came back with is not wanted.
                with contextlib.suppress(InvalidStateError):
                    future.set_result(result)

    def shutdown(self, *, wait: bool = True, cancel_futures: bool = False) -> None:
        """No more jobs; with ``cancel_futures`` the queued ones are cancelled; with
        ``wait`` the jobs running (and, without cancelling, those queued) end first."""
        with self._lock:
            self._closed = True
            while cancel_futures:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
            for _ in self._threads:
                self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
