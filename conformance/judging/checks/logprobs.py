"""The legacy logprobs object's requirements: present when asked for, complete, well formed.

Each rule is a ``check_*`` helper over labelled choices (conformance/judging/checks/
logprobs_rules.py), registered here for bodies (LOGPROBS-*) and for the choices assembled
from a stream (STREAM-LOGPROBS-*), one rule and one evidence per requirement;
STREAM-LOGPROBS-PRESENCE (streaming.py) judges chunks. LOGPROBS-TOKENS-TEXT's own rules
(the tokens spell the text, per body and per chunk) live here.
"""

from __future__ import annotations

import itertools
import re

from conformance.judging.checks.common import completion, declares, is_int, says
from conformance.judging.checks.logprobs_rules import (
    REPLACEMENT,
    arrays,
    asked_logprobs,
    check_offsets,
    check_presence,
    check_shape,
    check_top_count,
    check_top_full,
    check_values,
    echoed,
    logprobs_objects,
    path_of,
    repeated_token,
    requested_logprobs,
    spelled_tokens,
    text_tokens,
)
from conformance.judging.checks.views import (
    Answer,
    Labelled,
    answer,
    assemble,
    by_index,
    in_both_modes,
    labelled,
    stream_view,
)
from conformance.judging.requirements import Context, Level, Violation, requirement

MUST, SHOULD = Level.MUST, Level.SHOULD
SPEC_TEXT = "spec text: CreateCompletionRequest.logprobs"
LOGPROBS_SCOPE = declares("logprobs")


def _has_logprobs(ctx: Context) -> bool:
    return completion(ctx) and bool(logprobs_objects(labelled(ctx.exchange.json)))


def _with_logprobs(ctx: Context) -> Labelled:
    return labelled(ctx.exchange.json)


def _logprobs_in(ctx: Context) -> bool:
    """The answer (a body, or a stream assembled per index) has a logprobs object."""
    return bool(logprobs_objects(answer(ctx).choices))


def _joined(ctx: Context) -> bool:
    """The answer has logprobs, and a stream's join into one array per choice: its chunks
    go on where the last stopped. Offsets that go back, or a token repeated at its offset
    (chunks that repeat earlier tokens, as cumulative logprobs do), are
    STREAM-LOGPROBS-OFFSETS' finding, and the joined arrays
    (an echoed null repeated, too many tokens) say nothing more about the other rules."""
    if not _logprobs_in(ctx):
        return False
    if not ctx.case.stream:
        return True
    for _, choice, lp in logprobs_objects(answer(ctx).choices):
        offsets = [o for o in arrays(lp).get("text_offset", []) if is_int(o)]
        if any(b < a for a, b in itertools.pairwise(offsets)) or repeated_token(choice, lp):
            return False
    return True


@requirement(
    "LOGPROBS-PRESENCE",
    level=MUST,
    area="semantics",
    statement="Each choice carries a logprobs object when logprobs is requested (0 too: the "
    "sampled tokens' logprobs), and none (null or absent) when logprobs is not requested "
    "(unless the document declares a default for it, which a server may apply).",
    source=SPEC_TEXT + " (as well the chosen tokens; the API will always return the logprob "
    "of the sampled token); lm-evaluation-harness reads choices[].logprobs.token_logprobs",
    evidence="spec-text",
    stated=says("logprobs", r"always return the `?logprob`? of the sampled token"),
    otherwise="client-visible",
    scope=LOGPROBS_SCOPE,
    applies=completion,
)
def logprobs_presence(ctx: Context) -> None:
    check_presence(ctx, _with_logprobs(ctx))


@in_both_modes(
    "LOGPROBS-SHAPE",
    "STREAM-LOGPROBS-SHAPE",
    level=MUST,
    statement="logprobs is the completions shape: tokens, token_logprobs, top_logprobs and "
    "text_offset arrays with one entry per token (streamed: the chunks' arrays joined).",
    source="spec: logprobs object (parallel arrays); the openai SDK's Logprobs model",
    evidence="client-visible",
    scope=LOGPROBS_SCOPE,
    when=_logprobs_in,
    needs=("logprobs",),
)
def logprobs_shape(ctx: Context, ans: Answer) -> None:
    check_shape(ans.choices)


@in_both_modes(
    "LOGPROBS-VALUES",
    "STREAM-LOGPROBS-VALUES",
    level=MUST,
    statement="Every logprob is a finite number <= 0; null only for the first echoed token.",
    source="spec: token_logprobs (log probabilities: <= 0 by definition); OpenAI for echo; "
    "scoring clients (lm-evaluation-harness) sum them as log-likelihoods",
    evidence="spec-text",
    stated=says("logprobs", r"log probabilities"),
    otherwise="client-visible",
    scope=LOGPROBS_SCOPE,
    when=_joined,
    needs=("logprobs",),
)
def logprobs_values(ctx: Context, ans: Answer) -> None:
    check_values(ctx, ans.choices)


@in_both_modes(
    "LOGPROBS-TOP-COUNT",
    "STREAM-LOGPROBS-TOP-COUNT",
    level=MUST,
    statement="At every position top_logprobs is an object of at most logprobs + 1 tokens "
    "(the array present when logprobs >= 1). Fewer than logprobs is not this rule's: see "
    "LOGPROBS-TOP-FULL.",
    source=SPEC_TEXT + " (there may be up to logprobs+1 elements in the response)",
    evidence="spec-text",
    stated=says("logprobs", r"up to `?logprobs ?\+ ?1`? elements"),
    otherwise="openai-contract",
    scope=LOGPROBS_SCOPE,
    when=lambda ctx: _joined(ctx) and asked_logprobs(ctx) is not None,
    needs=("logprobs",),
)
def logprobs_top_count(ctx: Context, ans: Answer) -> None:
    check_top_count(ctx, ans.choices)


@in_both_modes(
    "LOGPROBS-TOP-FULL",
    "STREAM-LOGPROBS-TOP-FULL",
    level=SHOULD,
    statement="At every position top_logprobs lists at least logprobs tokens. Candidates "
    "that detokenize to the same text collapse into one key, so a position one short (or "
    "holding U+FFFD) may be a collision and is let through; a position with none, two or more "
    "short, or every position of a choice short is a finding. A SHOULD: OpenAI documents "
    "that fewer than requested may come back.",
    source=SPEC_TEXT + " (the API will return a list of the `logprobs` most likely tokens)",
    evidence="spec-text",
    stated=says("logprobs", r"list of the \d+ most likely tokens"),
    otherwise="openai-contract",
    scope=LOGPROBS_SCOPE,
    when=lambda ctx: _joined(ctx) and bool(requested_logprobs(ctx.case.body)),
    needs=("logprobs",),
)
def logprobs_top_full(ctx: Context, ans: Answer) -> None:
    check_top_full(ctx, ans.choices)


@in_both_modes(
    "LOGPROBS-OFFSETS",
    "STREAM-LOGPROBS-OFFSETS",
    level=MUST,
    statement="text_offset holds non-negative, non-decreasing character offsets that span no "
    "more than the returned text (with echo: lie within it); where the tokens spell the "
    "text, each offset advances by the previous token's length; no visible token is listed "
    "twice at one offset (streamed: per-chunk logprobs are not cumulative).",
    source="logprobs.text_offset; lm-evaluation-harness and similar clients slice the text "
    "by these offsets",
    evidence="client-visible",
    scope=LOGPROBS_SCOPE,
    when=_logprobs_in,
    needs=("logprobs",),
)
def logprobs_offsets(ctx: Context, ans: Answer) -> None:
    check_offsets(ctx, ans.choices)


@requirement(
    "LOGPROBS-TOKENS-TEXT",
    level=SHOULD,
    area="semantics",
    statement="The logprobs tokens joined reproduce the choice's text (with echo: the prompt "
    "and the completion); streamed, each chunk's tokens reproduce that chunk's text.",
    source="OpenAI behaviour (byte-fallback tokens `bytes:...` and a final end-of-text token "
    "excepted)",
    evidence="server-habit",
    scope=LOGPROBS_SCOPE,
    applies=lambda ctx: (
        _has_logprobs(ctx) or (by_index(ctx) and requested_logprobs(ctx.case.body) is not None)
    ),
    needs=("logprobs",),
)
def logprobs_tokens_text(ctx: Context) -> None:
    if ctx.exchange.events is None:
        check_tokens_text(ctx, _with_logprobs(ctx))
    else:
        check_chunk_tokens_text(ctx)


def check_chunk_tokens_text(ctx: Context) -> None:
    """Streamed: each chunk's tokens spell that chunk's text.

    Judged only for a choice whose assembled tokens spell its assembled text (a stream whose
    tokens do not, by byte fallback or rendering, says nothing about one chunk); a final
    end-of-text token the text does not show is left out wherever its chunk falls.
    """
    stream = stream_view(ctx.exchange)
    spelled: dict[int, int] = {}  # choice index -> how many of its tokens spell its text
    for _, choice in assemble(stream):
        tokens = spelled_tokens(choice, choice["logprobs"]) if choice["logprobs"] else None
        if tokens is not None:
            spelled[choice["index"]] = len(tokens)
    seen = dict.fromkeys(spelled, 0)
    for _, name, piece in stream.pieces:
        index, lp, text = piece.get("index"), piece.get("logprobs"), piece.get("text")
        if index not in spelled or not isinstance(lp, dict) or not isinstance(text, str):
            continue
        tokens = arrays(lp).get("tokens", [])
        keep = max(0, min(len(tokens), spelled[index] - seen[index]))
        seen[index] += len(tokens)
        joined = "".join(tokens[:keep])
        if joined != text:
            raise Violation(
                f"{name}: tokens join to {joined[:60]!r}, the chunk's text is {text[:60]!r}",
                path=f"{name}.logprobs.tokens",
            )


def spelled_by_fragments(joined: str, text: str) -> bool:
    """The tokens spell the text once each run of U+FFFD in them stands for the character
    its bytes make up. Servers render a token that is part of a multi-byte character as
    U+FFFD (vLLM, FastChat), where OpenAI writes ``bytes:...``; the text shows the whole
    character (a run of k fragments makes 1 to k characters)."""
    if REPLACEMENT not in joined:
        return False
    parts = re.split(f"({REPLACEMENT}+)", joined)
    pattern = "".join(
        f".{{1,{len(part)}}}" if part.startswith(REPLACEMENT) else re.escape(part) for part in parts
    )
    return re.fullmatch(pattern, text, re.DOTALL) is not None


def check_tokens_text(ctx: Context, choices: Labelled) -> None:
    """Each choice's logprobs tokens join to its text (byte-fallback tokens excepted).

    With echo, tokens that spell exactly the text after the echoed prompt are logprobs
    that leave the prompt out: ECHO-LOGPROBS-PROMPT's defect, so the finding names that
    witness and the attribution pass withholds it where that requirement failed.
    """
    prompts, n = ctx.case.prompts, max(1, ctx.case.n)
    for name, choice, lp in logprobs_objects(choices):
        tokens, text = text_tokens(choice, lp), choice.get("text")
        if tokens is None or not isinstance(text, str):
            continue
        joined = "".join(tokens)
        suffix = ctx.case.body.get("suffix")
        if isinstance(suffix, str) and suffix and text == joined + suffix:
            continue  # the request's suffix appended to the text: SUFFIX-ABSENT's finding
        if joined != text and not spelled_by_fragments(joined, text):
            index = choice.get("index")
            prompt = (
                prompts[index // n]
                if echoed(ctx) and is_int(index) and 0 <= index // n < len(prompts)
                else None
            )
            generated_only = (
                isinstance(prompt, str)
                and text.startswith(prompt)
                and joined == text[len(prompt) :]
            )
            raise Violation(
                f"{name}: tokens join to {joined[:60]!r}, text is {text[:60]!r}",
                path=f"{path_of(name)}.logprobs.tokens",
                witness="echo-logprobs" if generated_only else None,
            )
