"""What must hold of an answer beside what it says: usage across `n` and modes, and the
prompt an echo with logprobs must score.

The usage rules compare an exchange with a related one the scenario sent beside it (the
stream twin probe, scenarios.STREAM_TWIN): the same request with `n: 2`, and the same
request streamed with ``include_usage``. ECHO-LOGPROBS-PROMPT judges the echo-with-logprobs
requests the suite already sends (edges, the SDK's). Nothing here spends a request of its own.
"""

from __future__ import annotations

from itertools import pairwise

# LOGPROBS-* register before this module's requirements, as they always have: the
# registry's order is the order every exchange is judged in, and so of its findings.
import conformance.judging.checks.logprobs  # noqa: F401
from conformance.judging.checks.common import choices_of, completion, declares, is_int, says
from conformance.judging.checks.logprobs_rules import (
    arrays,
    logprobs_objects,
    path_of,
    requested_logprobs,
)
from conformance.judging.checks.semantics import choices_placed
from conformance.judging.checks.tokens import USAGE_TEXT, include_usage, overrun, undercount
from conformance.judging.checks.views import answer, answer_of, by_index, labelled, usage_of
from conformance.judging.requirements import Context, Level, Unsupported, Violation, requirement
from conformance.judging.wire.exchange import Exchange

MUST, SHOULD = Level.MUST, Level.SHOULD
#: The tag of the `n: 2` copy of the stream twin's non-streamed request.
N_TWIN_TAG = "probe:n-twin"
#: The tag of the streamed twin (checks.streaming.TWIN_TAG; repeated to keep imports light).
STREAM_TWIN_TAG = "probe:stream-twin"


def _declined(ctx: Context) -> bool:
    status = ctx.exchange.status
    return status is not None and 400 <= status < 500 and status != 429


def _plain_twin(ctx: Context, tag: str) -> Exchange | None:
    """The non-streamed n=1 answer the scenario sent beside this one, when it is a 200."""
    if tag not in ctx.case.tags:
        return None
    for other in ctx.related:
        body = other.json if other.status == 200 and not other.case.stream else None
        if isinstance(body, dict) and other.case.n == 1:
            return other
    return None


@requirement(
    "USAGE-PROMPT-TOKENS-N",
    level=MUST,
    area="semantics",
    statement="usage.prompt_tokens does not grow with `n`: an answer with two choices per "
    "prompt counts the same prompt tokens as the one-choice answer to the same prompt. "
    "MUST on the document's text: prompt_tokens is the number of tokens in the prompt, and "
    "`n` asks for more completions of that one prompt.",
    source=USAGE_TEXT + ".prompt_tokens (Number of tokens in the prompt); "
    "CreateCompletionRequest.n (How many completions to generate for each prompt)",
    evidence="spec-text",
    stated=says("prompt_tokens", r"tokens in the prompt"),
    otherwise="openai-contract",
    scope=declares("n"),
    applies=lambda ctx: (
        ctx.case.n > 1
        and _plain_twin(ctx, N_TWIN_TAG) is not None
        and (completion(ctx) or _declined(ctx))
    ),
    needs=("n",),
)
def prompt_tokens_per_prompt(ctx: Context) -> None:
    if _declined(ctx):
        # Declining n > 1 is the target's choice; the rule then has nothing to judge.
        raise Unsupported(f"the target declined n={ctx.case.n} ({ctx.exchange.status})")
    twin = _plain_twin(ctx, N_TWIN_TAG)
    assert twin is not None
    once = (usage_of(twin.json) or {}).get("prompt_tokens")
    counted = (usage_of(ctx.exchange.json) or {}).get("prompt_tokens")
    if not (is_int(once) and is_int(counted)) or counted == once:
        return  # a count that is not an integer is USAGE-TOTAL's finding
    scaled = " (counted once per choice)" if once and counted == once * ctx.case.n else ""
    raise Violation(
        f"prompt_tokens is {counted} with n={ctx.case.n} but {once} for the same prompt "
        f"with n=1{scaled}",
        path="usage.prompt_tokens",
        expected=once,
        actual=counted,
    )


def _same_text_as_twin(ctx: Context) -> bool:
    """The stream and its non-streamed twin generated the same text. Otherwise their counts
    are not comparable (different text is STREAM-MATCHES-NONSTREAM's), and the pair judges
    nothing: no witness of the usage chunk formed (conformance.judging.verdict.attribution
    FORMED_BY). Counted as passed, a stream twin that llama-cpp-python cut short and LiteLLM
    closed with "stop" made LiteLLM's own usage count look confirmed."""
    twin = _plain_twin(ctx, STREAM_TWIN_TAG)
    if twin is None:
        return False
    texts = {c.get("index"): c.get("text") for c in choices_of(twin.json)}
    same = [texts.get(c["index"]) == c.get("text") for _, c in answer(ctx).choices]
    return bool(same) and all(same) and len(same) == len(texts)


@requirement(
    "STREAM-USAGE-MATCHES",
    level=SHOULD,
    area="streaming",
    statement="With include_usage, the usage chunk counts the same completion_tokens as the "
    "non-streamed answer to the same request when both generated the same text. SHOULD: "
    "the document says the chunk shows the usage of the entire request, but two requests "
    "are compared, and one text may be spelled by two token sequences.",
    source="spec text: ChatCompletionStreamOptions.include_usage (the usage field on this "
    "chunk shows the token usage statistics for the entire request); " + USAGE_TEXT,
    evidence="spec-text",
    stated=says("include_usage", r"entire request"),
    otherwise="openai-contract",
    scope=declares("stream_options"),
    applies=lambda ctx: by_index(ctx) and include_usage(ctx) and _same_text_as_twin(ctx),
)
def stream_usage_matches(ctx: Context) -> None:
    twin = _plain_twin(ctx, STREAM_TWIN_TAG)
    assert twin is not None
    streamed = answer(ctx)
    plain = answer_of(twin)
    theirs = (plain.usage or {}).get("completion_tokens")
    ours = (streamed.usage or {}).get("completion_tokens")
    if not (is_int(theirs) and is_int(ours)) or ours == theirs:
        return  # a missing or non-integer count is STREAM-USAGE's / USAGE-TOTAL's
    if overrun(ctx, streamed) is not None:
        return  # a count above max_tokens is STREAM-MAX-TOKENS' finding, not a second one
    # The other way round: the body's count is wrong by a rule of its own, past max_tokens
    # for the text this chunk counts within it (LiteLLM's mock: 20 for 8; USAGE-MAX-TOKENS'
    # finding on the twin) or short of its own text (USAGE-COMPLETION-TOKENS'). This one
    # rests on it ("twin-usage", withheld by conformance.judging.verdict.attribution), and so shows the
    # body's usage wrong. A body that visibly ran past the limit shows no count at all.
    over = overrun(ctx, plain)
    if over is not None and over.witness != "usage":
        return
    wrong = over or undercount(ctx, plain)
    raise Violation(
        f"the usage chunk counts {ours} completion tokens, the non-streamed answer to the "
        f"same request {theirs}, for the same text",
        path="usage.completion_tokens",
        expected=theirs,
        actual=ours,
        witness=None if wrong is None else "twin-usage",
    )


# -- echo with logprobs: the prompt is scored ------------------------------------------------


def _rising(offsets: list[object]) -> bool:
    return all(is_int(a) and is_int(b) and a <= b for a, b in pairwise(offsets))


def _scores_prompt(ctx: Context) -> bool:
    body = ctx.case.body
    return (
        completion(ctx)
        and body.get("echo") is True
        and requested_logprobs(body) is not None
        and bool(logprobs_objects(labelled(ctx.exchange.json)))
        and choices_placed(ctx)  # else CHOICES-COUNT / CHOICES-INDEX own the defect
    )


@requirement(
    "ECHO-LOGPROBS-PROMPT",
    level=MUST,
    area="semantics",
    statement="With echo and logprobs, the logprobs cover the echoed prompt: a position per "
    "prompt token (token-id prompts: at least as many as the ids), starting at the start of "
    "the echoed text (text prompts). MUST, client-visible: lm-evaluation-harness scores a "
    "prompt this way (echo, logprobs, max_tokens 0) and reads exactly those positions; the "
    "document's text alone does not say it, so the evidence is that client.",
    source="lm-evaluation-harness loglikelihood requests (echo=True, logprobs, max_tokens=0) "
    "read logprobs.token_logprobs at the prompt's positions; CreateCompletionRequest.echo",
    evidence="client-visible",
    scope=declares("echo"),
    applies=_scores_prompt,
    needs=("echo", "logprobs"),
)
def echo_logprobs_prompt(ctx: Context) -> None:
    prompts, n = ctx.case.prompts, ctx.case.n
    for name, choice, lp in logprobs_objects(labelled(ctx.exchange.json)):
        index = choice.get("index")
        if not is_int(index) or not 0 <= index // n < len(prompts):
            continue  # a misplaced choice is CHOICES-INDEX's
        prompt = prompts[index // n]
        found = arrays(lp)
        tokens, offsets = found.get("tokens"), found.get("text_offset")
        where = f"{path_of(name)}.logprobs"
        if len({len(a) for a in found.values()}) > 1 or not _rising(offsets or []):
            continue  # arrays of different lengths or offsets out of order: LOGPROBS-*'s
        text = choice.get("text")
        if isinstance(prompt, str) and not (isinstance(text, str) and text.startswith(prompt)):
            continue  # the prompt was not echoed at all: ECHO-PREFIX's finding
        if isinstance(prompt, list) and prompt and all(is_int(t) for t in prompt):
            if tokens is not None and len(tokens) < len(prompt):
                # A token-id prompt's echo cannot be told from the text: if echo was
                # ignored, ECHO-PREFIX owns the defect (attribution: witness "echo").
                raise Violation(
                    f"{where}.tokens has {len(tokens)} positions for an echoed prompt of "
                    f"{len(prompt)} token ids: the prompt is not covered",
                    path=f"{where}.tokens",
                    expected=f"at least {len(prompt)}",
                    actual=len(tokens),
                    witness="echo",
                )
        elif isinstance(prompt, str) and prompt and tokens == []:
            raise Violation(
                f"{where}.tokens is empty for an echoed prompt of {len(prompt)} characters: "
                "the prompt is not covered",
                path=f"{where}.tokens",
                expected="at least 1",
                actual=0,
            )
        elif isinstance(prompt, str) and prompt and offsets:
            first = offsets[0]
            if is_int(first) and first >= len(prompt):
                raise Violation(
                    f"{where}.text_offset starts at {first}, past the echoed prompt "
                    f"({len(prompt)} characters): the logprobs cover only the generated text",
                    path=f"{where}.text_offset[0]",
                    expected=0,
                    actual=first,
                )
