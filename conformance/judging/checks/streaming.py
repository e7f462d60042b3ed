"""Event-stream requirements: the answer to a ``stream: true`` request, judged as a whole.

The client parses the stream as it arrives (``Exchange.events``, each stamped with its
arrival time); ``views.stream_view`` reads those events the way an OpenAI client does,
once per exchange. The rules a stream shares with a body (max_tokens, finish "length",
stop sequences, echo) are written once in semantics.py and registered under their
STREAM-* IDs there; the rules here concern what only a stream has, and stream_text.py
judges the text a client assembles against the non-streamed twin.

The checks apply in layers so that one defect is reported once, by the requirement that
names it: a stream cut short by a bound or a transport error is HTTP-COMPLETE's; a stream
whose events cannot be told apart is STREAM-FRAMING's alone; a payload that is not a JSON
object (a client fails on it) is STREAM-CHUNK-SCHEMA's, and what it carried is lost, so
nothing is assembled; a stream whose choice indexes are wrong cannot be assembled per
index, so only STREAM-INDEXES judges it.
"""

from __future__ import annotations

from typing import Any

from conformance.judging.checks.common import (
    check_created,
    check_id,
    check_object,
    choices_of,
    declares,
    error_path,
    is_int,
    says,
    schema_owns,
    streamed_200,
)
from conformance.judging.checks.logprobs_rules import check_presence, requested_logprobs
from conformance.judging.checks.response import Owned, finish_outside_enum, schema_problem
from conformance.judging.checks.semantics import (
    check_finish_enum,
    declared_finish_reasons,
    finish_reasons,
    misplaced,
)
from conformance.judging.checks.tokens import check_usage_total, include_usage
from conformance.judging.checks.views import (
    assemble,
    by_index,
    expected_choices,
    framed,
    readable,
    stream_indexes,
    stream_view,
    streamed,
    uninterrupted,
)
from conformance.judging.requirements import Context, Level, Violation, requirement

MUST, SHOULD = Level.MUST, Level.SHOULD
#: The tag of the streamed half of the stream-versus-non-stream probe.
TWIN_TAG = "probe:stream-twin"
STREAM_TEXT = "spec text: CreateCompletionRequest.stream"
USAGE_TEXT = "spec text: CreateCompletionRequest.stream_options.include_usage"
CLIENTS = "OpenAI clients' stream readers"
STREAM_SCOPE = declares("stream")
USAGE_SCOPE = declares("stream_options")
# Fields every chunk of one completion repeats unchanged. `created` is not among them:
# llama.cpp stamps each chunk with its own clock, and no client compares it.
IDENTITY = ("id", "object", "model")


def has_events(ctx: Context) -> bool:
    """The stream sent at least one event. A stream cut off before its first event is one
    defect, STREAM-DONE's: its choices and its usage chunk are not missing on top of it."""
    return stream_view(ctx.exchange).count > 0


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
    evidence="spec-schema",
    scope=STREAM_SCOPE,
    applies=streamed_200,
)
def stream_content_type(ctx: Context) -> None:
    want = (ctx.spec.stream_media_type or "text/event-stream").split(";", 1)[0].strip().lower()
    if ctx.exchange.media_type != want:
        got = ctx.exchange.content_type or "no Content-Type"
        raise Violation(
            f"Content-Type is {got!r} for stream: true, expected {want}", expected=want, actual=got
        )


@requirement(
    "STREAM-FRAMING",
    level=MUST,
    area="streaming",
    statement="Events are separated by blank lines, and the last event is complete.",
    source="WHATWG HTML server-sent events (a blank line dispatches an event); " + CLIENTS,
    evidence="client-visible",
    scope=STREAM_SCOPE,
    applies=streamed,
)
def stream_framing(ctx: Context) -> None:
    problem = stream_view(ctx.exchange).framing
    if problem:
        raise Violation(problem)


@requirement(
    "STREAM-DATA-ONLY",
    level=SHOULD,
    area="streaming",
    statement="The stream is data-only: no event carries an `event:` type (the default "
    '"message" aside; `id:`, `retry:` and comment lines change nothing for clients).',
    source=STREAM_TEXT + " (data-only server-sent events); openai-python hands a typed "
    "event it special-cases (`thread.*`) to users as {data, event} instead of the chunk",
    # Stated in the spec's text, but today's clients read most typed events as data:
    # a rule stated loosely, hence SHOULD.
    evidence="spec-text",
    stated=says("stream", r"data-only"),
    otherwise="openai-contract",
    scope=STREAM_SCOPE,
    applies=framed,
)
def stream_data_only(ctx: Context) -> None:
    for n, event in enumerate(ctx.exchange.events or []):
        if event.event is not None and event.event != "message":
            raise Violation(
                f"event {n} has the type {event.event!r}: the stream is to be data-only "
                "server-sent events",
                path=f"event[{n}]",
                actual=event.event,
            )


def _owned_in_chunk(ctx: Context) -> Owned:
    """Errors of a chunk that a more specific requirement reports: a finish_reason outside
    the declared enum is STREAM-FINISH-ENUM's, a wrong or missing `object`
    STREAM-CONSISTENT-IDS's (as RESP-OBJECT's in a body)."""
    has_enum = bool(_stream_finish_reasons(ctx))

    def owned(error: Any) -> bool:
        return error_path(error) == ["object"] or (has_enum and finish_outside_enum(error))

    return owned


@requirement(
    "STREAM-CHUNK-SCHEMA",
    level=MUST,
    area="streaming",
    statement="Every data payload but `[DONE]` is strict JSON and validates against the "
    "spec's chunk schema (errata applied).",
    source="spec: responses.200 event-stream schema (errata nscale-event-stream-array, "
    "aihubmix-stream-media-type, stream-chunk-nulls); RFC 8259",
    evidence="spec-schema",
    scope=STREAM_SCOPE,
    applies=framed,
)
def stream_chunk_schema(ctx: Context) -> None:
    for payload in stream_view(ctx.exchange).payloads:
        where = f"event[{payload.event}]"
        if payload.problem:
            raise Violation(
                f"event {payload.event}: {payload.problem}: {_excerpt(payload.data)}", path=where
            )
        problem = schema_problem(ctx.spec, "chunk", payload.value, _owned_in_chunk(ctx))
        if problem:
            raise Violation(f"event {payload.event}: {problem}", path=where)


@requirement(
    "STREAM-DONE",
    level=MUST,
    area="streaming",
    statement="`data: [DONE]` arrives exactly once, as the last event.",
    source=STREAM_TEXT + " (terminated by a `data: [DONE]` message); erratum done-sentinel; "
    "OpenAI clients stop reading at it",
    evidence="spec-text",
    stated=says("stream", r"data: \[DONE\]"),
    otherwise="client-visible",
    scope=STREAM_SCOPE,
    applies=uninterrupted,
)
def stream_done(ctx: Context) -> None:
    stream = stream_view(ctx.exchange)
    if not stream.done:
        raise Violation(f"the stream ended without data: [DONE] ({stream.count} events)")
    if len(stream.done) > 1:
        raise Violation(
            f"data: [DONE] arrived {len(stream.done)} times (events {stream.done})",
            path=f"event[{stream.done[1]}]",
        )
    after = stream.count - 1 - stream.done[0]
    if after:
        events = ctx.exchange.events or []
        raise Violation(
            f"{after} event(s) follow data: [DONE], e.g. {_excerpt(events[stream.done[0] + 1].data)}",
            path=f"event[{stream.done[0] + 1}]",
        )


@requirement(
    "STREAM-ERROR-EVENT",
    level=MUST,
    area="streaming",
    statement="No event of a streamed 200 is an error (an object with a non-empty `error`).",
    source="openai-python raises APIError on any event whose `error` is truthy",
    evidence="client-visible",
    scope=STREAM_SCOPE,
    applies=framed,
)
def stream_error_event(ctx: Context) -> None:
    for payload in stream_view(ctx.exchange).errors:
        error = payload.value["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise Violation(
            f"event {payload.event} is an error event (OpenAI clients raise on it): "
            f"{_excerpt(str(message), 200)}",
            path=f"event[{payload.event}].error",
        )


@requirement(
    "STREAM-CONSISTENT-IDS",
    level=MUST,
    area="streaming",
    statement="Every chunk repeats the completion's `id`, `object` and `model`; "
    '`object` is "text_completion", `created` a plausible Unix time, `id` non-empty '
    "(`created` may differ between chunks).",
    source="spec: CreateCompletionResponse.id (A unique identifier for the completion), "
    "object enum, created (Unix timestamp in seconds)",
    evidence="spec-text",
    stated=says("id", r"unique identifier"),
    otherwise="openai-contract",
    scope=STREAM_SCOPE,
    applies=lambda ctx: framed(ctx) and bool(stream_view(ctx.exchange).chunks),
)
def stream_consistent_ids(ctx: Context) -> None:
    chunks = stream_view(ctx.exchange).chunks

    def owned(chunk: dict[str, Any], key: str) -> bool:
        # A missing or mistyped id or created the chunk schema rejects is
        # STREAM-CHUNK-SCHEMA's finding, not a second one here (`object` is ours: the
        # schema check leaves it out).
        return key != "object" and schema_owns(ctx, "chunk", chunk, key)

    first_event, first = chunks[0]
    for key in IDENTITY:
        if owned(first, key):
            continue
        for n, chunk in chunks[1:]:
            if owned(chunk, key):
                continue
            if chunk.get(key) != first.get(key):
                raise Violation(
                    f"{key} changes within the stream: {first.get(key)!r} at event "
                    f"{first_event}, {chunk.get(key)!r} at event {n}",
                    path=f"event[{n}].{key}",
                    expected=first.get(key),
                    actual=chunk.get(key),
                )
    check_object(first, f"event[{first_event}].")
    if not owned(first, "id"):
        check_id(first, f"event[{first_event}].")
    for n, chunk in chunks:
        if not owned(chunk, "created"):
            check_created(chunk, ctx.now, f"event[{n}].")


@requirement(
    "STREAM-INDEXES",
    level=MUST,
    area="streaming",
    statement="The streamed choice indexes cover exactly 0..prompts × n - 1, and each choice "
    "streams at the index of its prompt (index // n; shown by echo).",
    source="spec text: CreateCompletionRequest.n; OpenAI clients assemble streamed choices "
    "by index",
    evidence="spec-text",
    stated=says("n", r"for each prompt"),
    otherwise="client-visible",
    scope=STREAM_SCOPE,
    applies=lambda ctx: readable(ctx) and has_events(ctx),
)
def stream_indexes_cover(ctx: Context) -> None:
    seen = stream_indexes(ctx)
    odd = [i for i in seen if not is_int(i)]
    if odd:
        raise Violation(f"a streamed choice index is {odd[0]!r}, not an integer", actual=odd[0])
    want = expected_choices(ctx)
    got = sorted(set(seen))
    if got != list(range(want)):
        raise Violation(
            f"streamed choice indexes are {got}, expected each of 0..{want - 1} for "
            f"{len(ctx.case.prompts)} prompt(s) × n={ctx.case.n}",
            expected=list(range(want)),
            actual=got,
        )
    problem = misplaced(ctx, assemble(stream_view(ctx.exchange)))
    if problem is not None:
        raise problem


@requirement(
    "STREAM-FINISH",
    level=MUST,
    area="streaming",
    statement="Each choice index receives exactly one non-null finish_reason, and no text "
    "after it.",
    source="spec: choices[].finish_reason (The reason the model stopped generating tokens); "
    "erratum stream-chunk-nulls (null until the end); OpenAI clients read a streamed choice "
    "until its finish_reason",
    evidence="spec-text",
    # Nscale's document neither describes finish_reason nor pins its values: there the
    # rule rests on what clients do with a stream, still a MUST.
    stated=says("finish_reason", r"reason the model stopped"),
    otherwise="client-visible",
    scope=STREAM_SCOPE,
    applies=by_index,
)
def stream_finish(ctx: Context) -> None:
    finishes: dict[int, list[tuple[int, Any]]] = {}
    for n, name, piece in stream_view(ctx.exchange).pieces:
        index, text = piece["index"], piece.get("text")
        if index in finishes and isinstance(text, str) and text:
            at, reason = finishes[index][0]
            raise Violation(
                f"index {index} receives text {_excerpt(text, 40)} at event {n}, after its "
                f"finish_reason {reason!r} at event {at}",
                path=f"{name}.text",
            )
        if piece.get("finish_reason") is not None:
            finishes.setdefault(index, []).append((n, piece["finish_reason"]))
    for index in range(expected_choices(ctx)):
        got = finishes.get(index, [])
        if not got:
            raise Violation(f"index {index} never receives a finish_reason")
        if len(got) > 1:
            listed = ", ".join(f"{reason!r} at event {n}" for n, reason in got)
            raise Violation(
                f"index {index} receives {len(got)} finish_reasons: {listed}",
                path=f"event[{got[1][0]}].choices[].finish_reason",
            )


@requirement(
    "STREAM-FINISH-ENUM",
    level=MUST,
    area="streaming",
    statement="Every non-null streamed finish_reason is one of the values the spec's enum allows.",
    source="spec: choices[].finish_reason enum",
    evidence="spec-schema",
    scope=lambda spec: (
        STREAM_SCOPE(spec)
        or (None if finish_reasons(spec) else "the spec declares no finish_reason enum")
    ),
    applies=lambda ctx: framed(ctx) and bool(_stream_finish_reasons(ctx)),
)
def stream_finish_enum(ctx: Context) -> None:
    pieces = stream_view(ctx.exchange).pieces
    check_finish_enum(_stream_finish_reasons(ctx), [(name, c) for _, name, c in pieces])


@requirement(
    "STREAM-USAGE",
    level=MUST,
    area="streaming",
    statement="With include_usage, exactly one chunk carries usage: after every content "
    "chunk, before `[DONE]`, with `choices: []` and total = prompt + completion tokens.",
    source=USAGE_TEXT + " (an additional chunk before `data: [DONE]`; all other chunks "
    "carry a null usage)",
    evidence="spec-text",
    stated=says("include_usage", r"additional chunk"),
    otherwise="openai-contract",
    scope=USAGE_SCOPE,
    applies=lambda ctx: readable(ctx) and has_events(ctx) and include_usage(ctx),
)
def stream_usage(ctx: Context) -> None:
    stream = stream_view(ctx.exchange)
    carrying = stream.usage_chunks()
    if not carrying:
        raise Violation("include_usage requested but no chunk before data: [DONE] carries usage")
    if len(carrying) > 1:
        events = [n for n, _ in carrying]
        raise Violation(
            f"{len(carrying)} chunks carry a usage object (events {events}); only the usage "
            "chunk may, the others carry null or nothing",
            path=f"event[{events[0]}].usage",
        )
    n, chunk = carrying[0]
    if chunk.get("choices") != []:
        raise Violation(
            f"the usage chunk (event {n}) has choices {chunk.get('choices')!r}, not []",
            path=f"event[{n}].choices",
            expected=[],
            actual=chunk.get("choices"),
        )
    content = [m for m, c in stream.chunks if choices_of(c)]
    if content and n < content[-1]:
        raise Violation(
            f"the usage chunk (event {n}) comes before the content chunk at event "
            f"{content[-1]}; it must follow every content chunk",
            path=f"event[{n}]",
        )
    usage = chunk["usage"]
    if not isinstance(usage, dict):
        raise Violation(
            f"the usage chunk's usage is {usage!r}, not an object", path=f"event[{n}].usage"
        )
    check_usage_total(usage, f"event[{n}].usage")


@requirement(
    "STREAM-USAGE-UNREQUESTED",
    level=SHOULD,
    area="streaming",
    statement="Without include_usage, no chunk carries usage.",
    source=USAGE_TEXT + " (If set, an additional chunk ...)",
    evidence="spec-text",
    stated=says("include_usage", r"additional chunk"),
    otherwise="openai-contract",
    scope=STREAM_SCOPE,
    # Judged on the chunk objects even when another payload is not one (that payload is
    # STREAM-CHUNK-SCHEMA's): the usage the real chunks carry is seen all the same.
    applies=lambda ctx: uninterrupted(ctx) and not include_usage(ctx),
)
def stream_usage_unrequested(ctx: Context) -> None:
    carrying = stream_view(ctx.exchange).usage_chunks()
    if carrying:
        n, chunk = carrying[0]
        raise Violation(
            f"include_usage not requested but {len(carrying)} chunk(s) carry usage, first at "
            f"event {n}: {chunk['usage']!r}",
            path=f"event[{n}].usage",
        )


@requirement(
    "STREAM-LOGPROBS-PRESENCE",
    level=MUST,
    area="streaming",
    statement="With logprobs (0 too) every chunk with text carries logprobs, without it none "
    "does (unless the document declares a default for it, which a server may apply).",
    source="spec text: CreateCompletionRequest.logprobs (the API will always return the "
    "logprob of the sampled token); lm-evaluation-harness reads logprobs.token_logprobs",
    evidence="spec-text",
    stated=says("logprobs", r"always return the `?logprob`? of the sampled token"),
    otherwise="client-visible",
    scope=declares("logprobs"),
    applies=by_index,
)
def stream_logprobs_presence(ctx: Context) -> None:
    wanted = requested_logprobs(ctx.case.body)
    # A chunk with only a finish_reason has no tokens, so it need not carry logprobs.
    pieces = stream_view(ctx.exchange).pieces
    check_presence(ctx, [(name, c) for _, name, c in pieces if wanted is None or c.get("text")])
