"""The context window a target advertises: reading it, the prompt sent over it, the rule.

vLLM and SGLang list each model's window in ``GET /v1/models`` (``max_model_len`` on the
model object). A prompt longer than that window cannot be served: OpenAI answers 400
``context_length_exceeded``, vLLM and Ollama have answered 200 with empty text and
``finish_reason: "length"``, which a client reads as a complete answer. The suite sends
one prompt a token over the window the target advertises (conformance/run/scenarios.py);
where none is advertised (Ollama's and LiteLLM's lists name ids only) the requirement is
not applicable, with the reason. llama.cpp's ``meta.n_ctx_train`` is the length the model
was trained at, not the window the server was started with (``-c``): it is not read.
"""

from __future__ import annotations

from typing import Any

from conformance.judging.checks.common import choices_of, is_int, says
from conformance.judging.requirements import Context, Level, Violation, requirement
from conformance.judging.wire.case import Case

#: Tag of the prompt sent over the advertised window; ``window=<tokens>`` goes beside it.
CONTEXT_WINDOW_TAG = "probe:context-window"
WINDOW_PREFIX = "window="
#: Where a /v1/models model object states its window, in tokens (vLLM's and SGLang's
#: ModelCard).
WINDOW_FIELD = "max_model_len"
#: The token id the over-long token-id prompt repeats: an ordinary token in every
#: vocabulary (special tokens come first), as in the capability probes' token prompt.
TOKEN_ID = 15
#: A text unit that is at least one token on every tokenizer that splits at whitespace
#: (BPE pre-tokenizers, SentencePiece): a text prompt of N units is at least N tokens.
TEXT_UNIT = " a"


def advertised_window(listing: Any, model: str) -> tuple[int | None, str]:
    """The context window ``GET /v1/models`` advertises for ``model`` (the model object
    with that id, or the only one listed: a server serving one model under an alias),
    and, when there is none, why."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None, "its answer is not a model list"
    cards = [c for c in data if isinstance(c, dict)]
    named = [c for c in cards if c.get("id") == model] or (cards if len(cards) == 1 else [])
    if not named:
        return None, f"it lists no model {model!r}"
    value = named[0].get(WINDOW_FIELD)
    if not is_int(value) or value < 1:
        return None, f"its model object states no {WINDOW_FIELD} (the window in tokens)"
    return value, ""


def over_window_probe(model: str, window: int, *, token_ids: bool) -> Case:
    """A prompt one token over ``window`` (token ids, or text of ``TEXT_UNIT``s), asking
    for one token: refused by design, judged by CONTEXT-WINDOW-REJECTED alone."""
    prompt: Any = [TOKEN_ID] * (window + 1) if token_ids else TEXT_UNIT * (window + 1)
    form = "token ids" if token_ids else "text"
    return Case(
        {"model": model, "prompt": prompt, "max_tokens": 1},
        mode="invalid",
        label=f"context window probe: a prompt of {window + 1} {form}, over the {window} "
        "tokens /v1/models advertises",
        breaks=f"prompt: longer than the {window}-token context window the target advertises",
        tags=frozenset({CONTEXT_WINDOW_TAG, f"{WINDOW_PREFIX}{window}"}),
    )


def window_of(case: Case) -> int | None:
    """The advertised window an over-long prompt was sent against (its tag)."""
    for tag in case.tags:
        if tag.startswith(WINDOW_PREFIX) and tag[len(WINDOW_PREFIX) :].isdigit():
            return int(tag[len(WINDOW_PREFIX) :])
    return None


def _over_window(ctx: Context) -> bool:
    status, bound = ctx.exchange.status, ctx.exchange.bound
    # A 429 is the run's; a bound hit (an answer cut short) is HTTP-COMPLETE's.
    return CONTEXT_WINDOW_TAG in ctx.case.tags and status not in (None, 429) and bound is None


@requirement(
    "CONTEXT-WINDOW-REJECTED",
    level=Level.MUST,
    area="errors",
    statement="A prompt longer than the context window the target advertises (GET /v1/models, "
    "max_model_len) is refused with a 4xx (its envelope is ERROR-ENVELOPE's), never served "
    "(a 200 with empty or truncated text) or answered 5xx.",
    source="spec text: CreateCompletionRequest.max_tokens (The token count of your prompt "
    "plus max_tokens cannot exceed the model's context length); OpenAI answers 400 "
    "context_length_exceeded; vLLM and Ollama have answered 200 with empty text and "
    '"length", a complete answer to a client',
    evidence="spec-text",
    stated=says("max_tokens", r"cannot exceed the model's context length"),
    otherwise="client-visible",
    applies=_over_window,
)
def context_window_rejected(ctx: Context) -> None:
    status, window = ctx.exchange.status, window_of(ctx.case)
    assert status is not None
    # A token-id prompt's length is exact; a text's is the target's tokenizer's to count.
    text_prompt = isinstance(ctx.case.body.get("prompt"), str)
    what = f"a prompt over the {window}-token context window the target advertises"
    if 200 <= status < 300:
        body = ctx.exchange.json if isinstance(ctx.exchange.json, dict) else {}
        usage = body.get("usage")
        counted = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if text_prompt and is_int(counted) and window is not None and counted <= window:
            return  # a text prompt the target's tokenizer counts within its window
        choice = next(iter(choices_of(body)), {})
        raise Violation(
            f"{what} was served ({status}, text {str(choice.get('text'))[:40]!r}, "
            f"finish_reason {choice.get('finish_reason')!r}), expected a 4xx: a client "
            "reads it as a complete answer to a prompt the model never read whole",
            expected="4xx",
            actual=status,
        )
    if not 400 <= status < 500:
        raise Violation(
            f"{what} was answered {status}, expected a 4xx", expected="4xx", actual=status
        )
