"""Request-aware requirements: does the completion answer the request that was sent?

Rules judged in both modes (a body, or the choices assembled from a stream) are written
once as ``rule(ctx, answer)`` and registered under both IDs by ``in_both_modes``
(views.py). The token-count quantities (usage, max_tokens, finish "length") live in
tokens.py; this module holds the identity of the completion, its choices, echo, stop
sequences and how valid requests are answered.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.judging.checks.common import (
    check_created,
    check_id,
    choices_of,
    completion,
    declares,
    is_int,
    says,
    schema_owns,
)
from conformance.judging.checks.logprobs_rules import echoed, path_of
from conformance.judging.checks.views import (
    Answer,
    Labelled,
    assemble,
    by_index,
    expected_choices,
    in_both_modes,
    labelled,
    stream_view,
)
from conformance.judging.document.spec import Schema, Spec
from conformance.judging.requirements import Context, Level, Unsupported, Violation, requirement
from conformance.judging.wire.case import MAY_REFUSE_TAG
from conformance.judging.wire.exchange import Exchange

MUST, SHOULD, CAPABILITY = Level.MUST, Level.SHOULD, Level.CAPABILITY
SPEC_TEXT = "spec text: CreateCompletionRequest"


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
    """The prompt a choice answers: by index // n, or the only prompt whatever the index."""
    index = choice.get("index")
    prompts = ctx.case.prompts
    if len(prompts) == 1:
        return prompts[0]
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


def prompts_known(ctx: Context) -> bool:
    """Each choice's prompt is known: the choices are placed, or there is one prompt (a
    wrong index is then CHOICES-INDEX's, and the prompt is still the only one)."""
    return len(ctx.case.prompts) == 1 or choices_placed(ctx)


def choices_placed(ctx: Context) -> bool:
    """Choices number prompts × n with indexes 0..k-1, so index // n names the prompt, and
    no choice echoes another prompt than the one its index names.

    Otherwise CHOICES-COUNT / CHOICES-INDEX (STREAM-INDEXES) report the defect, and a
    per-prompt check would only blame the wrong prompt.
    """
    if ctx.case.stream:
        return by_index(ctx) and misplaced(ctx, assemble(stream_view(ctx.exchange))) is None
    indexes = [c.get("index") for c in choices_of(ctx.exchange.json)]
    if sorted(i for i in indexes if is_int(i)) != list(range(expected_choices(ctx))):
        return False
    return misplaced(ctx, labelled(ctx.exchange.json)) is None


def misplaced(ctx: Context, choices: Labelled) -> Violation | None:
    """A choice that echoes another prompt of the request than its own, as a finding.

    OpenAI places choice j of prompt i at index i × n + j, and clients take the prompt as
    index // n. With echo a choice's text shows its prompt: one that starts with another
    prompt of the list, not with the one its index names, was placed at the wrong index
    (choice-major, or in the order the choices finished). One that starts with no prompt
    at all is ECHO-PREFIX's.
    """
    prompts, n = ctx.case.prompts, ctx.case.n
    # A token-id prompt's echo cannot be told from the text; one prompt has one place.
    if not echoed(ctx) or not all(isinstance(p, str) for p in prompts) or len(set(prompts)) < 2:
        return None
    for name, choice in choices:
        index, text = choice.get("index"), choice.get("text")
        if not is_int(index) or not isinstance(text, str) or not 0 <= index // n < len(prompts):
            continue
        own = prompts[index // n]
        if text.startswith(own):
            continue
        for i, other in enumerate(prompts):
            if other and text.startswith(other):
                return Violation(
                    f"{name} (index {index}) echoes prompt {i} {other[:40]!r}, not prompt "
                    f"{index // n} {own[:40]!r}: choice j of prompt i belongs at index "
                    f"i × n + j (n={n})",
                    path=f"{path_of(name)}.index",
                    expected=f"a choice of prompt {index // n}",
                    actual=f"a choice of prompt {i}",
                )
    return None


def stops(ctx: Context) -> list[str]:
    """The request's stop sequences that a server can match.

    A sequence holding U+FFFD is left out: servers print that character for bytes that are
    not UTF-8, so it can stand in a text without the model ever producing it, and a server
    rightly never matches it (seen on llama.cpp's server, docs/real-targets.md).
    """
    stop = ctx.case.body.get("stop")
    listed = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return [s for s in listed if isinstance(s, str) and s and "\ufffd" not in s]


#: A suffix this long does not end a generated text by chance.
DISTINCTIVE_SUFFIX = 8


def request_suffix(ctx: Context) -> str | None:
    suffix = ctx.case.body.get("suffix")
    return suffix if isinstance(suffix, str) and suffix else None


def suffix_appended(ctx: Context, choice: dict[str, Any]) -> bool:
    """The choice's text is its completion with the request's suffix added after it.

    Shown when the text ends with a suffix too long to end it by chance, or with any
    suffix when the logprobs tokens spell the text without it, or the completion is the
    suffix alone under max_tokens 0 (nothing was to be generated).
    """
    suffix, text = request_suffix(ctx), choice.get("text")
    if suffix is None or not isinstance(text, str) or not text.endswith(suffix):
        return False
    if len(suffix) >= DISTINCTIVE_SUFFIX:
        return True
    if ctx.case.int_param("max_tokens") == 0 and completion_part(ctx, choice) == suffix:
        return True
    lp = choice.get("logprobs")
    tokens = lp.get("tokens") if isinstance(lp, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        return False
    return "".join(tokens) + suffix == text


@requirement(
    "RESP-CREATED",
    level=MUST,
    area="semantics",
    statement="`created` is a plausible Unix time in seconds.",
    source="spec: CreateCompletionResponse.created (The Unix timestamp (in seconds)); "
    "client-visible where the document is silent: `datetime.fromtimestamp` refuses a time in "
    "milliseconds (year out of range) and shows any other implausible one as a wrong date",
    evidence="spec-text",
    stated=says("created", r"unix timestamp"),
    otherwise="client-visible",
    # A missing or non-integer `created` the schema rejects is RESP-SCHEMA's finding.
    applies=lambda ctx: (
        completion(ctx) and not schema_owns(ctx, "response", ctx.exchange.json, "created")
    ),
)
def response_created(ctx: Context) -> None:
    check_created(ctx.exchange.json, ctx.now)


@requirement(
    "RESP-ID",
    level=MUST,
    area="semantics",
    statement="`id` is a non-empty string, and not the id of another completion the run "
    "compares it with (the answer to a different request).",
    source="spec: CreateCompletionResponse.id (A unique identifier for the completion)",
    evidence="spec-text",
    stated=says("id", r"unique identifier"),
    otherwise="openai-contract",
    # A missing or non-string `id` the schema rejects is RESP-SCHEMA's finding.
    applies=lambda ctx: (
        completion(ctx) and not schema_owns(ctx, "response", ctx.exchange.json, "id")
    ),
)
def response_id(ctx: Context) -> None:
    body = ctx.exchange.json
    check_id(body)
    for other in ctx.related:
        # The same request served again (a cache, the stream twin) may be the same
        # completion; only the answer to a different request must have its own id.
        if _same_request(other.case.body, ctx.case.body):
            continue
        if completion_id(other) == body["id"]:
            raise Violation(
                f"id {body['id']!r} is also the id of the answer to another request "
                f"({other.case.label or 'a related request'}): not a unique identifier",
                path="id",
                actual=body["id"],
            )


def _same_request(one: dict[str, Any], two: dict[str, Any]) -> bool:
    ignored = ("stream", "stream_options")
    return {k: v for k, v in one.items() if k not in ignored} == {
        k: v for k, v in two.items() if k not in ignored
    }


def completion_id(exchange: Exchange) -> str | None:
    """The id of a 200 answer: its body's, or its first chunk's; None if it has none."""
    if exchange.status != 200:
        return None
    if exchange.case.stream:
        chunks = stream_view(exchange).chunks
        value = chunks[0][1].get("id") if chunks else None
    else:
        value = exchange.json.get("id") if isinstance(exchange.json, dict) else None
    return value if isinstance(value, str) and value.strip() else None


@requirement(
    "CHOICES-COUNT",
    level=MUST,
    area="semantics",
    statement="A completion has one choice per prompt per `n`: prompts × n choices.",
    source=SPEC_TEXT + ".n (How many completions to generate for each prompt); LangChain's "
    "OpenAI LLM hands choices back to prompts n at a time",
    evidence="spec-text",
    stated=says("n", r"for each prompt"),
    otherwise="client-visible",
    # `choices` that is not an array is RESP-SCHEMA's finding: there is nothing to count.
    applies=lambda ctx: completion(ctx) and isinstance(ctx.exchange.json.get("choices"), list),
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
    statement="Choice indexes are 0..k-1, each exactly once, and each choice sits at the "
    "index of its prompt (index // n; shown by echo): choice j of prompt i at i × n + j.",
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
    if len(indexes) == expected_choices(ctx):
        problem = misplaced(ctx, labelled(ctx.exchange.json))
        if problem is not None:
            raise problem


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
    stated=says("echo", r"echo back the prompt"),
    otherwise="openai-contract",
    scope=declares("echo"),
    when=lambda ctx: (
        echoed(ctx) and all(isinstance(p, str) for p in ctx.case.prompts) and prompts_known(ctx)
    ),
    needs=("echo",),
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
    statement="No stop sequence, nor the head of one it matched, appears in a returned "
    "completion: where the first answer to the same request without stop (the stop probe) "
    "continues into the stop sequence, the text ends before its first character.",
    source="spec: StopConfiguration (The returned text will not contain the stop sequence); "
    "a head kept when the sequence spans tokens: llama.cpp PR 15007 (streamed), oMLX #2386",
    evidence="spec-text",
    stated=says("stop", r"will not contain the stop sequence"),
    otherwise="openai-contract",
    scope=declares("stop"),
    when=lambda ctx: bool(stops(ctx)),
    needs=("stop",),
)
def stop_absent(ctx: Context, ans: Answer) -> None:
    found = stop_in_text(ctx, ans.choices)
    if found is not None:
        name, stop = found
        raise Violation(
            f"{name}.text contains the stop sequence {stop!r}",
            path=f"{path_of(name)}.text",
            actual=stop,
        )
    head = stop_head(ctx, ans.choices)
    if head is not None:
        name, stop, kept = head
        raise Violation(
            f"{name}.text ends with {kept!r}, the head of the stop sequence {stop!r}: the "
            "answer to the same request without stop continues there into the whole sequence, "
            "so the match was cut after its head, not before it",
            path=f"{path_of(name)}.text",
            expected="",
            actual=kept,
        )


#: The tag of the stop probe's requests with a stop (conformance.run.scenarios): each is
#: sent with the first answer, to the same request without stop, as ``related``.
STOP_PROBE_TAG = "probe:stop"


def stop_head(ctx: Context, choices: Labelled) -> tuple[str, str, str] | None:
    """(choice name, stop, the head kept) where a stop probe's answer ends inside the stop
    sequence that the first answer holds: it repeats that answer up to the sequence's
    start and then part of it. Only the probe knows where the match is, so only its
    requests are judged so (a text that merely ends like the head of a stop is legal)."""
    first = ctx.related[0].json if STOP_PROBE_TAG in ctx.case.tags and ctx.related else None
    first_choices = choices_of(first)
    reference = first_choices[0].get("text") if first_choices else None
    if not isinstance(reference, str):
        return None
    for name, choice in choices[:1]:
        text = completion_part(ctx, choice)
        if not isinstance(text, str) or not reference.startswith(text):
            continue
        for stop in stops(ctx):
            at = reference.find(stop)
            if at >= 0 and at < len(text) < at + len(stop):
                return name, stop, text[at:]
    return None


def stop_in_text(ctx: Context, choices: Labelled) -> tuple[str, str] | None:
    """The first choice (its name) whose completion holds a stop sequence, and that stop."""
    for name, choice in choices:
        text = completion_part(ctx, choice)
        for stop in stops(ctx):
            if text is not None and stop in text:
                return name, stop
    return None


@in_both_modes(
    "SUFFIX-ABSENT",
    "STREAM-SUFFIX-ABSENT",
    level=MUST,
    statement="The request's `suffix` is not appended to a returned text: it comes after "
    "the completion, which is the text inserted before it.",
    source=SPEC_TEXT + ".suffix (The suffix that comes after a completion of inserted text)",
    evidence="spec-text",
    stated=says("suffix", r"comes after a completion"),
    otherwise="openai-contract",
    scope=declares("suffix"),
    when=lambda ctx: request_suffix(ctx) is not None,
    needs=("suffix",),
)
def suffix_absent(ctx: Context, ans: Answer) -> None:
    for name, choice in ans.choices:
        if suffix_appended(ctx, choice):
            suffix = request_suffix(ctx) or ""
            raise Violation(
                f"{name}.text ends with the request's suffix {suffix[:40]!r}: the suffix comes "
                "after the completion, it is not part of the text",
                path=f"{path_of(name)}.text",
                actual=choice.get("text"),
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
        if MAY_REFUSE_TAG in ctx.case.tags:
            return  # e.g. a token id outside the vocabulary: refusing it declines nothing
        what = ctx.case.label or ", ".join(sorted(ctx.case.tags)) or "the request"
        body = ctx.exchange.json
        error = body.get("error") if isinstance(body, dict) else None
        said = error.get("message") if isinstance(error, dict) else None
        words = f": {json.dumps(said[:120], ensure_ascii=False)}" if isinstance(said, str) else ""
        raise Unsupported(f"declined with {status}{words}: {what}")
