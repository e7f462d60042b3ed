"""Ctrl-C, the same at every door (the run, ``gate``, ``proxy``): the first one stops the
work and says so in one line, and the work ends with what it has (partial reports, the
verdict ``interrupted``, exit 130); a second one quits at once, without a traceback.

A signal handler runs in the main thread between two bytecodes, whatever that thread was
doing: the handlers here write with ``os.write`` (a ``print`` could land inside the
buffered write it interrupted: "reentrant call") and otherwise only set flags, or raise
where the door wants its main thread out of a wait.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from conformance.judging.verdict.outcomes import INTERRUPTED

#: What the first Ctrl-C says.
FIRST = "interrupted: stopping, writing the partial reports (Ctrl-C again to quit at once)"
#: What the second says, as the process ends.
AGAIN = "interrupted again: quitting at once, without the reports"
#: A Ctrl-C before a run started (pytest starting, the document, the preflight).
EARLY = "interrupted before the run started: nothing was judged, no reports"

Handler = Callable[[int, Any], None]


def say(line: str, fd: int = 2) -> None:
    """One line on ``fd`` (stderr; under pytest's capture, a copy of the terminal's taken
    before the capture began), safe inside a signal handler."""
    with contextlib.suppress(OSError):  # a terminal gone is no reason for a traceback
        os.write(fd, (line + "\n").encode("utf-8", "replace"))


def quit_at_once(
    line: str = AGAIN,
    before: Callable[[], None] | None = None,
    *,
    fd: int = 2,
    unwind: bool = False,
) -> Handler:
    """A handler that says ``line``, calls ``before`` (stop child processes) and ends the
    process with the interrupted status at once: nothing is flushed, joined or written.
    With ``unwind``, by SystemExit instead, so that Python's own exit still runs (the
    proxy's: multiprocessing releases its semaphores, else its tracker warns of a leak);
    not under pytest, which would catch it."""

    def handler(signum: int, frame: Any) -> None:
        say(line, fd)
        if before is not None:
            before()
        if unwind:
            raise SystemExit(INTERRUPTED)
        os._exit(INTERRUPTED)

    return handler


def on_sigint(handler: Handler) -> Callable[[], None]:
    """Install ``handler`` for SIGINT; what puts the previous one back, unless another was
    installed since (after a Ctrl-C, :func:`ignore`: it stays). Outside the main thread no
    handler can be set: nothing changes (an embedding program keeps its own)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, handler)

    def restore() -> None:
        # previous None: set outside Python, nothing to put back
        if previous is not None and signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, previous)

    return restore


def ignore() -> None:
    """Ignore Ctrl-C from now on (a process whose work is done, about to exit). Python's
    teardown puts a handler of its own back to the default, which kills; not an ignore."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def first_then_quit(
    stop: Callable[[], None], *, again: Handler | None = None, fd: int = 2, line: str = FIRST
) -> Handler:
    """A handler for the first Ctrl-C: from then on a second one quits at once (``again``),
    then it says ``line`` and calls ``stop`` (which may raise, in the main thread)."""

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, again or quit_at_once(fd=fd))
        say(line, fd)
        stop()

    return handler
