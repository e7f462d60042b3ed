"""Incremental server-sent-events parser (WHATWG HTML, "Parsing an event stream").

Pure and I/O free: the caller feeds the body's byte chunks as they arrive and gets back
the events each chunk completed, stamped with that chunk's arrival time. At the end of
the body ``close()`` says whether the stream stopped mid-event or mid-line.

Deliberate points, all from the spec unless noted:

* The body is decoded as UTF-8 with an incremental decoder, so a character split across
  chunks is fine. Invalid sequences become U+FFFD as the spec requires, and
  ``invalid_utf8`` records that it happened (the spec is silent; the suite reports it).
* One U+FEFF at the very start of the stream is dropped.
* Lines end in CR LF, a lone CR or a lone LF; a CR closing one chunk and an LF opening the
  next are one line end. No other character (U+2028, U+2029, NEL, FF, VT, ...) ends a line,
  which is why ``str.splitlines`` is never used.
* ``data`` appends to the data buffer, ``event`` sets the type, ``id`` sets the last event
  id unless the value holds NUL, ``retry`` is taken only when it is all ASCII digits;
  other fields are ignored and lines starting with ``:`` are comments.
* A blank line dispatches. With an empty data buffer nothing is dispatched (the event type
  and retry are still reset). The event's ``id`` is the last event id at dispatch time,
  which persists across events (``""`` once the server sent an empty ``id``, ``None`` if it
  never sent one). ``event`` is ``None`` when no or an empty type was given (the spec's
  default "message"). ``retry`` is the value seen in this event's block, if any.

Performance: each chunk is decoded once and split with ``str.split``; only an incomplete
trailing line is carried over, as a list of fragments, so a huge line arriving in many
small pieces costs linear time.
"""

from __future__ import annotations

import codecs

from conformance.judging.wire.exchange import SSEEvent

__all__ = ["SSEParser"]

_BOM = "\ufeff"


class SSEParser:
    """Incremental WHATWG server-sent-events parser.

    ``feed(chunk, at)`` returns the events completed by ``chunk``; ``close()`` ends the
    stream. Counters: ``bytes_seen`` (bytes fed), ``lines_seen`` (complete lines
    processed, blank lines and comments included), ``comments_seen``, ``events_seen``
    (events dispatched). ``invalid_utf8`` is true once any byte sequence was not valid
    UTF-8. ``last_event_id`` is the current last event id.
    """

    __slots__ = (
        "_data",
        "_decoder",
        "_event",
        "_fragments",
        "_retry",
        "_skip_lf",
        "_started",
        "bytes_seen",
        "closed",
        "comments_seen",
        "events_seen",
        "invalid_utf8",
        "last_event_id",
        "lines_seen",
    )

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        # Pieces of the current, not yet terminated line.
        self._fragments: list[str] = []
        # The previous piece ended in CR: an LF opening the next piece belongs to it.
        self._skip_lf = False
        # Some text has been decoded (the BOM check is behind us).
        self._started = False
        # Data buffer, kept as the list of values (joined with LF at dispatch).
        self._data: list[str] = []
        self._event: str | None = None
        self._retry: int | None = None
        self.last_event_id: str | None = None
        self.bytes_seen = 0
        self.lines_seen = 0
        self.comments_seen = 0
        self.events_seen = 0
        self.invalid_utf8 = False
        self.closed = False

    def _decode(self, chunk: bytes, final: bool = False) -> str:
        decoder = self._decoder
        if self.invalid_utf8:
            return decoder.decode(chunk, final)
        try:
            return decoder.decode(chunk, final)
        except UnicodeDecodeError:
            # A failed decode leaves the decoder's pending bytes untouched, so the same
            # input can be decoded again, this time replacing the bad sequences.
            self.invalid_utf8 = True
            decoder.errors = "replace"
            return decoder.decode(chunk, final)

    def feed(self, chunk: bytes, at: float) -> list[SSEEvent]:
        """Parse ``chunk``; return the events it completed, stamped with ``at``."""
        if self.closed:
            raise ValueError("SSEParser.feed() after close()")
        self.bytes_seen += len(chunk)
        text = self._decode(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == _BOM:
                text = text[1:]
                if not text:
                    return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            if text[-1] == "\r":
                self._skip_lf = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")

        lines = text.split("\n")
        tail = lines.pop()
        fragments = self._fragments
        if not lines:
            # No line end in this piece: only remember it (never rescan old pieces).
            fragments.append(tail)
            return []
        if fragments:
            fragments.append(lines[0])
            lines[0] = "".join(fragments)
        self._fragments = [tail] if tail else []
        self.lines_seen += len(lines)

        events: list[SSEEvent] = []
        data = self._data
        event = self._event
        retry = self._retry
        last_id = self.last_event_id
        comments = 0
        for line in lines:
            if line.startswith("data:"):
                # Fast path for the overwhelmingly common field.
                data.append(line[6:] if line.startswith(" ", 5) else line[5:])
            elif not line:
                if data:
                    events.append(SSEEvent("\n".join(data), event or None, last_id, retry, at))
                    data = []
                event = None
                retry = None
            elif line[0] == ":":
                comments += 1
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
                elif name == "id":
                    if "\0" not in value:
                        last_id = value
                elif name == "retry" and value.isdigit() and value.isascii():
                    retry = int(value)
                # Any other field name is ignored.
        self._data = data
        self._event = event
        self._retry = retry
        self.last_event_id = last_id
        self.comments_seen += comments
        self.events_seen += len(events)
        return events

    def close(self) -> str | None:
        """End of stream: describe an unterminated event or line, else return None.

        Per the spec an incomplete last line is discarded and an event without its
        blank line is never dispatched; here both are also reported.
        """
        if self.closed:
            return None
        self.closed = True
        tail = self._decode(b"", final=True)
        if tail:
            self._fragments.append(tail)
        partial = "".join(self._fragments)
        problems: list[str] = []
        if partial:
            problems.append(
                f"body ended inside a line ({len(partial)} characters without a line end: "
                f"{partial[:60]!r}{'...' if len(partial) > 60 else ''})"
            )
        if self._data:
            size = len("\n".join(self._data))
            problems.append(
                f"body ended with an unterminated event ({len(self._data)} data line(s), "
                f"{size} characters, not followed by the blank line that dispatches it)"
            )
        self._fragments = []
        self._data = []
        self._event = None
        self._retry = None
        return "; ".join(problems) if problems else None
