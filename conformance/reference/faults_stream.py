"""Faults of event streams: the payload list, the usage chunk, text that assembles wrong.

Each transformer takes and returns a stream's payload list (``stream`` stage: chunk dicts,
raw strings, ``DONE``); see ``registry``. The text faults change only the text a client
assembles, each the way a real server got it wrong (issue 25): chunks that repeat all the
text so far, tokens decoded without their leading space (SentencePiece's "▁" dropped per
token), and multi-byte characters decoded one token at a time into U+FFFD. The last two
leave an echoed prompt alone (servers send it as given) and decode the logprobs tokens the
same way, with offsets that follow the text sent: the stream is consistent in itself, and
only the same request answered whole shows the defect. Cumulative text keeps each chunk's
own logprobs (the text alone is accumulated).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from conformance.reference.flavors import ApiError, dumps, envelope
from conformance.reference.registry import fault, stream_fault
from conformance.reference.shaping import (
    DONE,
    StreamContext,
    empty_copy,
    finish_positions,
    is_content,
    is_usage,
    new_id,
)

Items = list[Any]
Choice = dict[str, Any]

# --- the usage chunk ---------------------------------------------------------------------


@fault(
    "stream-usage-unrequested",
    "A usage chunk is sent although include_usage was not requested.",
    "stream",
)
def _usage_unrequested(items: Items, ctx: StreamContext) -> Items:
    if ctx.request.include_usage:
        return items
    return [*items[:-1], ctx.usage_chunk, items[-1]]


@fault("stream-usage-missing", "include_usage is requested but no usage chunk is sent.", "stream")
def _usage_missing_chunk(items: Items, ctx: StreamContext) -> Items:
    return [it for it in items if not is_usage(it)]


@fault("stream-usage-misplaced", "The usage chunk comes before the last content chunk.", "stream")
def _usage_misplaced(items: Items, ctx: StreamContext) -> Items:
    rest = [it for it in items if not is_usage(it)]
    if not ctx.request.include_usage:
        return rest
    last = max(i for i, it in enumerate(rest) if is_content(it))
    return [*rest[:last], ctx.usage_chunk, *rest[last:]]


@fault("stream-usage-every-chunk", "Every content chunk carries the usage object.", "stream")
def _usage_every_chunk(items: Items, ctx: StreamContext) -> Items:
    for it in filter(is_content, items):
        it["usage"] = dict(ctx.usage)
    return items


@fault(
    "stream-usage-empty-object",
    "Content chunks carry `usage: {}` instead of null or nothing.",
    "stream",
)
def _usage_empty_object(items: Items, ctx: StreamContext) -> Items:
    for it in filter(is_content, items):
        it["usage"] = {}
    return items


@fault(
    "stream-usage-twice",
    "With include_usage, the usage chunk is sent twice before `data: [DONE]`.",
    "stream",
)
def _usage_twice(items: Items, ctx: StreamContext) -> Items:
    out: Items = []
    for it in items:
        out.append(it)
        if is_usage(it):
            out.append(copy.deepcopy(it))
    return out


# --- text that assembles wrong -------------------------------------------------------------


def _content_choices(items: Items) -> Iterator[Choice]:
    for it in items:
        if is_content(it):
            yield it["choices"][0]


def _generated(items: Items, ctx: StreamContext) -> Iterator[Choice]:
    """The streamed choices that carry generated text: with echo, each index's first
    chunk carries the prompt (shaping._choice_chunks) and is left out."""
    request = ctx.request
    seen: set[int] = set()
    for choice in _content_choices(items):
        index = choice["index"]
        first = index not in seen
        seen.add(index)
        if first and request.echo and request.prompts[index // request.n].tokens:
            continue
        yield choice


def _each_generated_token(edit: Callable[[str], str]) -> Callable[[Items, StreamContext], Items]:
    """A fault that decodes each generated token with ``edit``: the chunk's text and its
    logprobs tokens alike, with the text offsets that follow from the new texts."""

    def hook(items: Items, ctx: StreamContext) -> Items:
        generated = {id(choice) for choice in _generated(items, ctx)}
        position: dict[int, int] = {}
        for choice in _content_choices(items):
            lp = choice.get("logprobs")
            if id(choice) in generated:
                choice["text"] = edit(choice["text"])
                if isinstance(lp, dict):
                    lp["tokens"] = [edit(token) for token in lp["tokens"]]
            start = position.get(choice["index"], 0)
            if isinstance(lp, dict):
                lengths = [len(token) for token in lp["tokens"]]
                lp["text_offset"] = [start + sum(lengths[:j]) for j in range(len(lengths))]
            position[choice["index"]] = start + len(choice["text"])
        return items

    return hook


@fault(
    "stream-text-cumulative",
    "Each streamed chunk's text is all of its choice's text so far, not the chunk's own.",
    "stream",
)
def _text_cumulative(items: Items, ctx: StreamContext) -> Items:
    so_far: dict[int, str] = {}
    for choice in _content_choices(items):
        index = choice["index"]
        so_far[index] = so_far.get(index, "") + choice["text"]
        choice["text"] = so_far[index]
    return items


fault(
    "stream-leading-space-dropped",
    "Each streamed token loses its leading space (the words run together).",
    "stream",
)(_each_generated_token(lambda text: text.removeprefix(" ")))

fault(
    "stream-utf8-replaced",
    "Every non-ASCII character of the streamed tokens comes as U+FFFD (each token decoded "
    "on its own).",
    "stream",
)(_each_generated_token(lambda text: "".join(c if c.isascii() else "\ufffd" for c in text)))


# --- a stream cut short -------------------------------------------------------------------


@fault(
    "stream-cut-after-first-chunk",
    "Each choice's stream ends after its first content chunk (no finish_reason); the usage "
    "chunk and `data: [DONE]` still come: llama-cpp-python's concurrent streams (streamed).",
    "stream",
)
def _cut_after_first_chunk(items: Items, ctx: StreamContext) -> Items:
    kept: Items = []
    seen: set[int] = set()
    for it in items:
        if not is_content(it):
            kept.append(it)
            continue
        index = it["choices"][0]["index"]
        if index not in seen:
            seen.add(index)
            first = copy.deepcopy(it)
            first["choices"][0]["finish_reason"] = None
            kept.append(first)
    return kept


# --- event streams: the list of payloads (dicts, raw strings, DONE) ---------------------


def _on_each_choice(update: Callable[[dict[str, Any]], None]) -> Callable[..., Items]:
    def hook(items: Items, ctx: StreamContext) -> Items:
        for it in items:
            if is_content(it):
                update(it["choices"][0])
        return items

    return hook


@stream_fault("stream-id-changes", "Each chunk has a different `id`.")
def _id_changes(items: Items, ctx: StreamContext) -> Items:
    return [{**it, "id": new_id()} if isinstance(it, dict) else it for it in items]


fault("stream-no-finish-reason", "No chunk carries a finish_reason.", "stream")(
    _on_each_choice(lambda c: c.update(finish_reason=None))
)


def _empty_string_finish(choice: dict[str, Any]) -> None:
    if choice["finish_reason"] is None:
        choice["finish_reason"] = ""


fault("stream-finish-empty-string", 'Non-final chunks carry `finish_reason: ""`.', "stream")(
    _on_each_choice(_empty_string_finish)
)


@stream_fault("stream-double-finish", "Two chunks carry a finish_reason for the same index.")
def _double_finish(items: Items, ctx: StreamContext) -> Items:
    out = list(items)
    for i in reversed(finish_positions(items)):
        out.insert(i + 1, empty_copy(items[i]))
    return out


@stream_fault("stream-text-after-finish", "A chunk with text follows the finish chunk of index 0.")
def _text_after_finish(items: Items, ctx: StreamContext) -> Items:
    first = next(i for i in finish_positions(items) if items[i]["choices"][0]["index"] == 0)
    extra = empty_copy(items[first], " extra")
    extra["choices"][0]["finish_reason"] = None
    return [*items[: first + 1], extra, *items[first + 1 :]]


fault("stream-index-zero", "Every chunk's choice has `index: 0`.", "stream")(
    _on_each_choice(lambda c: c.update(index=0))
)


@stream_fault(
    "finish-on-empty-chunk",
    "finish_reason comes on an extra chunk with empty text.",
    tolerated=True,
)
def _finish_on_empty_chunk(items: Items, ctx: StreamContext) -> Items:
    out = list(items)
    for i in reversed(finish_positions(items)):
        final = empty_copy(items[i])
        items[i]["choices"][0]["finish_reason"] = None
        out.insert(i + 1, final)
    return out


@stream_fault("stream-error-event", "An error event arrives mid-stream.")
def _error_event(items: Items, ctx: StreamContext) -> Items:
    error = ApiError(
        500, "upstream failed", code="upstream_error", origin="server", type_="server_error"
    )
    middle = max(1, (len(items) - 1) // 2)
    return [*items[:middle], envelope(ctx.flavor, error), *items[middle:]]


@stream_fault("stream-data-after-done", "A data event follows `data: [DONE]`.")
def _data_after_done(items: Items, ctx: StreamContext) -> Items:
    return [*items, copy.deepcopy(items[0])]


@stream_fault("stream-no-done", "The stream ends without `data: [DONE]`.")
def _no_done(items: Items, ctx: StreamContext) -> Items:
    return [it for it in items if it != DONE]


@stream_fault("stream-not-json", "One data payload is not JSON.")
def _not_json(items: Items, ctx: StreamContext) -> Items:
    position = 1 if is_content(items[1]) else 0
    text = dumps(items[position]).decode()
    return [*items[:position], text[: len(text) // 2], *items[position + 1 :]]
