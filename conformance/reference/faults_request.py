"""Faults of a request's parameters honoured wrongly: choice placement, stop, max_tokens, suffix.

Each is a defect shape of issue 25, taken from real servers' bug trackers. OpenAI places
choice j of prompt i at index ``i * n + j`` (clients take the prompt as ``index // n``);
the placement faults keep every index 0..k-1 exactly once and only put the wrong choice
behind it, so nothing but the choice's own text shows the defect.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.reference import model
from conformance.reference.registry import also, fault
from conformance.reference.shaping import Plan, StreamContext, is_content
from conformance.reference.validation import CompletionRequest

Body = dict[str, Any]
Items = list[Any]

#: How many tokens "no limit" generates: the toy model's context, as a real server's.
UNLIMITED_TOKENS = 64

# --- where the choices of a prompt list go --------------------------------------------------


def _choice_major(index: int, request: CompletionRequest) -> int:
    """Where a choice-major server puts OpenAI's choice ``index``: j * prompts + i."""
    prompt, choice = divmod(index, request.n)
    return choice * len(request.prompts) + prompt


@fault(
    "choices-choice-major",
    "With a prompt list and n, choice j of prompt i comes at index j * prompts + i instead "
    "of i * n + j (both modes).",
    "body",
)
def _choices_choice_major(body: Body, request: CompletionRequest) -> Body:
    for choice in body["choices"]:
        choice["index"] = _choice_major(choice["index"], request)
    body["choices"].sort(key=lambda choice: choice["index"])
    return body


@also("choices-choice-major", "stream")
def _choices_choice_major_streamed(items: Items, ctx: StreamContext) -> Items:
    for it in filter(is_content, items):
        choice = it["choices"][0]
        choice["index"] = _choice_major(choice["index"], ctx.request)
    return items


def _finish_time(choice: dict[str, Any], request: CompletionRequest) -> int:
    """When a choice would finish on a real server: its prompt's tokens plus its own."""
    prompt = request.prompts[choice["index"] // request.n]
    text = choice["text"]
    if request.echo:
        text = text[len(prompt.text) :]
    return len(prompt.tokens) + len(model.tokenize(text))


@fault(
    "choices-finish-order",
    "The choices of a prompt list are indexed in the order they finish (fewest prompt and "
    "completion tokens first), not in prompt order (non-streamed).",
    "body",
)
def _choices_finish_order(body: Body, request: CompletionRequest) -> Body:
    ordered = sorted(body["choices"], key=lambda choice: _finish_time(choice, request))
    for position, choice in enumerate(ordered):
        choice["index"] = position
    body["choices"] = ordered
    return body


# --- stop, max_tokens and suffix ------------------------------------------------------------


@fault(
    "stop-finish-length",
    'A completion that a stop sequence ended reports finish_reason "length" (both modes).',
    "plan",
)
def _stop_finish_length(plan: Plan) -> Plan:
    return replace(plan, stop_finish="length")


@fault(
    "max-tokens-zero-unlimited",
    f"`max_tokens: 0` is read as no limit: up to {UNLIMITED_TOKENS} tokens (both modes).",
    "plan",
)
def _max_tokens_zero_unlimited(plan: Plan) -> Plan:
    if plan.max_tokens != 0:
        return plan
    return replace(plan, max_tokens=UNLIMITED_TOKENS)


@fault(
    "suffix-appended",
    "The request's `suffix` is appended to each choice's text (both modes).",
    "body",
)
def _suffix_appended(body: Body, request: CompletionRequest) -> Body:
    if request.suffix:
        for choice in body["choices"]:
            choice["text"] += request.suffix
    return body


@also("suffix-appended", "stream")
def _suffix_appended_streamed(items: Items, ctx: StreamContext) -> Items:
    suffix = ctx.request.suffix
    if not suffix:
        return items
    for it in filter(is_content, items):
        choice = it["choices"][0]
        if choice["finish_reason"] is not None:
            choice["text"] += suffix
    return items
