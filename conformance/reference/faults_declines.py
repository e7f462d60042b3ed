"""Capability switches: a feature declined with a proper 400 and the error envelope, and
short answers, a tiny model's legal habit.

Declining a feature is legal: real servers do it (vLLM 0.32 answers ``suffix`` with 400
"suffix is only supported for models with FIM completion rendering"; Groq documents 400
for ``logprobs`` and for ``n`` other than 1). Each switch declines one feature, in the form
real servers decline it, and leaves everything else conformant: a correct suite passes
with any one of them on, naming the decline as the reason for each requirement it leaves
out (tests/test_declines.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from conformance.reference.flavors import ApiError
from conformance.reference.registry import fault
from conformance.reference.shaping import Plan
from conformance.reference.validation import CompletionRequest

Uses = Callable[[CompletionRequest], bool]


def _decline(name: str, param: str, message: str, uses: Uses, what: str) -> None:
    """Register ``decline-<name>``: requests that ``uses`` the feature get a 400 envelope."""

    @fault(name, f"{what} are declined with a proper 400 envelope.", "request",
           tolerated=True, capability=True)  # fmt: skip
    def _declined(request: CompletionRequest) -> ApiError | None:
        if not uses(request):
            return None
        return ApiError(400, message, code="unsupported_parameter", origin="capability",
                        param=param)  # fmt: skip


_decline(
    "reject-token-prompts", "prompt", "Token-id prompts are not supported by this model.",
    lambda r: r.token_prompt, "Token-array prompts",
)  # fmt: skip
_decline(
    "echo-declined-token-prompts", "echo", "echo is not supported with token-id prompts.",
    lambda r: r.echo and r.token_prompt, "`echo` with a token-id prompt (text prompts echo)",
)  # fmt: skip
_decline(
    "decline-echo", "echo", "echo is not supported",
    lambda r: r.echo, "Requests with `echo`",
)  # fmt: skip
_decline(
    "decline-suffix", "suffix",
    "suffix is only supported for models with FIM completion rendering",
    lambda r: r.suffix is not None, "Requests with `suffix`",
)  # fmt: skip
_decline(
    "decline-logprobs", "logprobs", "logprobs is not supported",
    lambda r: r.logprobs is not None, "Requests with `logprobs`",
)  # fmt: skip
_decline(
    "decline-n", "n", "n must be 1",
    lambda r: r.n != 1, "Requests with `n` other than 1",
)  # fmt: skip
_decline(
    "decline-best-of", "best_of", "best_of is not supported",
    lambda r: r.best_of is not None, "Requests with `best_of`",
)  # fmt: skip
_decline(
    "decline-logit-bias", "logit_bias", "logit_bias is not supported",
    lambda r: "logit_bias" in r.present, "Requests with `logit_bias`",
)  # fmt: skip
_decline(
    "decline-max-tokens-0", "max_tokens", "max_tokens must be at least 1",
    lambda r: r.max_tokens == 0 and not r.echo, "Requests with max_tokens 0 (without echo)",
)  # fmt: skip
_decline(
    "decline-stop", "stop", "stop sequences are not supported",
    lambda r: bool(r.stop), "Requests with stop sequences",
)  # fmt: skip


# --- short answers: legal, and a probe that needs words must say why it could not run ----


@fault("answers-one-word", "Every completion ends naturally after one token (a tiny model).",
       "plan", tolerated=True)  # fmt: skip
def _answers_one_word(plan: Plan) -> Plan:
    return replace(plan, eos_after=1)


@fault(
    "answers-one-word-to-counting",
    "A prompt that asks to count is answered with one token (the stop probe's first prompt).",
    "plan",
    tolerated=True,
)
def _answers_one_word_to_counting(plan: Plan) -> Plan:
    counting = any(text.startswith("Count") for text in plan.texts)
    return replace(plan, eos_after=1) if counting else plan


# --- a feature accepted and ignored ----------------------------------------------------------


@fault(
    "best-of-ignored",
    "`best_of` is dropped before validation, as vLLM 0.32 does: best_of below n, with "
    "stream, or of the wrong type is served (200).",
    "refusal",
)
def _best_of_ignored(error: ApiError) -> ApiError | None:
    return None if error.origin == "invalid" and error.param == "best_of" else error
