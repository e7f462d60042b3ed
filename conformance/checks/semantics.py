"""Request-aware requirements: does the completion answer the request that was sent?

Rules judged in both modes (a body, or the choices assembled from a stream) are written
once as ``rule(ctx, answer)`` and registered under both IDs by ``in_both_modes``
(views.py). Quantities the request makes measurable are checked from both sides: the
token counts (at most what max_tokens allows, at least what the choices visibly hold),
the finish reason ("length" when max_tokens was reached, and only then).

One defect, one finding: a choice that ran past max_tokens is USAGE-MAX-TOKENS's (or
STREAM-MAX-TOKENS's) alone; FINISH-LENGTH judges only answers that kept to the limit.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.common import (
    check_created,
    check_id,
    choices_of,
    completion,
    declares,
    is_int,
)
from conformance.checks.logprobs import arrays, echoed, logprobs_objects, path_of, unrendered_end
from conformance.checks.views import (
    Answer,
    Labelled,
    answer,
    answer_of,
    by_index,
    expected_choices,
    in_both_modes,
    judgeable,
    labelled,
    usage_of,
)
from conformance.requirements import Context, Level, Unsupported, Violation, requirement
from conformance.spec import Schema, Spec

MUST, SHOULD, CAPABILITY = Level.MUST, Level.SHOULD, Level.CAPABILITY
SPEC_TEXT = "spec text: CreateCompletionRequest"
USAGE_TEXT = "spec text: CompletionUsage"
#: Special tokens a server may add around a prompt (BOS, EOS, separators).
SPECIAL_TOKENS = 8


def finish_reasons(spec: Spec) -> tuple[str, ...]:
    """The finish_reason enum the spec declares for choices (empty when it has none)."""
    return declared_finish_reasons(spec.response_schema)


def declared_finish_reasons(schema: Schema | None) -> tuple[str, ...]:
    """The finish_reason enum a completion or chunk schema declares (empty when none)."""
    items = ((schema or {}).get("properties") or {}).get("choices", {}).get("items")
    field = ((items or {}).get("properties") or {}).get("finish_reason") or {}
    for branch in [field, *field.get("anyOf", [])]:
        if isinstance(branch, dict) and "enum" in branch:
            return tuple(v for v in branch["enum"] if v is not None)
    return ()


def prompt_of(ctx: Context, choice: dict[str, Any]) -> Any:
    index = choice.get("index")
    prompts = ctx.case.prompts
    if not is_int(index) or not 0 <= index // ctx.case.n < len(prompts):
        return None
    return prompts[index // ctx.case.n]


def completion_part(ctx: Context, choice: dict[str, Any]) -> str | None:
    """The generated part of a choice's text; None when an echoed prompt cannot be cut off."""
    text = choice.get("text")
    if not isinstance(text, str):
        return None
    if not echoed(ctx):
        return text
    prompt = prompt_of(ctx, choice)
    if isinstance(prompt, str) and text.startswith(prompt):
        return text[len(prompt) :]
    return None


def choices_placed(ctx: Context) -> bool:
    """Choices number prompts × n with indexes 0..k-1, so index // n names the prompt.

    Otherwise CHOICES-COUNT / CHOICES-INDEX report the defect, and a per-prompt check
    would only blame the wrong prompt.
    """
    if ctx.case.stream:
        return by_index(ctx)
    indexes = [c.get("index") for c in choices_of(ctx.exchange.json)]
    return sorted(i for i in indexes if is_int(i)) == list(range(expected_choices(ctx)))


def stops(ctx: Context) -> list[str]:
    """The request's stop sequences that a server can match.

    A sequence holding U+FFFD is left out: servers print that character for bytes that are
    not UTF-8, so it can stand in a text without the model ever producing it, and a server
    rightly never matches it (seen on llama.cpp's server, docs/real-targets.md).
    """
    stop = ctx.case.body.get("stop")
    listed = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return [s for s in listed if isinstance(s, str) and s and "\ufffd" not in s]


def max_tokens(ctx: Context) -> int | None:
    value = ctx.case.body.get("max_tokens")
    return value if is_int(value) and value >= 0 else None


def token_bound(ctx: Context) -> int | None:
    """The most completion tokens max_tokens allows over all choices (None: no max_tokens)."""
    limit = max_tokens(ctx)
    if limit is None:
        return None
    best_of = ctx.case.body.get("best_of")
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
    """completion_tokens when it counts exactly one choice's tokens (one prompt, n=1)."""
    best_of = ctx.case.body.get("best_of")
    if len(ctx.case.prompts) != 1 or ctx.case.n != 1 or (is_int(best_of) and best_of > 1):
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
        )
    for name, choice, count in generated_counts(ctx, ans.choices):
        lp = choice["logprobs"]
        if count > limit and not (count == limit + 1 and unrendered_end(choice, lp["tokens"])):
            return Violation(
                f"{name} has {count} generated tokens, max_tokens is {limit}",
                path=f"{path_of(name)}.logprobs.tokens",
                expected=limit,
                actual=count,
            )
    if limit == 0:
        for name, choice in ans.choices:
            part = completion_part(ctx, choice)
            if part:
                return Violation(
                    f"max_tokens=0 but {name} generated {len(part)} characters: {part[:40]!r}",
                    path=f"{path_of(name)}.text",
                    expected="" if not echoed(ctx) else "the prompt alone",
                    actual=choice.get("text"),
                )
    return None


@requirement(
    "RESP-CREATED",
    level=MUST,
    area="semantics",
    statement="`created` is a plausible Unix time in seconds.",
    source="spec: CreateCompletionResponse.created (The Unix timestamp (in seconds))",
    evidence="spec-text",
    applies=completion,
)
def response_created(ctx: Context) -> None:
    check_created(ctx.exchange.json, ctx.now)


@requirement(
    "RESP-ID",
    level=MUST,
    area="semantics",
    statement="`id` is a non-empty string.",
    source="spec: CreateCompletionResponse.id (A unique identifier for the completion)",
    evidence="spec-text",
    applies=completion,
)
def response_id(ctx: Context) -> None:
    check_id(ctx.exchange.json)


@requirement(
    "CHOICES-COUNT",
    level=MUST,
    area="semantics",
    statement="A completion has one choice per prompt per `n`: prompts × n choices.",
    source=SPEC_TEXT + ".n (How many completions to generate for each prompt)",
    evidence="spec-text",
    applies=completion,
)
def choices_count(ctx: Context) -> None:
    got, want = len(choices_of(ctx.exchange.json)), expected_choices(ctx)
    if got != want:
        raise Violation(
            f"{got} choice(s) for {len(ctx.case.prompts)} prompt(s) × n={ctx.case.n}: "
            f"expected {want}",
            path="choices",
            expected=want,
            actual=got,
        )


@requirement(
    "CHOICES-INDEX",
    level=MUST,
    area="semantics",
    statement="Choice indexes are 0..k-1, each exactly once.",
    source="OpenAI clients place choices by index (prompt = index // n)",
    evidence="client-visible",
    applies=completion,
)
def choices_index(ctx: Context) -> None:
    indexes = [c.get("index") for c in choices_of(ctx.exchange.json)]
    if sorted(i for i in indexes if is_int(i)) != list(range(len(indexes))):
        raise Violation(
            f"choice indexes are {indexes}, expected each of 0..{len(indexes) - 1} once",
            path="choices[].index",
            actual=indexes,
        )


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
    applies=lambda ctx: completion(ctx) and usage_of(ctx.exchange.json) is not None,
)
def usage_total(ctx: Context) -> None:
    check_usage_total(usage_of(ctx.exchange.json) or {})


def _has_usage(ctx: Context) -> bool:
    return judgeable(ctx) and answer(ctx).usage is not None


def _prompt_span(prompt: Any) -> tuple[int, int] | None:
    """The fewest and most tokens a prompt can count, or None when unknown."""
    if isinstance(prompt, str):
        size = len(prompt.encode("utf-8"))
        return (1 if prompt else 0), size + SPECIAL_TOKENS
    if isinstance(prompt, list) and all(is_int(t) for t in prompt):
        return len(prompt), len(prompt) + SPECIAL_TOKENS
    return None


@requirement(
    "USAGE-PROMPT-TOKENS",
    level=MUST,
    area="semantics",
    statement="usage.prompt_tokens is plausible for the prompts sent (a non-empty prompt "
    "counts at least one token, a token-array prompt at least its length, no prompt more "
    "than its UTF-8 bytes plus special tokens), and the same request counts the same prompt "
    "tokens streamed and not.",
    source=USAGE_TEXT + ".prompt_tokens (Number of tokens in the prompt)",
    evidence="spec-text",
    applies=_has_usage,
)
def usage_prompt_tokens(ctx: Context) -> None:
    usage = answer(ctx).usage or {}
    counted = usage.get("prompt_tokens")
    if not is_int(counted):
        return  # USAGE-TOTAL / STREAM-USAGE report a count that is not an integer
    spans = [_prompt_span(p) for p in ctx.case.prompts]
    if all(s is not None for s in spans):
        low = sum(s[0] for s in spans if s)
        # Some servers count the prompt once per generated choice: allow n × best_of.
        best_of = ctx.case.body.get("best_of")
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
    "their logprobs tokens, and one token per choice with generated text (both modes).",
    source=USAGE_TEXT + ".completion_tokens (Number of tokens in the generated completion)",
    evidence="spec-text",
    applies=_has_usage,
)
def usage_completion_tokens(ctx: Context) -> None:
    problem = undercount(ctx, answer(ctx))
    if problem is not None:
        raise problem


def visible_tokens(ctx: Context, ans: Answer) -> int:
    """The fewest tokens the choices visibly generated: logprobs tokens (an end-of-text
    token aside), else one per choice with generated text."""
    counted: dict[str, int] = {}
    for name, choice, count in generated_counts(ctx, ans.choices):
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
    return Violation(
        f"completion_tokens is {done}, but the choices visibly generated at least {seen} token(s)",
        path="usage.completion_tokens",
        expected=f">= {seen}",
        actual=done,
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
    scope=declares("max_tokens"),
    when=lambda ctx: token_bound(ctx) is not None,
)
def usage_max_tokens(ctx: Context, ans: Answer) -> None:
    problem = overrun(ctx, ans)
    if problem is not None:
        raise problem


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
    if single is not None and len(finished) == 1 and finished[0][0] not in counts:
        counts[finished[0][0]] = single
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
            lp = choice.get("logprobs")
            tokens = arrays(lp).get("tokens", []) if isinstance(lp, dict) else []
            if reason == "stop" and limit > 0 and (stops(ctx) or unrendered_end(choice, tokens)):
                continue
            what = "max_tokens=0" if limit == 0 else f"max_tokens={limit} ({count} tokens)"
            raise Violation(
                f'{name} reached {what} but finish_reason is {reason!r}, not "length"',
                path=where,
                expected="length",
                actual=reason,
            )
        if reason == "length" and count is not None and count < limit:
            raise Violation(
                f'{name} finished with "length" after {count} token(s), below max_tokens={limit}',
                path=where,
                actual=reason,
            )


@requirement(
    "FINISH-ENUM",
    level=MUST,
    area="semantics",
    statement="finish_reason is one of the values the spec's enum allows.",
    source="spec: choices[].finish_reason enum",
    evidence="spec-schema",
    scope=lambda spec: None if finish_reasons(spec) else "the spec declares no finish_reason enum",
    applies=lambda ctx: completion(ctx) and bool(finish_reasons(ctx.spec)),
)
def finish_enum(ctx: Context) -> None:
    check_finish_enum(finish_reasons(ctx.spec), labelled(ctx.exchange.json))


def check_finish_enum(allowed: tuple[str, ...], choices: Labelled) -> None:
    """Every non-null finish_reason is one of ``allowed``."""
    for name, choice in choices:
        reason = choice.get("finish_reason")
        if reason is not None and reason not in allowed:
            raise Violation(
                f"{name}.finish_reason is {reason!r}, not one of {list(allowed)}",
                path=f"{path_of(name)}.finish_reason",
                expected=list(allowed),
                actual=reason,
            )


@in_both_modes(
    "ECHO-PREFIX",
    "STREAM-ECHO-PREFIX",
    level=MUST,
    statement="With echo, each choice's text starts with its prompt.",
    source=SPEC_TEXT + ".echo (Echo back the prompt in addition to the completion)",
    evidence="spec-text",
    scope=declares("echo"),
    when=lambda ctx: (
        echoed(ctx) and all(isinstance(p, str) for p in ctx.case.prompts) and choices_placed(ctx)
    ),
)
def echo_prefix(ctx: Context, ans: Answer) -> None:
    for name, choice in ans.choices:
        prompt, text = prompt_of(ctx, choice), choice.get("text")
        if isinstance(prompt, str) and isinstance(text, str) and not text.startswith(prompt):
            raise Violation(
                f"{name}.text {text[:60]!r} does not start with the prompt {prompt[:60]!r}",
                path=f"{path_of(name)}.text",
                expected=prompt[:60],
                actual=text[:60],
            )


@in_both_modes(
    "STOP-ABSENT",
    "STREAM-STOP-ABSENT",
    level=MUST,
    statement="No stop sequence appears in a returned completion.",
    source="spec: StopConfiguration (The returned text will not contain the stop sequence)",
    evidence="spec-text",
    scope=declares("stop"),
    when=lambda ctx: bool(stops(ctx)),
)
def stop_absent(ctx: Context, ans: Answer) -> None:
    for name, choice in ans.choices:
        text = completion_part(ctx, choice)
        for stop in stops(ctx):
            if text is not None and stop in text:
                raise Violation(
                    f"{name}.text contains the stop sequence {stop!r}",
                    path=f"{path_of(name)}.text",
                    actual=stop,
                )


@requirement(
    "STOP-PROBE",
    level=SHOULD,
    area="semantics",
    statement="At temperature 0 with a fixed seed, a stop sequence taken from a first answer "
    'ends the second answer just before it, with finish_reason "stop".',
    source="spec: StopConfiguration; determinism is best effort (seed), hence SHOULD",
    evidence="spec-text",
    scope=declares("stop"),
    applies=lambda ctx: (
        completion(ctx) and "probe:stop" in ctx.case.tags and bool(ctx.related) and bool(stops(ctx))
    ),
)
def stop_probe(ctx: Context) -> None:
    first = choices_of(ctx.related[0].json)
    first_text = first[0].get("text") if first else None
    stop = stops(ctx)[0]
    if not isinstance(first_text, str) or stop not in first_text:
        return  # the first answer changed shape: nothing to compare
    choices = choices_of(ctx.exchange.json)
    if not choices:
        raise Violation("the probe's answer has no choice", path="choices")
    want = first_text[: first_text.index(stop)]
    got, reason = choices[0].get("text"), choices[0].get("finish_reason")
    if got != want or reason != "stop":
        raise Violation(
            f"with stop={stop!r} expected text {want!r} and finish_reason 'stop', got {got!r} "
            f"and {reason!r}",
            path="choices[0]",
            expected={"text": want, "finish_reason": "stop"},
            actual={"text": got, "finish_reason": reason},
        )


def _valid(ctx: Context) -> bool:
    """A schema-valid request sent with the run's credentials (auth probes are not)."""
    case = ctx.case
    return (
        case.mode in ("valid", "edge", "probe")
        and case.auth == "default"
        and ctx.exchange.status is not None
    )


@requirement(
    "VALID-NO-5XX",
    level=MUST,
    area="semantics",
    statement="A schema-valid request is never answered with a 5xx.",
    source="spec: a schema-valid request gets 200 or a declared 4xx; the openai SDK raises "
    "InternalServerError on a 5xx",
    evidence="client-visible",
    applies=_valid,
)
def valid_no_5xx(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if status >= 500:
        raise Violation(f"schema-valid request answered {status}", actual=status)


@requirement(
    "VALID-ACCEPTED",
    level=CAPABILITY,
    area="semantics",
    statement="A schema-valid request is served (200); a proper 4xx means the target does "
    "not offer a declared feature.",
    source="spec: every declared parameter; capability table per parameter",
    evidence="spec-schema",
    applies=_valid,
)
def valid_accepted(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if 400 <= status < 500 and status != 429:
        features = ", ".join(sorted(ctx.case.tags)) or "the request"
        raise Unsupported(f"declined with {status}: {features}")
