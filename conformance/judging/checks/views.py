"""Validated views of an answer, built once per exchange and cached on it.

Checks never index raw JSON on trust: a target may send any JSON at all, and a check
that meets ``text_offset: [0, null]`` must report it, not raise TypeError. The views
here keep only values of the type a rule reads (anything else stays visible to the
schema requirements, which own type errors).

Two modes, one rule: a non-streamed body and an event stream both yield an
:class:`Answer` (its choices per index, its usage). A rule judged in both modes is written
once as ``rule(ctx, answer)`` and registered under both of its requirement IDs by
:func:`in_both_modes` (the IDs stay stable for reports and baselines).

The stream view reads events the way an OpenAI client does: data events up to the first
``data: [DONE]``, each JSON-decoded, with error events (a truthy ``error`` key, on which
the openai SDK raises) set apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.judging.checks.common import choices_of, completion, is_int, streamed_200
from conformance.judging.requirements import Context, Level, Predicate, Scope, Stated, requirement
from conformance.judging.wire.exchange import Exchange, SSEEvent
from conformance.judging.wire.sse import SSEParser

DONE = "[DONE]"
LOGPROBS_ARRAYS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")

#: Choices with the name a message calls them by (``choices[0]``, ``streamed choices[0]``).
Labelled = list[tuple[str, dict[str, Any]]]


def labelled(body: Any, prefix: str = "choices") -> Labelled:
    """The choice objects of a body, named ``<prefix>[i]`` by position."""
    return [(f"{prefix}[{i}]", c) for i, c in enumerate(choices_of(body))]


def usage_of(body: Any) -> dict[str, Any] | None:
    usage = body.get("usage") if isinstance(body, dict) else None
    return usage if isinstance(usage, dict) else None


# -- the event stream -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Payload:
    """One data event other than ``[DONE]``: its number in the stream and its JSON."""

    event: int
    data: str
    value: Any
    problem: str | None


@dataclass(slots=True)
class StreamView:
    """A stream as an OpenAI client reads it (see the module docstring)."""

    count: int
    done: list[int]
    payloads: list[Payload]
    errors: list[Payload]
    framing: str | None
    chunks: list[tuple[int, dict[str, Any]]] = field(init=False)
    #: Every choice of every chunk: (event number, its name in messages, the choice).
    pieces: list[tuple[int, str, dict[str, Any]]] = field(init=False)

    def __post_init__(self) -> None:
        self.chunks = [(p.event, p.value) for p in self.payloads if isinstance(p.value, dict)]
        self.pieces = [
            (n, f"event[{n}].choices[{k}]", choice)
            for n, chunk in self.chunks
            for k, choice in enumerate(choices_of(chunk))
        ]

    def usage_chunks(self) -> list[tuple[int, dict[str, Any]]]:
        """The chunks that carry a usage value (anything but null or nothing)."""
        return [(n, c) for n, c in self.chunks if c.get("usage") is not None]

    def usage(self) -> dict[str, Any] | None:
        found = [c["usage"] for _, c in self.usage_chunks() if isinstance(c["usage"], dict)]
        return found[-1] if found else None


def _is_payload(line: str) -> bool:
    """A line that is a whole event payload on its own: a JSON object or ``[DONE]``."""
    if line == DONE:
        return True
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _merged_event(events: Iterable[SSEEvent]) -> tuple[int, int] | None:
    """The first event whose data lines are each a whole payload: (its number, lines)."""
    for n, event in enumerate(events):
        lines = event.data.split("\n")
        if len(lines) > 1 and all(_is_payload(line) for line in lines):
            return n, len(lines)
    return None


def _framing_problem(exchange: Exchange) -> str | None:
    """Why the events of a stream cannot be told apart, or None."""
    if exchange.invalid_utf8:
        return "the event stream is not valid UTF-8 (server-sent events are UTF-8 only)"
    merged = _merged_event(exchange.events or [])
    if merged is None and exchange.stream_error:
        # The parser drops an event that never got its blank line; with single newlines
        # that is the whole stream. Re-read the kept body with the blank line added.
        merged = _merged_event(SSEParser().feed(exchange.body + b"\n\n", 0.0))
    if merged is not None:
        n, lines = merged
        return (
            f"events are separated by a single newline, not a blank line: event {n} holds "
            f"{lines} data lines that are each a whole payload, merged into one event"
        )
    if exchange.stream_error:
        return f"the stream does not end with a complete event: {exchange.stream_error}"
    return None


def _build_stream(exchange: Exchange) -> StreamView:
    events = exchange.events or []
    number = {id(ev): n for n, ev in enumerate(events)}
    done = [n for n, ev in enumerate(events) if ev.data == DONE]
    # A client stops reading at the first [DONE]: what follows is STREAM-DONE's alone.
    end = done[0] if done else len(events)
    payloads: list[Payload] = []
    errors: list[Payload] = []
    for ev, value, problem in exchange.event_payloads():
        payload = Payload(number[id(ev)], ev.data, value, problem)
        if payload.event > end:
            continue
        # openai-python raises only on a truthy `error`: `"error": null` is a plain chunk.
        if isinstance(value, dict) and value.get("error"):
            errors.append(payload)
        else:
            payloads.append(payload)
    return StreamView(len(events), done, payloads, errors, _framing_problem(exchange))


def stream_view(exchange: Exchange) -> StreamView:
    """The exchange's stream as a client reads it (built once per exchange)."""
    return exchange.view("stream", _build_stream)


def assemble(stream: StreamView) -> Labelled:
    """Per choice index, the choice a non-streamed body would carry.

    Text joined in order, the last non-null finish_reason (the one an accumulating
    client ends with), logprobs arrays concatenated (None when no chunk carried any).
    """
    merged: dict[int, dict[str, Any]] = {}
    for _, _, piece in stream.pieces:
        index = piece.get("index")
        if not is_int(index):
            continue
        choice = merged.setdefault(
            index, {"index": index, "text": "", "finish_reason": None, "logprobs": None}
        )
        if isinstance(piece.get("text"), str):
            choice["text"] += piece["text"]
        if piece.get("finish_reason") is not None:
            choice["finish_reason"] = piece["finish_reason"]
        if isinstance(piece.get("logprobs"), dict):
            choice["logprobs"] = _concat(choice["logprobs"], piece["logprobs"])
    return [(f"streamed choices[{i}]", merged[i]) for i in sorted(merged)]


def _concat(total: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """Logprobs arrays joined; an array some chunk lacks is left out, as if never sent."""
    out = dict(total) if total is not None else {k: [] for k in LOGPROBS_ARRAYS}
    for key in LOGPROBS_ARRAYS:
        if isinstance(out.get(key), list) and isinstance(more.get(key), list):
            out[key] = out[key] + more[key]
        else:
            out.pop(key, None)
    return out


# -- when a stream can be judged --------------------------------------------------------


def streamed(ctx: Context) -> bool:
    """A streamed 200 read as an event stream to its end (no bound, no transport error)."""
    ex = ctx.exchange
    return streamed_200(ctx) and ex.events is not None and not ex.bound and not ex.transport_error


def framed(ctx: Context) -> bool:
    """A streamed 200 whose events can be told apart."""
    return streamed(ctx) and stream_view(ctx.exchange).framing is None


def uninterrupted(ctx: Context) -> bool:
    """A framed stream with no error event: after one, clients stop reading (they raise),
    so STREAM-ERROR-EVENT reports it and the rules about a whole stream do not apply."""
    return framed(ctx) and not stream_view(ctx.exchange).errors


def readable(ctx: Context) -> bool:
    """An uninterrupted stream whose every payload is a JSON object: nothing was lost."""
    return uninterrupted(ctx) and all(
        isinstance(p.value, dict) for p in stream_view(ctx.exchange).payloads
    )


def expected_choices(ctx: Context) -> int:
    return len(ctx.case.prompts) * ctx.case.n


def stream_indexes(ctx: Context) -> list[Any]:
    return [piece.get("index") for _, _, piece in stream_view(ctx.exchange).pieces]


def by_index(ctx: Context) -> bool:
    """A readable stream whose choice indexes are exactly 0..k-1: it assembles per index."""
    if not readable(ctx):
        return False
    seen = stream_indexes(ctx)
    return all(is_int(i) for i in seen) and set(seen) == set(range(expected_choices(ctx)))


# -- one answer, either mode ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """What a rule judges in either mode: the choices per index and the usage object."""

    stream: bool
    choices: Labelled
    usage: dict[str, Any] | None


def answer_of(exchange: Exchange) -> Answer:
    """An exchange's answer, from its body or assembled from its stream."""
    if exchange.case.stream:
        view = stream_view(exchange)
        return Answer(True, assemble(view), view.usage())
    body = exchange.json
    return Answer(False, labelled(body), usage_of(body))


def answer(ctx: Context) -> Answer:
    return answer_of(ctx.exchange)


def judgeable(ctx: Context) -> bool:
    """A completion body, or a stream that assembles per index."""
    return completion(ctx) or by_index(ctx)


Rule = Callable[[Context, Answer], None]


def in_both_modes(
    body_id: str,
    stream_id: str,
    *,
    level: Level,
    statement: str,
    source: str,
    evidence: str,
    when: Predicate,
    scope: Scope | None = None,
    stated: Stated | None = None,
    otherwise: str = "",
    needs: tuple[str, ...] = (),
) -> Callable[[Rule], Rule]:
    """Register ``rule`` under ``body_id`` for bodies and ``stream_id`` for streams.

    ``when`` says, from the request, whether the rule applies; the mode adds its own
    gate (a completion body; a stream that assembles per index).
    """

    def register(rule: Rule) -> Rule:
        modes = ((body_id, "semantics", completion), (stream_id, "streaming", by_index))
        for rid, area, gate in modes:

            def check(ctx: Context, _rule: Rule = rule) -> None:
                _rule(ctx, answer(ctx))

            def applies(ctx: Context, _gate: Predicate = gate) -> bool:
                return _gate(ctx) and when(ctx)

            check.__module__ = rule.__module__
            check.__qualname__ = f"{rule.__qualname__}[{rid}]"
            worded = (
                statement if rid == body_id else f"Streamed: {statement[0].lower()}{statement[1:]}"
            )
            requirement(
                rid,
                level=level,
                area=area,
                statement=worded,
                source=source,
                evidence=evidence,
                applies=applies,
                scope=scope,
                stated=stated,
                otherwise=otherwise,
                needs=needs,
            )(check)
        return rule

    return register
