"""Event-stream requirements: the answer to a ``stream: true`` request, judged as a whole.

The client parses the stream as it arrives (``Exchange.events``, each stamped with its
arrival time). A :class:`StreamView` reads those events the way an OpenAI client does:
data events up to the first ``data: [DONE]``, each JSON-decoded, with error events (an
``error`` key, on which the client raises) set apart. ``assemble`` joins the choices of
every chunk per index into the choice a non-streamed body would carry, so the
request-aware rules of ``semantics.py`` judge streams too, under STREAM-* IDs.

The checks apply in layers so that one defect is reported once, by the requirement that
names it: a stream cut short by a bound or a transport error is HTTP-COMPLETE's; a stream
whose events cannot be told apart is STREAM-FRAMING's alone; a payload that is not a JSON
object (a client fails on it) is STREAM-CHUNK-SCHEMA's, and what it carried is lost, so
nothing is assembled; a stream whose choice indexes are wrong cannot be assembled per
index, so only STREAM-INDEXES judges it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.checks.common import (
    check_created,
    check_id,
    check_object,
    choices_of,
    is_int,
    streamed_200,
)
from conformance.checks.semantics import (
    Labelled,
    check_echo_prefix,
    check_finish_enum,
    check_finish_length,
    check_logprobs_presence,
    check_logprobs_shape,
    check_logprobs_top_count,
    check_logprobs_values,
    check_max_tokens,
    check_stop_absent,
    check_usage_total,
    declared_finish_reasons,
    expected_choices,
    requested_logprobs,
    stops,
    token_bound,
)
from conformance.exchange import Exchange, SSEEvent
from conformance.requirements import Context, Level, Violation, requirement
from conformance.sse import SSEParser

MUST, SHOULD = Level.MUST, Level.SHOULD
DONE = "[DONE]"
#: The tag of the streamed half of the stream-versus-non-stream probe.
TWIN_TAG = "probe:stream-twin"
STREAM_TEXT = "spec text: CreateCompletionRequest.stream"
USAGE_TEXT = "spec text: CreateCompletionRequest.stream_options.include_usage"
CLIENTS = "OpenAI clients' stream readers"
# Fields every chunk of one stream repeats unchanged.
IDENTITY = ("id", "object", "created", "model")
LOGPROBS_ARRAYS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


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
            (n, f"event {n} choices[{k}]", choice)
            for n, chunk in self.chunks
            for k, choice in enumerate(choices_of(chunk))
        ]

    def usage_chunks(self) -> list[tuple[int, dict[str, Any]]]:
        """The chunks that carry a usage value (anything but null or nothing)."""
        return [(n, c) for n, c in self.chunks if c.get("usage") is not None]


def _is_payload(line: str) -> bool:
    """A line that is a whole event payload on its own: a JSON object or ``[DONE]``."""
    if line == DONE:
        return True
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
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


def _build(exchange: Exchange) -> StreamView:
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
        if isinstance(value, dict) and "error" in value:
            errors.append(payload)
        else:
            payloads.append(payload)
    return StreamView(len(events), done, payloads, errors, _framing_problem(exchange))


_last: tuple[Exchange, StreamView] | None = None


def view(exchange: Exchange) -> StreamView:
    """The exchange's stream as a client reads it."""
    global _last
    # Every stream requirement asks for the same view in turn: build it once per exchange.
    last = _last
    if last is not None and last[0] is exchange:
        return last[1]
    built = _build(exchange)
    _last = (exchange, built)
    return built


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


def include_usage(ctx: Context) -> bool:
    """The request asked for the usage chunk."""
    options = ctx.case.body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def streamed(ctx: Context) -> bool:
    """A streamed 200 read as an event stream to its end (no bound, no transport error)."""
    ex = ctx.exchange
    return streamed_200(ctx) and ex.events is not None and not ex.bound and not ex.transport_error


def framed(ctx: Context) -> bool:
    """A streamed 200 whose events can be told apart."""
    return streamed(ctx) and view(ctx.exchange).framing is None


def uninterrupted(ctx: Context) -> bool:
    """A framed stream with no error event: after one, clients stop reading (they raise),
    so STREAM-ERROR-EVENT reports it and the rules about a whole stream do not apply."""
    return framed(ctx) and not view(ctx.exchange).errors


def readable(ctx: Context) -> bool:
    """An uninterrupted stream whose every payload is a JSON object: nothing was lost."""
    return uninterrupted(ctx) and all(
        isinstance(p.value, dict) for p in view(ctx.exchange).payloads
    )


def _indexes(ctx: Context) -> list[Any]:
    return [piece.get("index") for _, _, piece in view(ctx.exchange).pieces]


def by_index(ctx: Context) -> bool:
    """A readable stream whose choice indexes are exactly 0..k-1: it assembles per index."""
    if not readable(ctx):
        return False
    seen = _indexes(ctx)
    return all(is_int(i) for i in seen) and set(seen) == set(range(expected_choices(ctx)))


def _stream_finish_reasons(ctx: Context) -> tuple[str, ...]:
    # Under --strict-spec AIHubMix declares no stream schema: its chunks share the body's.
    return declared_finish_reasons(ctx.spec.stream_chunk_schema or ctx.spec.response_schema)


def _excerpt(text: str, size: int = 80) -> str:
    return repr(text[:size]) + ("..." if len(text) > size else "")


@requirement(
    "STREAM-CONTENT-TYPE",
    level=MUST,
    area="streaming",
    statement="A streamed 200 is served as `text/event-stream`.",
    source="spec: responses.200 text/event-stream (erratum aihubmix-stream-media-type); "
    + STREAM_TEXT,
    applies=streamed_200,
)
def stream_content_type(ctx: Context) -> None:
    want = (ctx.spec.stream_media_type or "text/event-stream").split(";", 1)[0].strip().lower()
    if ctx.exchange.media_type != want:
        got = ctx.exchange.content_type or "no Content-Type"
        raise Violation(f"Content-Type is {got!r} for stream: true, expected {want}")


@requirement(
    "STREAM-FRAMING",
    level=MUST,
    area="streaming",
    statement="Events are separated by blank lines, and the last event is complete.",
    source="WHATWG HTML server-sent events (a blank line dispatches an event); " + CLIENTS,
    applies=streamed,
)
def stream_framing(ctx: Context) -> None:
    problem = view(ctx.exchange).framing
    if problem:
        raise Violation(problem)


@requirement(
    "STREAM-CHUNK-SCHEMA",
    level=MUST,
    area="streaming",
    statement="Every data payload but `[DONE]` is JSON and validates against the spec's "
    "chunk schema (errata applied).",
    source="spec: responses.200 event-stream schema (errata nscale-event-stream-array, "
    "aihubmix-stream-media-type, stream-chunk-nulls)",
    applies=framed,
)
def stream_chunk_schema(ctx: Context) -> None:
    for payload in view(ctx.exchange).payloads:
        if payload.problem:
            raise Violation(f"event {payload.event}: {payload.problem}: {_excerpt(payload.data)}")
        problem = ctx.spec.validate("chunk", payload.value)
        if problem:
            raise Violation(f"event {payload.event}: {problem}")


@requirement(
    "STREAM-DONE",
    level=MUST,
    area="streaming",
    statement="`data: [DONE]` arrives exactly once, as the last event.",
    source=STREAM_TEXT + " (terminated by a `data: [DONE]` message); erratum done-sentinel",
    applies=uninterrupted,
)
def stream_done(ctx: Context) -> None:
    stream = view(ctx.exchange)
    if not stream.done:
        raise Violation(f"the stream ended without data: [DONE] ({stream.count} events)")
    if len(stream.done) > 1:
        raise Violation(f"data: [DONE] arrived {len(stream.done)} times (events {stream.done})")
    after = stream.count - 1 - stream.done[0]
    if after:
        events = ctx.exchange.events or []
        raise Violation(
            f"{after} event(s) follow data: [DONE], e.g. {_excerpt(events[stream.done[0] + 1].data)}"
        )


@requirement(
    "STREAM-ERROR-EVENT",
    level=MUST,
    area="streaming",
    statement="No event of a streamed 200 is an error (an object with an `error` key).",
    source="openai-python raises APIError on any event with an `error` key",
    applies=framed,
)
def stream_error_event(ctx: Context) -> None:
    for payload in view(ctx.exchange).errors:
        error = payload.value["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise Violation(
            f"event {payload.event} is an error event (OpenAI clients raise on it): "
            f"{_excerpt(str(message), 200)}"
        )


@requirement(
    "STREAM-CONSISTENT-IDS",
    level=MUST,
    area="streaming",
    statement="Every chunk repeats the same `id`, `object`, `created` and `model`; "
    '`object` is "text_completion", `created` a plausible Unix time, `id` non-empty.',
    source="OpenAI behaviour: chunks of one completion share its identity; spec: object "
    "enum, created (unixtime), required id",
    applies=lambda ctx: framed(ctx) and bool(view(ctx.exchange).chunks),
)
def stream_consistent_ids(ctx: Context) -> None:
    chunks = view(ctx.exchange).chunks
    first_event, first = chunks[0]
    for key in IDENTITY:
        for n, chunk in chunks[1:]:
            if chunk.get(key) != first.get(key):
                raise Violation(
                    f"{key} changes within the stream: {first.get(key)!r} at event "
                    f"{first_event}, {chunk.get(key)!r} at event {n}"
                )
    check_object(first)
    check_created(first)
    check_id(first)


@requirement(
    "STREAM-INDEXES",
    level=MUST,
    area="streaming",
    statement="The streamed choice indexes cover exactly 0..prompts × n - 1.",
    source="spec text: CreateCompletionRequest.n; OpenAI clients assemble streamed choices "
    "by index",
    applies=readable,
)
def stream_indexes(ctx: Context) -> None:
    seen = _indexes(ctx)
    odd = [i for i in seen if not is_int(i)]
    if odd:
        raise Violation(f"a streamed choice index is {odd[0]!r}, not an integer")
    want = expected_choices(ctx)
    got = sorted(set(seen))
    if got != list(range(want)):
        raise Violation(
            f"streamed choice indexes are {got}, expected each of 0..{want - 1} for "
            f"{len(ctx.case.prompts)} prompt(s) × n={ctx.case.n}"
        )


@requirement(
    "STREAM-FINISH",
    level=MUST,
    area="streaming",
    statement="Each choice index receives exactly one non-null finish_reason, and no text "
    "after it.",
    source="spec: choices[].finish_reason; erratum stream-chunk-nulls (null until the end)",
    applies=by_index,
)
def stream_finish(ctx: Context) -> None:
    finishes: dict[int, list[tuple[int, Any]]] = {}
    for n, _, piece in view(ctx.exchange).pieces:
        index, text = piece["index"], piece.get("text")
        if index in finishes and isinstance(text, str) and text:
            at, reason = finishes[index][0]
            raise Violation(
                f"index {index} receives text {_excerpt(text, 40)} at event {n}, after its "
                f"finish_reason {reason!r} at event {at}"
            )
        if piece.get("finish_reason") is not None:
            finishes.setdefault(index, []).append((n, piece["finish_reason"]))
    for index in range(expected_choices(ctx)):
        got = finishes.get(index, [])
        if not got:
            raise Violation(f"index {index} never receives a finish_reason")
        if len(got) > 1:
            listed = ", ".join(f"{reason!r} at event {n}" for n, reason in got)
            raise Violation(f"index {index} receives {len(got)} finish_reasons: {listed}")


@requirement(
    "STREAM-FINISH-ENUM",
    level=MUST,
    area="streaming",
    statement="Every non-null streamed finish_reason is one of the values the spec's enum allows.",
    source="spec: choices[].finish_reason enum",
    applies=lambda ctx: framed(ctx) and bool(_stream_finish_reasons(ctx)),
)
def stream_finish_enum(ctx: Context) -> None:
    pieces = view(ctx.exchange).pieces
    check_finish_enum(_stream_finish_reasons(ctx), [(name, c) for _, name, c in pieces])


@requirement(
    "STREAM-USAGE",
    level=MUST,
    area="streaming",
    statement="With include_usage, exactly one chunk carries usage: after every content "
    "chunk, before `[DONE]`, with `choices: []` and total = prompt + completion tokens.",
    source=USAGE_TEXT + " (an additional chunk before `data: [DONE]`; all other chunks "
    "carry a null usage)",
    applies=lambda ctx: readable(ctx) and include_usage(ctx),
)
def stream_usage(ctx: Context) -> None:
    stream = view(ctx.exchange)
    carrying = stream.usage_chunks()
    if not carrying:
        raise Violation("include_usage requested but no chunk before data: [DONE] carries usage")
    if len(carrying) > 1:
        events = [n for n, _ in carrying]
        raise Violation(
            f"{len(carrying)} chunks carry a usage object (events {events}); only the usage "
            "chunk may, the others carry null or nothing"
        )
    n, chunk = carrying[0]
    if chunk.get("choices") != []:
        raise Violation(f"the usage chunk (event {n}) has choices {chunk.get('choices')!r}, not []")
    content = [m for m, c in stream.chunks if choices_of(c)]
    if content and n < content[-1]:
        raise Violation(
            f"the usage chunk (event {n}) comes before the content chunk at event "
            f"{content[-1]}; it must follow every content chunk"
        )
    usage = chunk["usage"]
    if not isinstance(usage, dict):
        raise Violation(f"the usage chunk's usage is {usage!r}, not an object")
    check_usage_total(usage)


@requirement(
    "STREAM-USAGE-UNREQUESTED",
    level=SHOULD,
    area="streaming",
    statement="Without include_usage, no chunk carries usage.",
    source=USAGE_TEXT + " (If set, an additional chunk ...)",
    applies=lambda ctx: readable(ctx) and not include_usage(ctx),
)
def stream_usage_unrequested(ctx: Context) -> None:
    carrying = view(ctx.exchange).usage_chunks()
    if carrying:
        n, chunk = carrying[0]
        raise Violation(
            f"include_usage not requested but {len(carrying)} chunk(s) carry usage, first at "
            f"event {n}: {chunk['usage']!r}"
        )


def _usage_of(stream: StreamView) -> dict[str, Any] | None:
    found = [c["usage"] for _, c in stream.usage_chunks() if isinstance(c["usage"], dict)]
    return found[-1] if found else None


@requirement(
    "STREAM-MAX-TOKENS",
    level=MUST,
    area="streaming",
    statement="A stream generates no more than max_tokens tokens per choice (by its usage "
    "chunk, and per choice where logprobs show it).",
    source="spec text: CreateCompletionRequest.max_tokens",
    applies=lambda ctx: by_index(ctx) and token_bound(ctx) is not None,
)
def stream_max_tokens(ctx: Context) -> None:
    stream = view(ctx.exchange)
    check_max_tokens(ctx, _usage_of(stream), assemble(stream))


@requirement(
    "STREAM-FINISH-LENGTH",
    level=MUST,
    area="streaming",
    statement='A streamed choice that generated max_tokens tokens finishes with "length".',
    source="spec: finish_reason (`length` if the maximum number of tokens was reached)",
    applies=lambda ctx: by_index(ctx) and is_int(ctx.case.body.get("max_tokens")),
)
def stream_finish_length(ctx: Context) -> None:
    # A choice that never finished is STREAM-FINISH's, not a wrong finish_reason.
    finished = [(n, c) for n, c in assemble(view(ctx.exchange)) if c["finish_reason"] is not None]
    check_finish_length(ctx, finished)


@requirement(
    "STREAM-STOP-ABSENT",
    level=MUST,
    area="streaming",
    statement="No stop sequence appears in the text a stream assembles to.",
    source="spec: StopConfiguration (The returned text will not contain the stop sequence)",
    applies=lambda ctx: by_index(ctx) and bool(stops(ctx)),
)
def stream_stop_absent(ctx: Context) -> None:
    check_stop_absent(ctx, assemble(view(ctx.exchange)))


@requirement(
    "STREAM-ECHO-PREFIX",
    level=MUST,
    area="streaming",
    statement="With echo, each streamed choice's text starts with its prompt.",
    source="spec text: CreateCompletionRequest.echo",
    applies=lambda ctx: (
        by_index(ctx)
        and ctx.case.body.get("echo") is True
        and all(isinstance(p, str) for p in ctx.case.prompts)
    ),
)
def stream_echo_prefix(ctx: Context) -> None:
    check_echo_prefix(ctx, assemble(view(ctx.exchange)))


@requirement(
    "STREAM-LOGPROBS",
    level=MUST,
    area="streaming",
    statement="With logprobs >= 1 every chunk with text carries logprobs, without it none "
    "does; assembled, the arrays are parallel, every logprob <= 0 and each top_logprobs "
    "entry holds at most logprobs + 1 tokens.",
    source="spec text: CreateCompletionRequest.logprobs; OpenAI behaviour (parallel arrays)",
    applies=lambda ctx: by_index(ctx) and requested_logprobs(ctx.case.body) != 0,
)
def stream_logprobs(ctx: Context) -> None:
    stream = view(ctx.exchange)
    wanted = requested_logprobs(ctx.case.body)
    # A chunk with only a finish_reason has no tokens, so it need not carry logprobs.
    carriers = [(name, c) for _, name, c in stream.pieces if wanted is None or c.get("text")]
    check_logprobs_presence(ctx, carriers)
    choices = assemble(stream)
    check_logprobs_shape(choices)
    check_logprobs_values(ctx, choices)
    if wanted is not None:
        check_logprobs_top_count(ctx, choices)


def _twin(ctx: Context) -> dict[str, Any] | None:
    """The non-streamed answer to the same request, when the probe sent one."""
    if TWIN_TAG not in ctx.case.tags or not ctx.related:
        return None
    twin = ctx.related[0]
    ok = twin.status == 200 and not twin.case.stream and isinstance(twin.json, dict)
    return twin.json if ok else None


@requirement(
    "STREAM-MATCHES-NONSTREAM",
    level=SHOULD,
    area="streaming",
    statement="At temperature 0 with a fixed seed, each streamed choice's text equals the "
    "non-streamed text of the same request.",
    source=STREAM_TEXT + " (partial progress of the same completion); determinism is best "
    "effort (seed), hence SHOULD",
    applies=lambda ctx: by_index(ctx) and _twin(ctx) is not None,
)
def stream_matches_nonstream(ctx: Context) -> None:
    twin = {c.get("index"): c.get("text") for c in choices_of(_twin(ctx) or {})}
    for name, choice in assemble(view(ctx.exchange)):
        want = twin.get(choice["index"])
        if isinstance(want, str) and choice["text"] != want:
            raise Violation(
                f"{name}.text {_excerpt(choice['text'], 60)} differs from the non-streamed "
                f"text {_excerpt(want, 60)}"
            )
