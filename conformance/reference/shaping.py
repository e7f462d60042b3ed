"""Shaping responses: generate the choices, then the JSON body or the stream's payloads.

The conformant path reads straight through; faults transform its values at the stages
named in ``registry`` (``plan``, ``finish``, ``usage``, ``body``, ``nulls``, ``chunk``,
``stream``).
"""

from __future__ import annotations

import copy
import itertools
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from conformance.reference import model
from conformance.reference.flavors import Flavor
from conformance.reference.model import Completion, Token
from conformance.reference.registry import ActiveFaults
from conformance.reference.validation import CompletionRequest

__all__ = [
    "DONE",
    "Choice",
    "Plan",
    "StreamContext",
    "completion_body",
    "drop_nulls",
    "empty_copy",
    "finish_positions",
    "is_content",
    "is_usage",
    "logprobs_object",
    "new_id",
    "stream_items",
]

SYSTEM_FINGERPRINT: Final = "fp_reference"
DONE: Final = "[DONE]"


@dataclass(frozen=True, slots=True)
class Plan:
    """What the model is asked to generate for one request (the ``plan`` stage)."""

    streamed: bool
    n: int
    top_k: int | None
    max_tokens: int
    stop: tuple[str, ...]
    echo: bool
    include_stop: bool = False
    natural_stop: bool = True
    #: Match a stop sequence only inside one token, never across two.
    stop_in_one_token: bool = False
    #: A different model key: the same request gives a different text.
    variant: str = ""
    #: Return a logprobs object even if none was requested.
    logprobs_always: bool = False
    #: max_tokens was left out (or null): ``max_tokens`` is the default.
    default_max_tokens: bool = False
    #: The finish_reason of a completion that a stop sequence ended.
    stop_finish: str = "stop"
    #: End every completion naturally after this many tokens (a tiny model's short answers).
    eos_after: int | None = None
    #: Cut a stop sequence by dropping only the token that completed it (its head stays).
    stop_head_kept: bool = False
    #: The prompts as text, for a fault that answers some prompts unlike others.
    texts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Choice:
    """One returned choice: its index, the echoed prompt tokens and the completion."""

    index: int
    echo: tuple[Token, ...]
    completion: Completion
    finish_reason: str

    @property
    def tokens(self) -> tuple[Token, ...]:
        return self.echo + self.completion.tokens

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.tokens)


@dataclass(frozen=True, slots=True)
class StreamContext:
    """What the ``stream`` stage's transformers may need besides the payloads."""

    flavor: Flavor
    request: CompletionRequest
    usage: dict[str, int]
    usage_chunk: dict[str, Any]


def new_id() -> str:
    return "cmpl-" + secrets.token_hex(12)


def _plan(request: CompletionRequest, faults: ActiveFaults, *, streamed: bool) -> Plan:
    plan = Plan(
        streamed=streamed,
        n=request.n,
        top_k=request.logprobs,
        max_tokens=request.max_tokens,
        stop=request.stop,
        echo=request.echo,
        default_max_tokens="max_tokens" not in request.present,
        texts=tuple(p.text for p in request.prompts),
    )
    return faults.fold("plan", plan)


def generate(request: CompletionRequest, plan: Plan, faults: ActiveFaults) -> list[Choice]:
    """Generate every choice: for prompt i and completion j, index ``i * n + j``."""
    n = plan.n
    candidates = max(n, request.best_of or 1)
    top_k = 0 if plan.top_k is None and plan.logprobs_always else plan.top_k
    choices: list[Choice] = []
    for i, prompt in enumerate(request.prompts):
        completions = [
            model.generate(
                prompt,
                max_tokens=plan.max_tokens,
                rng=model.sampler_rng(
                    prompt,
                    index=c,
                    seed=request.seed,
                    temperature=request.temperature,
                    top_p=request.top_p,
                ),
                temperature=request.temperature,
                top_p=request.top_p,
                stop=plan.stop,
                top_k=top_k,
                include_stop=plan.include_stop,
                natural_stop=plan.natural_stop,
                variant=plan.variant,
                stop_in_one_token=plan.stop_in_one_token,
                stop_finish=plan.stop_finish,
                eos_after=plan.eos_after,
                stop_head_kept=plan.stop_head_kept,
            )
            for c in range(candidates)
        ]
        if candidates > n:
            # best_of: keep the n candidates with the highest mean logprob per token.
            completions = sorted(completions, key=lambda comp: -comp.mean_logprob)[:n]
        echoed = model.score_prompt(prompt, top_k=top_k) if plan.echo else ()
        for j, completion in enumerate(completions):
            reason = faults.fold("finish", completion.finish_reason)
            choices.append(Choice(i * n + j, echoed, completion, reason))
    return choices


def _usage(
    request: CompletionRequest, choices: Sequence[Choice], faults: ActiveFaults
) -> dict[str, int]:
    """Token usage: prompts counted once each, completions over all returned choices."""
    prompt_tokens = sum(len(p.tokens) for p in request.prompts)
    completion_tokens = sum(len(c.completion.tokens) for c in choices)
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return faults.fold("usage", usage)


def logprobs_object(tokens: Sequence[Token], offset: int = 0) -> dict[str, Any]:
    """The OpenAI logprobs object for tokens whose text starts at ``offset``."""
    offsets: list[int] = []
    for token in tokens:
        offsets.append(offset)
        offset += len(token.text)
    return {
        "tokens": [t.text for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [t.top_logprobs for t in tokens],
        "text_offset": offsets,
    }


def drop_nulls(flavor: Flavor, value: Any) -> Any:
    """Under Nscale, omit the optional fields its schema declares non-nullable."""
    if not flavor.omit_nulls or not isinstance(value, dict):
        return value
    out = {
        k: v
        for k, v in value.items()
        if not (v is None and k in ("logprobs", "finish_reason", "usage"))
    }
    if isinstance(out.get("choices"), list):
        out["choices"] = [drop_nulls(flavor, c) for c in out["choices"]]
    return out


def _head(request: CompletionRequest) -> dict[str, Any]:
    return {
        "id": new_id(),
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }


def completion_body(
    flavor: Flavor, request: CompletionRequest, faults: ActiveFaults
) -> dict[str, Any]:
    """The JSON body of a non-streamed completion."""
    plan = _plan(request, faults, streamed=False)
    choices = generate(request, plan, faults)
    wants_logprobs = plan.top_k is not None or plan.logprobs_always
    body: dict[str, Any] = {
        **_head(request),
        "choices": [
            {
                "text": c.text,
                "index": c.index,
                "logprobs": logprobs_object(c.tokens) if wants_logprobs else None,
                "finish_reason": c.finish_reason,
            }
            for c in choices
        ],
        "usage": _usage(request, choices, faults),
    }
    body = faults.fold("body", body, request)
    if faults.fold("nulls", flavor.omit_nulls):
        body = drop_nulls(flavor, body)
    return body


# --------------------------------------------------------------------------------------
# Event streams
# --------------------------------------------------------------------------------------


def _choice_chunks(choice: Choice, with_logprobs: bool) -> list[dict[str, Any]]:
    """The ``choices`` entries streamed for one choice: the echo, then one per token."""
    pieces: list[tuple[Token, ...]] = []
    if choice.echo:
        pieces.append(choice.echo)  # echo: the first chunk carries the whole prompt
    pieces.extend((t,) for t in choice.completion.tokens)
    if not pieces:
        pieces.append(())  # nothing to send but the finish_reason
    out: list[dict[str, Any]] = []
    offset = 0
    for tokens in pieces:
        text = "".join(t.text for t in tokens)
        out.append(
            {
                "text": text,
                "index": choice.index,
                "logprobs": logprobs_object(tokens, offset) if with_logprobs else None,
                "finish_reason": None,
            }
        )
        offset += len(text)
    out[-1]["finish_reason"] = choice.finish_reason
    return out


def stream_items(flavor: Flavor, request: CompletionRequest, faults: ActiveFaults) -> list[Any]:
    """The data payloads of a stream: chunk dicts, then ``DONE``."""
    plan = _plan(request, faults, streamed=True)
    choices = generate(request, plan, faults)
    usage = _usage(request, choices, faults)
    head = _head(request)
    with_logprobs = plan.top_k is not None or plan.logprobs_always
    per_choice = [_choice_chunks(c, with_logprobs) for c in choices]
    items: list[Any] = []
    # Round-robin over the choices, the way real servers interleave them.
    for group in itertools.zip_longest(*per_choice):
        for entry in group:
            if entry is not None:
                chunk = {**head, "choices": [entry]}
                if request.include_usage:
                    chunk["usage"] = None
                items.append(faults.fold("chunk", chunk, request))
    usage_chunk = {**head, "choices": [], "usage": usage}
    if request.include_usage:
        items.append(usage_chunk)
    items.append(DONE)
    items = faults.fold("stream", items, StreamContext(flavor, request, usage, usage_chunk))
    return [drop_nulls(flavor, item) for item in items]


def is_content(item: Any) -> bool:
    return isinstance(item, dict) and bool(item.get("choices"))


def is_usage(item: Any) -> bool:
    return isinstance(item, dict) and item.get("choices") == [] and "usage" in item


def finish_positions(items: list[Any]) -> list[int]:
    """Where the chunks carrying a finish_reason are."""
    return [
        i
        for i, it in enumerate(items)
        if is_content(it) and it["choices"][0]["finish_reason"] is not None
    ]


def empty_copy(chunk: dict[str, Any], text: str = "") -> dict[str, Any]:
    """A copy of a content chunk with new text (and logprobs to match, if any)."""
    clone = copy.deepcopy(chunk)
    choice = clone["choices"][0]
    choice["text"] = text
    if choice.get("logprobs") is not None:
        choice["logprobs"] = logprobs_object((Token(text, -1.0, {text: -1.0}),) if text else ())
    return clone
