"""Faults of content: what is generated, and how bodies and streams are shaped.

Each is declared with ``registry.fault`` next to its transformer (``also`` adds a second
stage: the logprobs faults change stream chunks as they change bodies). Transformers of
one stage run in the order they are declared here: ``schema-choices-not-array`` comes last
among body faults because the others expect ``choices`` to be a list.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from conformance.reference import model
from conformance.reference.registry import also, fault, stream_fault
from conformance.reference.shaping import (
    Plan,
    StreamContext,
    is_usage,
)
from conformance.reference.validation import CompletionRequest

Body = dict[str, Any]
Items = list[Any]

# --- what is generated (both modes) -----------------------------------------------------


@fault("choices-ignore-n", "One choice per prompt whatever `n` asks for (both modes).", "plan")
def _ignore_n(plan: Plan) -> Plan:
    return replace(plan, n=1)


@fault(
    "exceed-max-tokens",
    "Generates max_tokens + 3 tokens, never stopping naturally (both modes).",
    "plan",
)
def _exceed(plan: Plan) -> Plan:
    return replace(plan, max_tokens=plan.max_tokens + 3, natural_stop=False)


@fault("echo-ignored", "`echo: true` is ignored: the prompt is not returned (both modes).", "plan")
def _echo_ignored(plan: Plan) -> Plan:
    return replace(plan, echo=False)


@fault(
    "logprobs-unrequested",
    "A logprobs object is returned although none was requested (non-streamed).",
    "plan",
)
def _logprobs_unrequested(plan: Plan) -> Plan:
    return plan if plan.streamed else replace(plan, logprobs_always=True)


@fault("stop-in-text", "The stop sequence is kept at the end of the text (both modes).", "plan")
def _stop_in_text(plan: Plan) -> Plan:
    return replace(plan, include_stop=True)


@fault("stop-ignored", "`stop` is ignored entirely (both modes).", "plan")
def _stop_ignored(plan: Plan) -> Plan:
    return replace(plan, stop=())


@fault(
    "stop-inside-one-token",
    "A stop sequence ends the completion only when it lies inside one generated token; one "
    "that spans two tokens is never matched (mistral.rs, tiles; both modes).",
    "plan",
)
def _stop_inside_one_token(plan: Plan) -> Plan:
    return replace(plan, stop_in_one_token=True)


@fault(
    "stream-text-differs",
    "The streamed text differs from the non-streamed text at temperature 0.",
    "plan",
)
def _stream_text_differs(plan: Plan) -> Plan:
    return replace(plan, variant="stream") if plan.streamed else plan


@fault(
    "finish-not-length", '`finish_reason` is "stop" when max_tokens was hit (both modes).', "finish"
)
def _finish_not_length(reason: str) -> str:
    return "stop" if reason == "length" else reason


@fault("finish-enum", '`finish_reason` is "eos_token", outside the enum (both modes).', "finish")
def _finish_enum(reason: str) -> str:
    return "eos_token"


@fault(
    "usage-arithmetic",
    "`usage.total_tokens` is prompt + completion + 1 (both modes' usage objects).",
    "usage",
)
def _usage_arithmetic(usage: dict[str, int]) -> dict[str, int]:
    return {**usage, "total_tokens": usage["total_tokens"] + 1}


@fault(
    "usage-prompt-zero",
    "`usage.prompt_tokens` is 0, total adjusted to match (both modes' usage objects).",
    "usage",
)
def _usage_prompt_zero(usage: dict[str, int]) -> dict[str, int]:
    total = usage["total_tokens"] - usage["prompt_tokens"]
    return {**usage, "prompt_tokens": 0, "total_tokens": total}


@fault(
    "usage-completion-short",
    "`usage.completion_tokens` is 0 although text was generated, total adjusted (both modes).",
    "usage",
)
def _usage_completion_short(usage: dict[str, int]) -> dict[str, int]:
    total = usage["total_tokens"] - usage["completion_tokens"]
    return {**usage, "completion_tokens": 0, "total_tokens": total}


# --- non-streamed bodies (and, for logprobs, every streamed content chunk) ---------------


def _body_fault(name: str, description: str, *stages: str) -> Callable[..., Any]:
    """Declare a body fault whose transformer edits the body in place."""

    def register(edit: Callable[[Body, CompletionRequest], object]) -> Callable[..., Any]:
        def hook(body: Body, request: CompletionRequest) -> Body:
            edit(body, request)
            return body

        fault(name, description, *(stages or ("body",)))(hook)
        return edit

    return register


def _each_logprobs(body: Body) -> list[dict[str, Any]]:
    return [c["logprobs"] for c in body["choices"] if isinstance(c.get("logprobs"), dict)]


@_body_fault(
    "object-chunk",
    '`object` is "text_completion.chunk" instead of "text_completion" (non-streamed).',
)
def _object_chunk(body: Body, request: CompletionRequest) -> None:
    body["object"] = "text_completion.chunk"


@_body_fault("created-millis", "`created` is in milliseconds instead of seconds (non-streamed).")
def _created_millis(body: Body, request: CompletionRequest) -> None:
    body["created"] = body["created"] * 1000 + 123


@_body_fault("empty-id", "`id` is the empty string (non-streamed).")
def _empty_id(body: Body, request: CompletionRequest) -> None:
    body["id"] = ""


@_body_fault(
    "usage-missing",
    "The non-streamed body has no `usage` object (required by Nscale's schema only).",
)
def _usage_missing(body: Body, request: CompletionRequest) -> None:
    body.pop("usage")


@_body_fault("choice-text-null", "The first choice has `text: null` (non-streamed).")
def _choice_text_null(body: Body, request: CompletionRequest) -> None:
    if body["choices"]:
        body["choices"][0]["text"] = None


@_body_fault("duplicate-index", "Every choice has `index: 0` (non-streamed).")
def _duplicate_index(body: Body, request: CompletionRequest) -> None:
    for choice in body["choices"]:
        choice["index"] = 0


@_body_fault(
    "logprobs-ignored",
    "`logprobs` is null although it was requested (both modes: every streamed chunk).",
    "body",
    "chunk",
)
def _logprobs_ignored(body: Body, request: CompletionRequest) -> None:
    for choice in body["choices"]:
        choice["logprobs"] = None


@_body_fault(
    "logprobs-length-mismatch",
    "The last `text_offset` entry is dropped (both modes: every streamed chunk).",
    "body",
    "chunk",
)
def _logprobs_length_mismatch(body: Body, request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        lp["text_offset"] = lp["text_offset"][:-1]


@_body_fault(
    "logprobs-positive",
    "One token logprob is 0.5, above 0 (both modes: one per streamed chunk).",
    "body",
    "chunk",
)
def _logprobs_positive(body: Body, request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        for i, value in enumerate(lp["token_logprobs"]):
            if value is not None:
                lp["token_logprobs"][i] = 0.5
                return


@_body_fault(
    "top-logprobs-extra",
    "Each `top_logprobs` entry has logprobs + 2 items (both modes).",
    "body",
    "chunk",
)
def _top_logprobs_extra(body: Body, request: CompletionRequest) -> None:
    want = (request.logprobs or 0) + 2
    for lp in _each_logprobs(body):
        for top in lp["top_logprobs"]:
            if top is None:
                continue
            filler = (w for w in model.VOCAB[1:] if w not in top)
            floor = min(top.values(), default=0.0)
            while len(top) < want:
                floor -= 1.0
                top[next(filler)] = floor


@_body_fault("text-offset-decreasing", "`text_offset` runs backwards (non-streamed).")
def _text_offset_decreasing(body: Body, request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        lp["text_offset"] = lp["text_offset"][::-1]


@_body_fault(
    "tokens-mismatch-text", "`logprobs.tokens` do not join to the choice text (non-streamed)."
)
def _tokens_mismatch_text(body: Body, request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        if lp["tokens"]:  # same token count: only the join differs from the text
            lp["tokens"][0] += "~"


@_body_fault(
    "logprobs-chat-shape", "logprobs come in the chat shape `{content: [...]}` (non-streamed)."
)
def _logprobs_chat_shape(body: Body, request: CompletionRequest) -> None:
    for choice in body["choices"]:
        lp = choice.get("logprobs")
        if isinstance(lp, dict):
            entries = zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True)
            choice["logprobs"] = {
                "content": [
                    {
                        "token": token,
                        "logprob": logprob,
                        "top_logprobs": [
                            {"token": k, "logprob": v} for k, v in (top or {}).items()
                        ],
                    }
                    for token, logprob, top in entries
                ]
            }


def _add_vendor_fields(body: Body) -> None:
    body["x_vendor"] = {"region": "ref-1", "queue_ms": 0}
    for choice in body.get("choices") or []:
        choice["x_vendor"] = {"moderated": False}


@fault(
    "vendor-fields",
    "Bodies, choices and chunks carry an extra `x_vendor` field.",
    "body",
    tolerated=True,
)
def _vendor_fields(body: Body, request: CompletionRequest) -> Body:
    _add_vendor_fields(body)
    return body


@_body_fault(
    "schema-choices-not-array",
    "`choices` is an object keyed by index instead of an array (non-streamed).",
)
def _choices_object(body: Body, request: CompletionRequest) -> None:
    body["choices"] = {str(i): c for i, c in enumerate(body["choices"])}


@fault(
    "null-fields",
    "Non-nullable fields are sent as null (Nscale: `logprobs: null`) (non-streamed).",
    "nulls",
)
def _keep_nulls(omit: bool) -> bool:
    return False


# --- extra vendor fields in a stream too ------------------------------------------------


@also("vendor-fields", "stream")
def _vendor_fields_in_stream(items: Items, ctx: StreamContext) -> Items:
    for it in items:
        if isinstance(it, dict):
            _add_vendor_fields(it)
    return items


# --- levels helper (issue 20): declared defaults and false witnesses ------------------------


@fault(
    "logprobs-declared-default",
    "A request that omits `logprobs` is served with Nscale's declared default `logprobs: 0`: "
    "the sampled tokens' logprobs come back unasked (both modes). Legal under Nscale; under "
    "AIHubMix (`default: null`) logprobs were not requested.",
    "plan",
)
def _logprobs_declared_default(plan: Plan) -> Plan:
    return replace(plan, logprobs_always=True)


@_body_fault(
    "top-logprobs-short",
    "Each `top_logprobs` entry lists only the sampled token, whatever `logprobs` asks for "
    "(both modes).",
    "body",
    "chunk",
)
def _top_logprobs_short(body: Body, request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        lp["top_logprobs"] = [
            dict(list(top.items())[:1]) if isinstance(top, dict) else top
            for top in lp["top_logprobs"]
        ]


@fault(
    "stream-text-offset-stalled",
    "Every streamed chunk's `text_offset` entries are the offset of the completion's start: "
    "joined, they do not advance with the text (streamed only).",
    "chunk",
)
def _stream_text_offset_stalled(chunk: Body, request: CompletionRequest) -> Body:
    for lp in _each_logprobs(chunk):
        lp["text_offset"] = [0] * len(lp["text_offset"])
    return chunk


@fault(
    "usage-completion-off-by-one",
    "`usage.completion_tokens` is one short (FastChat reports its loop index), total adjusted "
    "(both modes' usage objects); logprobs and finish_reason stay right.",
    "usage",
)
def _usage_completion_off_by_one(usage: dict[str, int]) -> dict[str, int]:
    if usage["completion_tokens"] < 1:
        return usage
    return {
        **usage,
        "completion_tokens": usage["completion_tokens"] - 1,
        "total_tokens": usage["total_tokens"] - 1,
    }


@stream_fault(
    "stream-logprobs-cumulative",
    "Each streamed chunk's logprobs hold every token of its choice so far, not the chunk's own.",
)
def _stream_logprobs_cumulative(items: Items, ctx: StreamContext) -> Items:
    out = copy.deepcopy(items)
    so_far: dict[int, dict[str, list[Any]]] = {}
    for item in out:
        choices = item.get("choices") if isinstance(item, dict) else None
        for choice in choices or []:
            lp = choice.get("logprobs")
            if not isinstance(lp, dict):
                continue
            seen = so_far.setdefault(choice["index"], {k: [] for k in lp})
            for key, values in lp.items():
                seen[key] = seen.get(key, []) + list(values)
            choice["logprobs"] = copy.deepcopy(seen)
    return out


# --- usage across `n` and modes (checks.invariants) --------------------------------------


def _scale_prompt_tokens(usage: dict[str, int], n: int) -> None:
    extra = usage["prompt_tokens"] * (n - 1)
    usage["prompt_tokens"] += extra
    usage["total_tokens"] += extra


@fault(
    "usage-prompt-per-choice",
    "`usage.prompt_tokens` counts each prompt once per choice (x n), total adjusted (both modes).",
    "body",
)
def _prompt_per_choice(body: Body, request: CompletionRequest) -> Body:
    if isinstance(body.get("usage"), dict):
        _scale_prompt_tokens(body["usage"], request.n)
    return body


@also("usage-prompt-per-choice", "stream")
def _prompt_per_choice_streamed(items: Items, ctx: StreamContext) -> Items:
    for it in filter(is_usage, items):
        _scale_prompt_tokens(it["usage"], ctx.request.n)
    return items


def _shift_stream_usage(items: Items, ctx: StreamContext, delta: int) -> Items:
    """The usage chunk of a one-choice stream counts ``delta`` completion tokens more."""
    if ctx.request.n != 1 or len(ctx.request.prompts) != 1:
        return items
    for it in filter(is_usage, items):
        it["usage"] = {
            **it["usage"],
            "completion_tokens": it["usage"]["completion_tokens"] + delta,
            "total_tokens": it["usage"]["total_tokens"] + delta,
        }
    return items


@stream_fault(
    "stream-usage-counts-more",
    "The usage chunk of a one-choice stream counts one completion token more (total adjusted).",
)
def _stream_usage_counts_more(items: Items, ctx: StreamContext) -> Items:
    return _shift_stream_usage(items, ctx, +1)


@stream_fault(
    "stream-usage-counts-less",
    "The usage chunk of a one-choice stream counts one completion token fewer (total "
    "adjusted): below what the same request counts non-streamed, not below what was seen.",
)
def _stream_usage_counts_less(items: Items, ctx: StreamContext) -> Items:
    return _shift_stream_usage(items, ctx, -1)


# --- a declared default ignored ----------------------------------------------------------


@fault(
    "max-tokens-default-ignored",
    "A request without max_tokens generates 8 tokens past the declared default of 16 (both modes).",
    "plan",
)
def _default_ignored(plan: Plan) -> Plan:
    if not plan.default_max_tokens:
        return plan
    return replace(plan, max_tokens=plan.max_tokens + 8, natural_stop=False)


# --- echo with logprobs that skip the prompt ---------------------------------------------


@_body_fault(
    "echo-logprobs-completion-only",
    "With echo and logprobs, the logprobs cover only the generated tokens (non-streamed).",
)
def _echo_logprobs_completion_only(body: Body, request: CompletionRequest) -> None:
    if not request.echo:
        return
    for choice in body["choices"]:
        lp = choice.get("logprobs")
        if not isinstance(lp, dict):
            continue
        skip = len(request.prompts[choice["index"] // request.n].tokens)
        for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
            if isinstance(lp.get(key), list):
                lp[key] = lp[key][skip:]
