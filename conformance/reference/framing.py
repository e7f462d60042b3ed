"""Server-sent events: framing payloads as ``data:`` events and writing them out paced.

``Framing`` says how an event is written and ``Pacing`` when and in what pieces; faults
transform both (stages ``framing`` and ``pacing``), and the target's ``delay`` option sets
the pacing's latency.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from conformance.reference.flavors import dumps

__all__ = ["Framing", "Pacing", "emit", "frame"]


@dataclass(frozen=True, slots=True)
class Framing:
    """How each event is written."""

    newline: str = "\n"
    #: The field name and separator before the payload.
    field: str = "data: "
    #: The blank line that ends an event (the newline, or nothing to merge events).
    end: str | None = None
    #: Lines written before the data line of every event (e.g. ``retry: 1000``).
    before: tuple[str, ...] = ()
    #: A comment block sent ahead of every event, the way proxies send keep-alives.
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class Pacing:
    """When the bytes of a response go out."""

    #: Seconds before the first byte of a completion (the target's latency).
    first_byte: float = 0.0
    #: Seconds between stream events.
    between: float = 0.0
    #: Seconds to stall after the first event (a hung upstream).
    stall_after_first: float = 0.0
    #: Write each event in pieces of these sizes, cycled; empty: whole events.
    pieces: tuple[int, ...] = ()


def frame(framing: Framing, payloads: Sequence[object]) -> list[bytes]:
    """Frame payloads as SSE events (``data: <payload>`` and a blank line)."""
    newline = framing.newline
    end = newline if framing.end is None else framing.end
    events: list[bytes] = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else dumps(payload).decode()
        lines = [*framing.before, framing.field + data]
        event = newline.join(lines) + newline + end
        if framing.comment is not None:
            event = framing.comment + newline + newline + event
        events.append(event.encode())
    return events


def _split(data: bytes, sizes: tuple[int, ...]) -> list[bytes]:
    """Split bytes into pieces of the given sizes, cycled."""
    pieces: list[bytes] = []
    cycle = itertools.cycle(sizes)
    position = 0
    while position < len(data):
        size = next(cycle)
        pieces.append(data[position : position + size])
        position += size
    return pieces


async def emit(pacing: Pacing, events: list[bytes]) -> AsyncIterator[bytes]:
    """Write the events, yielding to the loop between them like a real token stream."""
    for number, event in enumerate(events):
        if number and pacing.between:
            await asyncio.sleep(pacing.between)
        if pacing.pieces:
            for piece in _split(event, pacing.pieces):
                yield piece
        else:
            yield event
        if number == 0 and pacing.stall_after_first:
            # Starlette cancels this when the client disconnects; uvicorn when it stops.
            await asyncio.sleep(pacing.stall_after_first)
        await asyncio.sleep(0)
