"""Request-aware requirements: does the completion answer the request that was sent?

The rules themselves are the ``check_*`` helpers, which judge a list of *labelled*
choices (a choice with the name a message gives it). The requirements here hand them
the choices of a non-streamed body; ``streaming.py`` hands them the choices it
assembles from a stream, so both modes are judged by the same logic.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.common import choices_of, completion, is_int
from conformance.checks.errors import UNKNOWN_MODEL_TAG
from conformance.requirements import Context, Level, Unsupported, Violation, requirement
from conformance.spec import Schema, Spec

MUST, SHOULD, CAPABILITY = Level.MUST, Level.SHOULD, Level.CAPABILITY
SPEC_TEXT = "spec text: CreateCompletionRequest"

#: Choices with the name a message calls them by (``choices[0]``, ``streamed choices[0]``).
Labelled = list[tuple[str, dict[str, Any]]]


def labelled(body: Any, prefix: str = "choices") -> Labelled:
    """The choice objects of a body, named ``<prefix>[i]`` by position."""
    if not isinstance(body, dict):
        return []
    return [(f"{prefix}[{i}]", c) for i, c in enumerate(choices_of(body))]


def _body_choices(ctx: Context) -> Labelled:
    return labelled(ctx.exchange.json)


def finish_reasons(spec: Spec) -> tuple[str, ...]:
    """The finish_reason enum the spec declares for choices (empty when it has none)."""
    return declared_finish_reasons(spec.response_schema)


def declared_finish_reasons(schema: Schema | None) -> tuple[str, ...]:
    """The finish_reason enum a completion or chunk schema declares (empty when none)."""
    items = ((schema or {}).get("properties") or {}).get("choices", {}).get("items")
    field = ((items or {}).get("properties") or {}).get("finish_reason") or {}
    for branch in [field, *field.get("anyOf", [])]:
        if "enum" in branch:
            return tuple(v for v in branch["enum"] if v is not None)
    return ()


def requested_logprobs(body: dict[str, Any]) -> int | None:
    value = body.get("logprobs")
    return value if is_int(value) else None


def expected_choices(ctx: Context) -> int:
    return len(ctx.case.prompts) * ctx.case.n


def completion_part(ctx: Context, choice: dict[str, Any]) -> str | None:
    """The generated part of a choice's text; None when an echoed prompt cannot be cut off."""
    text = choice.get("text")
    if not isinstance(text, str):
        return None
    if ctx.case.body.get("echo") is not True:
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
    indexes = [c.get("index") for c in choices_of(ctx.exchange.json)]
    return sorted(i for i in indexes if is_int(i)) == list(range(expected_choices(ctx)))


def prompt_of(ctx: Context, choice: dict[str, Any]) -> Any:
    index = choice.get("index")
    prompts = ctx.case.prompts
    if not is_int(index) or not 0 <= index // ctx.case.n < len(prompts):
        return None
    return prompts[index // ctx.case.n]


def stops(ctx: Context) -> list[str]:
    """The request's stop sequences that a server can match.

    A sequence holding U+FFFD is left out: servers print that character for bytes that are
    not UTF-8, so it can stand in a text without the model ever producing it, and a server
    rightly never matches it (seen on llama.cpp's server, docs/real-targets.md).
    """
    stop = ctx.case.body.get("stop")
    listed = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return [s for s in listed if isinstance(s, str) and s and "\ufffd" not in s]


def logprobs_objects(choices: Labelled) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The choices that carry a logprobs object, with that object."""
    return [(name, c, c["logprobs"]) for name, c in choices if isinstance(c.get("logprobs"), dict)]


def _has_logprobs(ctx: Context) -> bool:
    return completion(ctx) and bool(logprobs_objects(_body_choices(ctx)))


@requirement(
    "CHOICES-COUNT",
    level=MUST,
    area="semantics",
    statement="A completion has one choice per prompt per `n`: prompts × n choices.",
    source=SPEC_TEXT + ".n (How many completions to generate for each prompt)",
    applies=completion,
)
def choices_count(ctx: Context) -> None:
    got, want = len(choices_of(ctx.exchange.json)), expected_choices(ctx)
    if got != want:
        raise Violation(
            f"{got} choice(s) for {len(ctx.case.prompts)} prompt(s) × n={ctx.case.n}: "
            f"expected {want}"
        )


@requirement(
    "CHOICES-INDEX",
    level=MUST,
    area="semantics",
    statement="Choice indexes are 0..k-1, each exactly once.",
    source="OpenAI behaviour: clients place choices by index",
    applies=completion,
)
def choices_index(ctx: Context) -> None:
    indexes = [c.get("index") for c in choices_of(ctx.exchange.json)]
    if sorted(i for i in indexes if is_int(i)) != list(range(len(indexes))):
        raise Violation(
            f"choice indexes are {indexes}, expected each of 0..{len(indexes) - 1} once"
        )


def _usage(ctx: Context) -> dict[str, Any] | None:
    usage = ctx.exchange.json.get("usage")
    return usage if isinstance(usage, dict) else None


@requirement(
    "USAGE-TOTAL",
    level=MUST,
    area="semantics",
    statement="usage.total_tokens equals prompt_tokens + completion_tokens.",
    source="spec: CompletionUsage.total_tokens (prompt + completion)",
    applies=lambda ctx: completion(ctx) and _usage(ctx) is not None,
)
def usage_total(ctx: Context) -> None:
    check_usage_total(_usage(ctx) or {})


def check_usage_total(usage: dict[str, Any]) -> None:
    """Integer counts with total_tokens = prompt_tokens + completion_tokens."""
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if not all(is_int(p) for p in parts):
        raise Violation(f"usage counts are not all integers: {usage}")
    prompt, done, total = parts
    if prompt + done != total:  # type: ignore[operator]
        raise Violation(
            f"total_tokens {total} != prompt_tokens {prompt} + completion_tokens {done}"
        )


def token_bound(ctx: Context) -> int | None:
    """The most completion tokens max_tokens allows over all choices (None: no max_tokens)."""
    max_tokens = ctx.case.body.get("max_tokens")
    if not is_int(max_tokens):
        return None
    best_of = ctx.case.body.get("best_of")
    per_prompt = max(ctx.case.n, best_of if is_int(best_of) else 1)
    return int(max_tokens) * per_prompt * len(ctx.case.prompts)


@requirement(
    "USAGE-MAX-TOKENS",
    level=MUST,
    area="semantics",
    statement="No choice generates more than max_tokens tokens: completion_tokens <= "
    "max_tokens × choices (× best_of candidates), and per choice where logprobs show it.",
    source=SPEC_TEXT + ".max_tokens",
    applies=lambda ctx: completion(ctx) and token_bound(ctx) is not None,
)
def usage_max_tokens(ctx: Context) -> None:
    check_max_tokens(ctx, _usage(ctx), _body_choices(ctx))


def check_max_tokens(ctx: Context, usage: dict[str, Any] | None, choices: Labelled) -> None:
    """completion_tokens within the bound, and no choice longer than max_tokens."""
    bound = token_bound(ctx)
    assert bound is not None
    done = (usage or {}).get("completion_tokens")
    if is_int(done) and done > bound:
        raise Violation(f"completion_tokens {done} exceeds the bound {bound} set by max_tokens")
    limit = ctx.case.body["max_tokens"]
    for name, _, count in generated_counts(ctx, choices):
        if count > limit:
            raise Violation(f"{name} has {count} generated tokens, max_tokens is {limit}")


def generated_counts(ctx: Context, choices: Labelled) -> list[tuple[str, dict[str, Any], int]]:
    """Per choice, the generated token count shown by its logprobs (no echo)."""
    if ctx.case.body.get("echo") is True:
        return []
    return [
        (name, choice, len(lp["tokens"]))
        for name, choice, lp in logprobs_objects(choices)
        if isinstance(lp.get("tokens"), list)
    ]


@requirement(
    "FINISH-LENGTH",
    level=MUST,
    area="semantics",
    statement='A choice that generated max_tokens tokens finishes with "length" (measured '
    "where logprobs show the count, and for max_tokens 0).",
    source="spec: finish_reason (`length` if the maximum number of tokens was reached)",
    applies=lambda ctx: completion(ctx) and is_int(ctx.case.body.get("max_tokens")),
)
def finish_length(ctx: Context) -> None:
    check_finish_length(ctx, _body_choices(ctx))


def check_finish_length(ctx: Context, choices: Labelled) -> None:
    """Choices that generated max_tokens tokens (all of them for 0) finish with "length"."""
    limit = ctx.case.body["max_tokens"]
    hit = [(name, c) for name, c, count in generated_counts(ctx, choices) if count >= limit]
    if limit == 0:
        hit = list(choices)
    for name, choice in hit:
        reason = choice.get("finish_reason")
        # A stop sequence found inside the last allowed token ends the choice with "stop"
        # at exactly max_tokens tokens (OpenAI does so); that is no violation.
        if reason == "stop" and stops(ctx) and limit > 0:
            continue
        if reason != "length":
            raise Violation(
                f'{name} reached max_tokens={limit} but finish_reason is {reason!r}, not "length"'
            )


@requirement(
    "FINISH-ENUM",
    level=MUST,
    area="semantics",
    statement="finish_reason is one of the values the spec's enum allows.",
    source="spec: choices[].finish_reason enum",
    applies=lambda ctx: completion(ctx) and bool(finish_reasons(ctx.spec)),
)
def finish_enum(ctx: Context) -> None:
    check_finish_enum(finish_reasons(ctx.spec), _body_choices(ctx))


def check_finish_enum(allowed: tuple[str, ...], choices: Labelled) -> None:
    """Every non-null finish_reason is one of ``allowed``."""
    for name, choice in choices:
        reason = choice.get("finish_reason")
        if reason is not None and reason not in allowed:
            raise Violation(f"{name}.finish_reason is {reason!r}, not one of {list(allowed)}")


@requirement(
    "ECHO-PREFIX",
    level=MUST,
    area="semantics",
    statement="With echo, each choice's text starts with its prompt.",
    source=SPEC_TEXT + ".echo (Echo back the prompt in addition to the completion)",
    applies=lambda ctx: (
        completion(ctx)
        and ctx.case.body.get("echo") is True
        and all(isinstance(p, str) for p in ctx.case.prompts)
        and choices_placed(ctx)
    ),
)
def echo_prefix(ctx: Context) -> None:
    check_echo_prefix(ctx, _body_choices(ctx))


def check_echo_prefix(ctx: Context, choices: Labelled) -> None:
    """Each choice's text starts with its prompt."""
    for name, choice in choices:
        prompt, text = prompt_of(ctx, choice), choice.get("text")
        if isinstance(prompt, str) and isinstance(text, str) and not text.startswith(prompt):
            raise Violation(
                f"{name}.text {text[:60]!r} does not start with the prompt {prompt[:60]!r}"
            )


@requirement(
    "LOGPROBS-PRESENCE",
    level=MUST,
    area="semantics",
    statement="Each choice carries a logprobs object when logprobs >= 1 is requested, and "
    "none (null or absent) when logprobs is not requested.",
    source=SPEC_TEXT + ".logprobs",
    applies=lambda ctx: completion(ctx) and requested_logprobs(ctx.case.body) != 0,
)
def logprobs_presence(ctx: Context) -> None:
    check_logprobs_presence(ctx, _body_choices(ctx))


def check_logprobs_presence(ctx: Context, choices: Labelled) -> None:
    """A logprobs object on every choice when requested (>= 1), on none when not."""
    wanted = requested_logprobs(ctx.case.body)
    for name, choice in choices:
        has = isinstance(choice.get("logprobs"), dict)
        if wanted and not has:
            raise Violation(
                f"logprobs={wanted} requested but {name}.logprobs is {choice.get('logprobs')!r}"
            )
        if wanted is None and has:
            raise Violation(f"logprobs not requested but {name} carries a logprobs object")


@requirement(
    "LOGPROBS-SHAPE",
    level=MUST,
    area="semantics",
    statement="logprobs is the completions shape: tokens, token_logprobs, top_logprobs and "
    "text_offset arrays with one entry per token.",
    source="OpenAI behaviour: parallel arrays in the legacy logprobs object",
    applies=_has_logprobs,
)
def logprobs_shape(ctx: Context) -> None:
    check_logprobs_shape(_body_choices(ctx))


def check_logprobs_shape(choices: Labelled) -> None:
    """The legacy logprobs object: parallel arrays of equal lengths (not the chat shape)."""
    for name, _, lp in logprobs_objects(choices):
        missing = [k for k in ("tokens", "token_logprobs") if not isinstance(lp.get(k), list)]
        if missing:
            shape = " (the chat shape {content: [...]})" if "content" in lp else ""
            raise Violation(f"{name}.logprobs lacks {', '.join(missing)}{shape}")
        lengths = {
            k: len(lp[k])
            for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")
            if isinstance(lp.get(k), list)
        }
        if len(set(lengths.values())) > 1:
            raise Violation(f"{name}.logprobs arrays differ in length: {lengths}")


def _echoed_first(ctx: Context, j: int) -> bool:
    """The first token of an echoed prompt has no logprob (OpenAI sends null)."""
    return j == 0 and ctx.case.body.get("echo") is True


@requirement(
    "LOGPROBS-VALUES",
    level=MUST,
    area="semantics",
    statement="Every logprob is a number <= 0; null only for the first echoed token.",
    source="probability theory; OpenAI behaviour for echo",
    applies=_has_logprobs,
)
def logprobs_values(ctx: Context) -> None:
    check_logprobs_values(ctx, _body_choices(ctx))


def check_logprobs_values(ctx: Context, choices: Labelled) -> None:
    """Every logprob is a number <= 0 (null only for the first echoed token)."""
    for name, _, lp in logprobs_objects(choices):
        for j, value in enumerate(lp.get("token_logprobs") or []):
            if value is None and _echoed_first(ctx, j):
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or value > 0:
                raise Violation(f"{name}.logprobs.token_logprobs[{j}] is {value!r}")
        for j, top in enumerate(lp.get("top_logprobs") or []):
            for token, value in (top or {}).items():
                if not isinstance(value, int | float) or value > 0:
                    raise Violation(f"{name}.logprobs.top_logprobs[{j}][{token!r}] is {value!r}")


@requirement(
    "LOGPROBS-TOP-COUNT",
    level=MUST,
    area="semantics",
    statement="Each top_logprobs entry holds at most logprobs + 1 tokens.",
    source=SPEC_TEXT + ".logprobs (up to logprobs+1 elements)",
    applies=lambda ctx: _has_logprobs(ctx) and requested_logprobs(ctx.case.body) is not None,
)
def logprobs_top_count(ctx: Context) -> None:
    check_logprobs_top_count(ctx, _body_choices(ctx))


def check_logprobs_top_count(ctx: Context, choices: Labelled) -> None:
    """Each top_logprobs entry is an object of at most logprobs + 1 tokens."""
    limit = (requested_logprobs(ctx.case.body) or 0) + 1
    for name, _, lp in logprobs_objects(choices):
        for j, top in enumerate(lp.get("top_logprobs") or []):
            if top is None and _echoed_first(ctx, j):
                continue
            if not isinstance(top, dict):
                raise Violation(f"{name}.logprobs.top_logprobs[{j}] is {top!r}, not an object")
            if len(top) > limit:
                raise Violation(
                    f"{name}.logprobs.top_logprobs[{j}] has {len(top)} entries, at most {limit} allowed"
                )


@requirement(
    "LOGPROBS-OFFSETS",
    level=MUST,
    area="semantics",
    statement="text_offset is non-decreasing.",
    source="OpenAI behaviour: character offsets of successive tokens",
    applies=_has_logprobs,
)
def logprobs_offsets(ctx: Context) -> None:
    for name, _, lp in logprobs_objects(_body_choices(ctx)):
        offsets = lp.get("text_offset") or []
        for j in range(1, len(offsets)):
            if offsets[j] < offsets[j - 1]:
                raise Violation(
                    f"{name}.logprobs.text_offset decreases at {j}: {offsets[j - 1]} -> {offsets[j]}"
                )


@requirement(
    "LOGPROBS-TOKENS-TEXT",
    level=SHOULD,
    area="semantics",
    statement="The logprobs tokens joined reproduce the choice's text.",
    source="OpenAI behaviour (byte-fallback tokens `bytes:...` excepted)",
    applies=_has_logprobs,
)
def logprobs_tokens_text(ctx: Context) -> None:
    for name, choice, lp in logprobs_objects(_body_choices(ctx)):
        tokens = lp.get("tokens")
        if not isinstance(choice.get("text"), str):
            continue  # RESP-CHOICE-TEXT reports a missing text
        if not isinstance(tokens, list) or any(str(t).startswith("bytes:") for t in tokens):
            continue
        joined = "".join(str(t) for t in tokens)
        if joined != choice.get("text"):
            raise Violation(
                f"{name}: tokens join to {joined[:60]!r}, text is {str(choice.get('text'))[:60]!r}"
            )


@requirement(
    "STOP-ABSENT",
    level=MUST,
    area="semantics",
    statement="No stop sequence appears in a returned completion.",
    source="spec: StopConfiguration (The returned text will not contain the stop sequence)",
    applies=lambda ctx: completion(ctx) and bool(stops(ctx)),
)
def stop_absent(ctx: Context) -> None:
    check_stop_absent(ctx, _body_choices(ctx))


def check_stop_absent(ctx: Context, choices: Labelled) -> None:
    """No stop sequence in the generated part of any choice's text."""
    for name, choice in choices:
        text = completion_part(ctx, choice)
        for stop in stops(ctx):
            if text is not None and stop in text:
                raise Violation(f"{name}.text contains the stop sequence {stop!r}")


@requirement(
    "STOP-PROBE",
    level=SHOULD,
    area="semantics",
    statement="At temperature 0 with a fixed seed, a stop sequence taken from a first answer "
    'ends the second answer just before it, with finish_reason "stop".',
    source="spec: StopConfiguration; determinism is best effort (seed), hence SHOULD",
    applies=lambda ctx: (
        completion(ctx) and "probe:stop" in ctx.case.tags and bool(ctx.related) and bool(stops(ctx))
    ),
)
def stop_probe(ctx: Context) -> None:
    first = ctx.related[0].json
    first_text = (
        choices_of(first)[0].get("text") if isinstance(first, dict) and choices_of(first) else None
    )
    stop = stops(ctx)[0]
    if not isinstance(first_text, str) or stop not in first_text:
        return  # the first answer changed shape: nothing to compare
    choices = choices_of(ctx.exchange.json)
    if not choices:
        raise Violation("the probe's answer has no choice")
    want = first_text[: first_text.index(stop)]
    got, reason = choices[0].get("text"), choices[0].get("finish_reason")
    if got != want or reason != "stop":
        raise Violation(
            f"with stop={stop!r} expected text {want!r} and finish_reason 'stop', got {got!r} and {reason!r}"
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
    source="DESIGN: a schema-valid request gets 200 or a declared 4xx",
    applies=_valid,
)
def valid_no_5xx(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if status >= 500:
        raise Violation(f"schema-valid request answered {status}")


@requirement(
    "VALID-ACCEPTED",
    level=CAPABILITY,
    area="semantics",
    statement="A schema-valid request is served (200); a proper 4xx means the target does "
    "not offer a declared feature.",
    source="spec: every declared parameter; capability table per parameter",
    applies=_valid,
)
def valid_accepted(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if 400 <= status < 500 and status != 429:
        features = ", ".join(sorted(ctx.case.tags)) or "the request"
        raise Unsupported(f"declined with {status}: {features}")


@requirement(
    "INVALID-REJECTED",
    level=MUST,
    area="errors",
    statement="A request that breaks the spec is rejected with a declared 4xx.",
    source="spec: request schema and cross-field rules; responses.400",
    applies=lambda ctx: (
        ctx.case.mode == "invalid"
        and ctx.case.auth == "default"
        and ctx.exchange.status is not None
        and UNKNOWN_MODEL_TAG not in ctx.case.tags  # MODEL-NOT-FOUND judges that one
        and ctx.exchange.status != 429  # rate limited: no answer to judge
    ),
)
def invalid_rejected(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if not 400 <= status < 500 or status == 429:
        raise Violation(f"request breaking {ctx.case.breaks} answered {status}, expected a 4xx")
