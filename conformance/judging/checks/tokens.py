"""Token counts checked from both sides: usage, max_tokens and the "length" finish.

Where the request and the answer make a quantity measurable it is bounded both ways:
completion_tokens at most what max_tokens allows and at least what the choices visibly
generated; prompt_tokens plausible for the prompt and equal for the same prompt streamed
and not; finish_reason "length" when max_tokens was reached, and only then.

One defect, one finding: a choice that ran past max_tokens is USAGE-MAX-TOKENS's (or
STREAM-MAX-TOKENS's) alone, a usage count short of the text USAGE-COMPLETION-TOKENS's;
FINISH-LENGTH judges only answers that kept to the limit, by counts it can trust.
"""

from __future__ import annotations

from typing import Any

from conformance.judging.checks.common import completion, declares, is_int, says
from conformance.judging.checks.logprobs_rules import (
    arrays,
    echoed,
    logprobs_objects,
    path_of,
    unrendered_end,
)
from conformance.judging.checks.semantics import (
    SPEC_TEXT,
    completion_part,
    declared_finish_reasons,
    finish_reasons,
    request_suffix,
    stops,
    suffix_appended,
)
from conformance.judging.checks.views import (
    Answer,
    Labelled,
    answer,
    answer_of,
    in_both_modes,
    judgeable,
    usage_of,
)
from conformance.judging.requirements import Context, Level, Violation, requirement

MUST = Level.MUST
USAGE_TEXT = "spec text: CompletionUsage"
#: Special tokens a server may add around a prompt: BOS/EOS (llama.cpp's add_bos_token,
#: vLLM's add_special_tokens for completions, TGI's BOS), a SentencePiece dummy-prefix
#: token, and the three fill-in-the-middle markers of a suffix request.
SPECIAL_TOKENS = 8


def max_tokens(ctx: Context) -> int | None:
    value = ctx.case.int_param("max_tokens")
    return value if value is not None and value >= 0 else None


def token_bound(ctx: Context) -> int | None:
    """The most completion tokens max_tokens allows over all choices (None: no max_tokens)."""
    limit = max_tokens(ctx)
    if limit is None:
        return None
    best_of = ctx.case.int_param("best_of")
    per_prompt = max(ctx.case.n, best_of if is_int(best_of) else 1)
    return limit * per_prompt * len(ctx.case.prompts)


def generated_counts(ctx: Context, choices: Labelled) -> list[tuple[str, dict[str, Any], int]]:
    """Per choice, the generated token count its logprobs show (none with echo)."""
    if echoed(ctx):
        return []
    out = []
    for name, choice, lp in logprobs_objects(choices):
        tokens = arrays(lp).get("tokens")
        if tokens is not None:
            out.append((name, choice, len(tokens)))
    return out


def single_choice_count(ctx: Context, ans: Answer) -> int | None:
    """completion_tokens when it counts exactly one choice's tokens (one prompt, n=1).

    A stream's usage counts only when include_usage asked for it: unasked, it may be a
    placeholder (LiteLLM puts zeros on every chunk), STREAM-USAGE-UNREQUESTED's finding.
    """
    best_of = ctx.case.int_param("best_of")
    if len(ctx.case.prompts) != 1 or ctx.case.n != 1 or (is_int(best_of) and best_of > 1):
        return None
    if ans.stream and not include_usage(ctx):
        return None
    done = (ans.usage or {}).get("completion_tokens")
    return done if is_int(done) else None


def overrun(ctx: Context, ans: Answer) -> Violation | None:
    """How the answer ran past max_tokens, or None when it kept to it."""
    limit, bound = max_tokens(ctx), token_bound(ctx)
    if limit is None or bound is None:
        return None
    done = (ans.usage or {}).get("completion_tokens")
    if is_int(done) and done > bound:
        return Violation(
            f"completion_tokens {done} exceeds the bound {bound} set by max_tokens={limit}",
            path="usage.completion_tokens",
            expected=bound,
            actual=done,
            witness="usage",
        )
    for name, choice, count in generated_counts(ctx, ans.choices):
        lp = choice["logprobs"]
        if count > limit and not (count == limit + 1 and unrendered_end(choice, lp["tokens"])):
            return Violation(
                f"{name} has {count} generated tokens, max_tokens is {limit}",
                path=f"{path_of(name)}.logprobs.tokens",
                expected=limit,
                actual=count,
                witness="logprobs",
            )
    if limit == 0:
        for name, choice in ans.choices:
            part = completion_part(ctx, choice)
            # The suffix alone appended is SUFFIX-ABSENT's: nothing was generated.
            if part and not (suffix_appended(ctx, choice) and part == request_suffix(ctx)):
                return Violation(
                    f"max_tokens=0 but {name} generated {len(part)} characters: {part[:40]!r}",
                    path=f"{path_of(name)}.text",
                    expected="" if not echoed(ctx) else "the prompt alone",
                    actual=choice.get("text"),
                )
    return None


def check_usage_total(usage: dict[str, Any], where: str = "usage") -> None:
    """Integer counts with total_tokens = prompt_tokens + completion_tokens."""
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if not all(is_int(p) and p >= 0 for p in parts):
        raise Violation(f"usage counts are not all non-negative integers: {usage}", path=where)
    prompt, done, total = parts
    if prompt + done != total:  # type: ignore[operator]
        raise Violation(
            f"total_tokens {total} != prompt_tokens {prompt} + completion_tokens {done}",
            path=f"{where}.total_tokens",
            expected=prompt + done,  # type: ignore[operator]
            actual=total,
        )


@requirement(
    "USAGE-TOTAL",
    level=MUST,
    area="semantics",
    statement="usage.total_tokens equals prompt_tokens + completion_tokens.",
    source=USAGE_TEXT + ".total_tokens (prompt + completion)",
    evidence="spec-text",
    stated=says("total_tokens", r"prompt \+ completion"),
    otherwise="openai-contract",
    applies=lambda ctx: completion(ctx) and usage_of(ctx.exchange.json) is not None,
)
def usage_total(ctx: Context) -> None:
    check_usage_total(usage_of(ctx.exchange.json) or {})


def _has_usage(ctx: Context) -> bool:
    """A usage to count: not the zeroed placeholder a stream carries unasked (LiteLLM puts
    ``{"prompt_tokens": 0, ...}`` on every chunk); that one defect is
    STREAM-USAGE-UNREQUESTED's. A zero usage that was asked for is judged (and fails)."""
    if not judgeable(ctx):
        return False
    usage = answer(ctx).usage
    if usage is None:
        return False
    return not (ctx.case.stream and not include_usage(ctx) and _zeroed(usage))


def include_usage(ctx: Context) -> bool:
    """The request asked for the usage chunk."""
    options = ctx.case.body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _zeroed(usage: dict[str, Any]) -> bool:
    counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    return all(c is None or (is_int(c) and c == 0) for c in counts)


def _prompt_span(prompt: Any, suffix: str) -> tuple[int, int] | None:
    """The fewest and most tokens a prompt (with the request's suffix) can count, or None.

    Lower side: a non-empty text counts at least one token, a token-id prompt its ids
    (servers pass ids through: vLLM, llama.cpp). Upper side: no tokenizer makes more
    tokens than UTF-8 bytes (byte fallback is one token per byte), plus SPECIAL_TOKENS.
    A suffix is part of what is counted: a fill-in-the-middle request is evaluated as
    prefix + suffix + markers (Ollama renders the model's FIM template from the prompt and
    the suffix: server/routes.go GenerateHandler, values.Prompt/values.Suffix; OpenAI's
    insert mode bills the suffix as prompt). What is NOT widened for: a chat template or
    system prompt wrapped around a plain prompt (Ollama's /v1/completions sends a
    GenerateRequest without raw, openai/openai.go FromCompleteRequest): then the model
    completed another prompt than the one sent, and this count is the client's only view
    of it (tests/transcripts/ollama/nonstream-no-logprobs-key.json). Echo changes nothing:
    it returns the prompt, it does not count it again.
    """
    extra = len(suffix.encode("utf-8"))
    if isinstance(prompt, str):
        size = len(prompt.encode("utf-8"))
        return (1 if prompt else 0), size + extra + SPECIAL_TOKENS
    if isinstance(prompt, list) and all(is_int(t) for t in prompt):
        return len(prompt), len(prompt) + extra + SPECIAL_TOKENS
    return None


@requirement(
    "USAGE-PROMPT-TOKENS",
    level=MUST,
    area="semantics",
    statement="usage.prompt_tokens is plausible for the prompts sent (a non-empty prompt "
    "counts at least one token, a token-array prompt at least its length, no prompt more "
    "than its UTF-8 bytes and its suffix's plus special tokens), and the same request "
    "counts the same prompt tokens streamed and not; prompt_tokens_details parts are at "
    "most prompt_tokens.",
    source=USAGE_TEXT + ".prompt_tokens (Number of tokens in the prompt)",
    evidence="spec-text",
    stated=says("prompt_tokens", r"tokens in the prompt"),
    otherwise="openai-contract",
    applies=_has_usage,
)
def usage_prompt_tokens(ctx: Context) -> None:
    usage = answer(ctx).usage or {}
    counted = usage.get("prompt_tokens")
    if not is_int(counted):
        return  # USAGE-TOTAL / STREAM-USAGE report a count that is not an integer
    check_breakdown(usage, "prompt")
    suffix = ctx.case.body.get("suffix")
    spans = [_prompt_span(p, suffix if isinstance(suffix, str) else "") for p in ctx.case.prompts]
    if all(s is not None for s in spans):
        low = sum(s[0] for s in spans if s)
        # Some servers count the prompt once per generated choice: allow n × best_of.
        best_of = ctx.case.int_param("best_of")
        copies = max(ctx.case.n, best_of if is_int(best_of) else 1)
        high = sum(s[1] for s in spans if s) * copies
        if not low <= counted <= high:
            raise Violation(
                f"prompt_tokens is {counted} for {len(spans)} prompt(s) that count between "
                f"{low} and {high} tokens",
                path="usage.prompt_tokens",
                expected=[low, high],
                actual=counted,
            )
    for twin in ctx.related:
        keys = ("prompt", "n", "best_of", "model")
        if any(twin.case.body.get(k) != ctx.case.body.get(k) for k in keys):
            continue
        if twin.status != 200:
            continue
        theirs = (answer_of(twin).usage or {}).get("prompt_tokens")
        if is_int(theirs) and theirs != counted:
            mode = "streamed" if twin.case.stream else "non-streamed"
            raise Violation(
                f"prompt_tokens is {counted} here but {theirs} for the same prompt {mode}",
                path="usage.prompt_tokens",
                expected=theirs,
                actual=counted,
            )


@requirement(
    "USAGE-COMPLETION-TOKENS",
    level=MUST,
    area="semantics",
    statement="usage.completion_tokens is at least what the choices visibly generated: "
    "their logprobs tokens, and one token per choice with generated text (both modes); "
    "completion_tokens_details parts are at most completion_tokens.",
    source=USAGE_TEXT + ".completion_tokens (Number of tokens in the generated completion)",
    evidence="spec-text",
    stated=says("completion_tokens", r"tokens in the generated completion"),
    otherwise="openai-contract",
    applies=_has_usage,
)
def usage_completion_tokens(ctx: Context) -> None:
    check_breakdown(answer(ctx).usage or {}, "completion")
    problem = undercount(ctx, answer(ctx))
    if problem is not None:
        raise problem


def check_breakdown(usage: dict[str, Any], kind: str) -> None:
    """Each part of ``<kind>_tokens_details`` is a count no larger than the whole."""
    whole, details = usage.get(f"{kind}_tokens"), usage.get(f"{kind}_tokens_details")
    if not is_int(whole) or not isinstance(details, dict):
        return
    for key, part in details.items():
        if is_int(part) and not 0 <= part <= whole:
            raise Violation(
                f"usage.{kind}_tokens_details.{key} is {part}, outside 0..{kind}_tokens "
                f"({whole}): a breakdown cannot exceed its total",
                path=f"usage.{kind}_tokens_details.{key}",
                expected=f"0..{whole}",
                actual=part,
            )


def visible_tokens(ctx: Context, ans: Answer, *, by_logprobs: bool = True) -> int:
    """The fewest tokens the choices visibly generated: logprobs tokens (an end-of-text
    token aside; not with ``by_logprobs=False``), else one per choice with generated text."""
    counted: dict[str, int] = {}
    for name, choice, count in generated_counts(ctx, ans.choices) if by_logprobs else []:
        end = unrendered_end(choice, choice["logprobs"]["tokens"])
        counted[name] = count - 1 if end else count
    for name, choice in ans.choices:
        if name not in counted and completion_part(ctx, choice):
            counted[name] = 1
    return sum(counted.values())


def undercount(ctx: Context, ans: Answer) -> Violation | None:
    """How usage.completion_tokens falls short of what the choices show, or None."""
    done = (ans.usage or {}).get("completion_tokens")
    if not is_int(done):
        return None  # USAGE-TOTAL / STREAM-USAGE report a count that is not an integer
    seen = visible_tokens(ctx, ans)
    if done >= seen:
        return None
    # Short of the text alone, the finding needs no logprobs; else it rests on them.
    by_text = done < visible_tokens(ctx, ans, by_logprobs=False)
    return Violation(
        f"completion_tokens is {done}, but the choices visibly generated at least {seen} token(s)",
        path="usage.completion_tokens",
        expected=f">= {seen}",
        actual=done,
        witness=None if by_text else "logprobs",
    )


@in_both_modes(
    "USAGE-MAX-TOKENS",
    "STREAM-MAX-TOKENS",
    level=MUST,
    statement="No choice generates more than max_tokens tokens: completion_tokens <= "
    "max_tokens × choices (× best_of candidates), per choice where logprobs show it, and "
    "nothing beyond the echoed prompt for max_tokens 0.",
    source=SPEC_TEXT + ".max_tokens",
    evidence="spec-text",
    stated=says("max_tokens", r"maximum number of .{0,40}tokens.{0,60}generated"),
    otherwise="openai-contract",
    scope=declares("max_tokens"),
    when=lambda ctx: token_bound(ctx) is not None,
)
def usage_max_tokens(ctx: Context, ans: Answer) -> None:
    problem = overrun(ctx, ans)
    if problem is not None:
        raise problem


def _limit_witness(ctx: Context, choice: dict[str, Any], by_usage: bool) -> str | None:
    """What a finding that max_tokens was reached rests on: the count it read (usage or
    logprobs); for max_tokens 0 nothing, unless the text cannot show what was generated (an
    echoed token-id prompt). There a "stop" may be the model stopping after max_tokens 0
    was ignored, (STREAM-)USAGE-MAX-TOKENS' defect where other answers show it."""
    if max_tokens(ctx) != 0:
        return "usage" if by_usage else "logprobs"
    return "max-tokens-0" if completion_part(ctx, choice) is None else None


@in_both_modes(
    "FINISH-LENGTH",
    "STREAM-FINISH-LENGTH",
    level=MUST,
    statement='A choice that generated max_tokens tokens finishes with "length", and one '
    "that generated fewer does not (measured where logprobs or a one-choice usage show the "
    "count, and for max_tokens 0).",
    source="spec: finish_reason (`length` if the maximum number of tokens specified in the "
    "request was reached)",
    evidence="spec-text",
    stated=says("finish_reason", r"`length` if the maximum number of tokens"),
    otherwise="openai-contract",
    scope=declares("max_tokens"),
    when=lambda ctx: max_tokens(ctx) is not None,
)
def finish_length(ctx: Context, ans: Answer) -> None:
    if overrun(ctx, ans) is not None:
        return  # USAGE-MAX-TOKENS / STREAM-MAX-TOKENS own an ignored max_tokens
    limit = max_tokens(ctx)
    assert limit is not None
    # A choice that never finished is STREAM-FINISH's, not a wrong finish_reason.
    finished = [(n, c) for n, c in ans.choices if c.get("finish_reason") is not None]
    counts = {name: count for name, _, count in generated_counts(ctx, finished)}
    # A usage count that falls short of the text is USAGE-COMPLETION-TOKENS's: not a measure.
    single = single_choice_count(ctx, ans) if undercount(ctx, ans) is None else None
    by_usage = ""
    if single is not None and len(finished) == 1 and finished[0][0] not in counts:
        by_usage = finished[0][0]
        counts[by_usage] = single
    allowed = finish_reasons(ctx.spec) + declared_finish_reasons(ctx.spec.stream_chunk_schema)
    for name, choice in finished:
        reason, count = choice.get("finish_reason"), counts.get(name)
        if allowed and reason not in allowed:
            continue  # a value outside the enum is FINISH-ENUM's finding
        reached = limit == 0 or (count is not None and count >= limit)
        where = f"{path_of(name)}.finish_reason"
        if reached and reason != "length":
            # A stop sequence found inside the last allowed token ends the choice with
            # "stop" (OpenAI does so), and so does an end-of-text token listed in logprobs.
            # A usage count alone cannot show that token: llama.cpp counts the end-of-text
            # it sampled as the max_tokens-th token and rightly says "stop".
            lp = choice.get("logprobs")
            tokens = arrays(lp).get("tokens", []) if isinstance(lp, dict) else []
            hidden_end = name == by_usage and count == limit
            ended = stops(ctx) or unrendered_end(choice, tokens) or hidden_end
            if reason == "stop" and limit > 0 and ended:
                continue
            what = "max_tokens=0" if limit == 0 else f"max_tokens={limit} ({count} tokens)"
            raise Violation(
                f'{name} reached {what} but finish_reason is {reason!r}, not "length"',
                path=where,
                expected="length",
                actual=reason,
                witness=_limit_witness(ctx, choice, name == by_usage),
            )
        if reason == "length" and count is not None and count < limit:
            raise Violation(
                f'{name} finished with "length" after {count} token(s), below max_tokens={limit}',
                path=where,
                actual=reason,
                witness="usage" if name == by_usage else "logprobs",
            )
