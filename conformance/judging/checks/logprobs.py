"""The legacy logprobs object: present when asked for, complete, and well formed.

The rules are ``check_*`` helpers over labelled choices: each is registered for bodies
(LOGPROBS-*) and for the choices assembled from a stream (STREAM-LOGPROBS-*), one rule
and one evidence per requirement; STREAM-LOGPROBS-PRESENCE (streaming.py) judges chunks. Every helper reads the arrays through :func:`arrays`, which keeps a value
only when it is a list, and checks each element's type before using it.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

from conformance.judging.case import requested_int
from conformance.judging.checks.common import completion, declares, is_int, is_number, says
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

if TYPE_CHECKING:
    from conformance.judging.spec import Spec

MUST, SHOULD = Level.MUST, Level.SHOULD
SPEC_TEXT = "spec text: CreateCompletionRequest.logprobs"
ARRAYS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")
LOGPROBS_SCOPE = declares("logprobs")


def path_of(name: str) -> str:
    """A JSON path from a choice's name in messages (``streamed choices[0]`` -> ``choices[0]``)."""
    return name.removeprefix("streamed ")


def requested_logprobs(body: dict[str, Any]) -> int | None:
    value = requested_int(body.get("logprobs"))
    # A negative count (valid where a spec sets no minimum) asks for nothing defined.
    return value if value is not None and value >= 0 else None


def declared_logprobs(spec: Spec) -> int | None:
    """The logprobs count the document declares for a request that omits it (Nscale:
    ``default: 0``): a promise a server may keep, so its sampled tokens' logprobs may come
    back unasked. None where the document declares none (AIHubMix: ``default: null``)."""
    value = (spec.request_properties.get("logprobs") or {}).get("default")
    return value if is_int(value) and value >= 0 else None


def asked_logprobs(ctx: Context) -> int | None:
    """The logprobs count in force: the request's, else the document's declared default."""
    wanted = requested_logprobs(ctx.case.body)
    return wanted if wanted is not None else declared_logprobs(ctx.spec)


def logprobs_objects(choices: Labelled) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The choices that carry a logprobs object, with that object."""
    return [(name, c, c["logprobs"]) for name, c in choices if isinstance(c.get("logprobs"), dict)]


def arrays(lp: dict[str, Any]) -> dict[str, list[Any]]:
    """The logprobs arrays that are lists (the others are missing or of a wrong type)."""
    return {k: lp[k] for k in ARRAYS if isinstance(lp.get(k), list)}


def echoed(ctx: Context) -> bool:
    return ctx.case.body.get("echo") is True


def _echoed_first(ctx: Context, j: int) -> bool:
    """The first token of an echoed prompt has no logprob (OpenAI sends null)."""
    return j == 0 and echoed(ctx)


def unrendered_end(choice: dict[str, Any], tokens: list[Any]) -> bool:
    """The last token is an end-of-text token the text does not show, and the choice stopped.

    Some servers (llama.cpp, vLLM with special tokens kept) list the end-of-text token in
    logprobs; it counts as a generated token but renders as nothing.
    """
    text = choice.get("text")
    if not tokens or choice.get("finish_reason") != "stop" or not isinstance(text, str):
        return False
    last = tokens[-1]
    if not isinstance(last, str):
        return False
    return last == "" or not text.endswith(last)


def _has_logprobs(ctx: Context) -> bool:
    return completion(ctx) and bool(logprobs_objects(labelled(ctx.exchange.json)))


def check_presence(ctx: Context, choices: Labelled) -> None:
    """A logprobs object on every choice when requested (0 included), on none when not.

    ``logprobs: 0`` asks for the sampled tokens' logprobs and no alternatives: the spec
    text says the chosen tokens are always included, so 0 is a request, not "off". Where
    the request omits it and the document declares a default, a server may apply that
    default (and return logprobs) or not.
    """
    wanted = requested_logprobs(ctx.case.body)
    if wanted is None and declared_logprobs(ctx.spec) is not None:
        return
    for name, choice in choices:
        has = isinstance(choice.get("logprobs"), dict)
        if wanted is not None and not has:
            raise Violation(
                f"logprobs={wanted} requested but {name}.logprobs is {choice.get('logprobs')!r}",
                path=f"{path_of(name)}.logprobs",
                actual=choice.get("logprobs"),
            )
        if wanted is None and has:
            raise Violation(
                f"logprobs not requested but {name} carries a logprobs object",
                path=f"{path_of(name)}.logprobs",
            )


def check_shape(choices: Labelled) -> None:
    """The legacy logprobs object: parallel arrays of equal lengths (not the chat shape)."""
    for name, _, lp in logprobs_objects(choices):
        got = arrays(lp)
        missing = [k for k in ("tokens", "token_logprobs") if k not in got]
        if missing:
            shape = " (the chat shape {content: [...]})" if "content" in lp else ""
            raise Violation(
                f"{name}.logprobs lacks {', '.join(missing)}{shape}",
                path=f"{path_of(name)}.logprobs.{missing[0]}",
            )
        lengths = {k: len(v) for k, v in got.items()}
        if len(set(lengths.values())) > 1:
            raise Violation(
                f"{name}.logprobs arrays differ in length: {lengths}",
                path=f"{path_of(name)}.logprobs",
                actual=lengths,
            )


def check_values(ctx: Context, choices: Labelled) -> None:
    """Every logprob is a number <= 0 (null only for the first echoed token)."""
    for name, _, lp in logprobs_objects(choices):
        got = arrays(lp)
        where = f"{path_of(name)}.logprobs"
        for j, value in enumerate(got.get("token_logprobs", [])):
            if value is None and _echoed_first(ctx, j):
                continue
            if not is_number(value) or value > 0:
                raise Violation(
                    f"{name}.logprobs.token_logprobs[{j}] is {value!r}",
                    path=f"{where}.token_logprobs[{j}]",
                    actual=value,
                )
        for j, top in enumerate(got.get("top_logprobs", [])):
            if not isinstance(top, dict):
                continue  # LOGPROBS-TOP-COUNT reports an entry that is not an object
            for token, value in top.items():
                if not is_number(value) or value > 0:
                    raise Violation(
                        f"{name}.logprobs.top_logprobs[{j}][{token!r}] is {value!r}",
                        path=f"{where}.top_logprobs[{j}]",
                        actual=value,
                    )


#: What servers render a byte-fragment token as; several such candidates share that key.
REPLACEMENT = "\ufffd"


def check_top_count(ctx: Context, choices: Labelled) -> None:
    """Each position has a top_logprobs object of at most logprobs + 1 tokens (the sampled
    one besides the ``logprobs`` most likely), and with logprobs >= 1 the array is there.

    No lower bound here: see :func:`check_top_full`.
    """
    k = asked_logprobs(ctx) or 0
    for name, _, lp in logprobs_objects(choices):
        got = arrays(lp)
        where = f"{path_of(name)}.logprobs.top_logprobs"
        tokens = got.get("tokens", [])
        if k and tokens and "top_logprobs" not in got:
            raise Violation(
                f"logprobs={k} requested but {name}.logprobs has no top_logprobs array",
                path=where,
                actual=lp.get("top_logprobs"),
            )
        for j, top in enumerate(got.get("top_logprobs", [])):
            if top is None and _echoed_first(ctx, j):
                continue
            if not isinstance(top, dict):
                raise Violation(
                    f"{name}.logprobs.top_logprobs[{j}] is {top!r}, not an object",
                    path=f"{where}[{j}]",
                    actual=top,
                )
            if len(top) > k + 1:
                raise Violation(
                    f"{name}.logprobs.top_logprobs[{j}] has {len(top)} entries, at most "
                    f"{k + 1} allowed",
                    path=f"{where}[{j}]",
                    expected=k + 1,
                    actual=len(top),
                )


def check_top_full(ctx: Context, choices: Labelled) -> None:
    """Each position lists at least ``logprobs`` alternatives (a SHOULD).

    top_logprobs is keyed by token text, so candidates that decode to the same text
    collapse into one key: byte fragments all rendered as U+FFFD (SGLang #32290), and any
    two tokenizations of one string ("▁true" and "true", vLLM #44504). A collision costs
    one key at the position it happens, so a position one short may be a collision and is
    not a finding on its own. A shortfall is the server's when it cannot be one: a position
    with no entry, a position two or more short, or every position of a choice short (a
    collision does not recur at every position; one position alone proves nothing).
    Positions holding a U+FFFD key are let through. OpenAI documents that fewer than
    requested may come back, hence this bound is never a MUST.
    """
    k = requested_logprobs(ctx.case.body) or 0
    for name, _, lp in logprobs_objects(choices):
        where = f"{path_of(name)}.logprobs.top_logprobs"
        tops = [
            (j, top)
            for j, top in enumerate(arrays(lp).get("top_logprobs", []))
            # Not an object: LOGPROBS-TOP-COUNT's finding.
            if isinstance(top, dict) and not any(REPLACEMENT in str(t) for t in top)
        ]
        short = [(j, top) for j, top in tops if len(top) < k]
        if not short:
            continue
        j, top = min(short, key=lambda item: len(item[1]))
        if len(top) == 0:
            why = "an empty position is no collision"
        elif len(top) <= k - 2:
            why = f"{k - len(top)} short: a collision of two candidates costs one key"
        elif len(tops) > 1 and len(short) == len(tops):
            why = f"all {len(tops)} positions short: a collision does not recur at each"
        else:
            continue  # one short here and there: possibly candidates that render alike
        raise Violation(
            f"{name}.logprobs.top_logprobs[{j}] has {len(top)} entries: logprobs={k} "
            f"asks for the {k} most likely tokens at every position ({why})",
            path=f"{where}[{j}]",
            expected=k,
            actual=len(top),
        )


def _check_span(ctx: Context, name: str, offsets: list[int], text: str) -> None:
    """The offsets stay inside the text they describe (UTF-8 bytes bound characters).

    With echo they index the returned text from 0. Without echo servers count from the
    completion (vLLM) or from the prompt as they detokenize it (OpenAI, llama-cpp-python),
    so the origin is unknown: the offsets may span at most the returned text.
    """
    where = f"{path_of(name)}.logprobs.text_offset"
    size, last = len(text.encode("utf-8")), len(offsets) - 1
    if echoed(ctx) and offsets[-1] > size:
        # Rests on the echo having happened: a server that ignored echo (ECHO-PREFIX's
        # finding) counts its offsets as without it, and this is no second defect.
        raise Violation(
            f"{where} reaches {offsets[-1]}, past the end of the returned text ({size} bytes): "
            "with echo the logprobs must describe the text returned",
            path=f"{where}[{last}]",
            expected=size,
            actual=offsets[-1],
            witness="echo",
        )
    if offsets[-1] - offsets[0] > size:
        raise Violation(
            f"{where} spans {offsets[0]}..{offsets[-1]}, more than the {size} bytes of the "
            "returned text: an offset points past its end",
            path=f"{where}[{last}]",
            expected=offsets[0] + size,
            actual=offsets[-1],
        )


def text_tokens(choice: dict[str, Any], lp: dict[str, Any]) -> list[str] | None:
    """The logprobs tokens that should spell the choice's text: all strings, no byte-fallback
    token (``bytes:...``), a final end-of-text token the text does not show left out; None
    when the text or the tokens cannot be compared."""
    tokens, text = arrays(lp).get("tokens"), choice.get("text")
    if not isinstance(text, str) or tokens is None:
        return None  # RESP-CHOICE-TEXT / LOGPROBS-SHAPE report these
    if not all(isinstance(t, str) for t in tokens) or any(t.startswith("bytes:") for t in tokens):
        return None
    return tokens[:-1] if unrendered_end(choice, tokens) else tokens


def spelled_tokens(choice: dict[str, Any], lp: dict[str, Any]) -> list[str] | None:
    """The tokens when they spell the choice's text exactly, else None: only then does
    each token's length say where the next one starts."""
    tokens = text_tokens(choice, lp)
    return tokens if tokens is not None and "".join(tokens) == choice["text"] else None


def _check_advance(name: str, offsets: list[Any], tokens: list[str]) -> None:
    """Each offset is the previous one plus the previous token's length (characters, or
    UTF-8 bytes for servers that count bytes)."""
    where = f"{path_of(name)}.logprobs.text_offset"
    for j in range(1, min(len(offsets), len(tokens))):
        step, token = offsets[j] - offsets[j - 1], tokens[j - 1]
        if step not in (len(token), len(token.encode("utf-8"))):
            raise Violation(
                f"{where}[{j}] is {offsets[j]}, but token {j - 1} ({token!r}) starts at "
                f"{offsets[j - 1]} and is {len(token)} characters long: the offsets do not "
                "follow the text",
                path=f"{where}[{j}]",
                expected=offsets[j - 1] + len(token),
                actual=offsets[j],
            )


def repeated_token(choice: dict[str, Any], lp: dict[str, Any]) -> tuple[int, int] | None:
    """Positions (first, again) where the same visible token is listed twice at the same
    offset: the logprobs repeat an earlier token (per-chunk logprobs sent cumulatively, or
    a final chunk that repeats the last). A token that renders as nothing, as U+FFFD or as
    bytes may legally share an offset with its neighbour, so only visible ones count; so
    may the tokens OpenAI lists after the text (the stop token, tokens sampled after it),
    their offsets pinned at its end."""
    got, text = arrays(lp), choice.get("text")
    seen: dict[tuple[str, int], int] = {}
    pairs = list(zip(got.get("tokens", []), got.get("text_offset", []), strict=False))
    # The offsets' origin: the text's start (0 with echo, the prompt's length on OpenAI).
    origin = next((o for _, o in pairs if is_int(o)), 0)
    for j, (token, offset) in enumerate(pairs):
        if not isinstance(token, str) or not token or not is_int(offset):
            continue
        if REPLACEMENT in token or token.startswith("bytes:"):
            continue
        if isinstance(text, str) and offset - origin >= len(text):
            continue  # past the returned text: not shown, whatever it repeats
        if (token, offset) in seen:
            return seen[(token, offset)], j
        seen[(token, offset)] = j
    return None


def check_offsets(ctx: Context, choices: Labelled) -> None:
    """text_offset holds non-negative integers, non-decreasing, spanning no more than the
    text, each advancing by its token's length where the tokens spell the text, and no
    visible token is listed twice at one offset."""
    for name, choice, lp in logprobs_objects(choices):
        offsets = arrays(lp).get("text_offset", [])
        where = f"{path_of(name)}.logprobs.text_offset"
        repeat = repeated_token(choice, lp)
        if repeat is not None:
            first, again = repeat
            raise Violation(
                f"{name}.logprobs lists token {arrays(lp)['tokens'][again]!r} at offset "
                f"{offsets[again]} twice (positions {first} and {again}): the logprobs repeat "
                "an earlier token (streamed: a chunk's logprobs are to cover only its own "
                "new tokens, not cumulative)",
                path=f"{where}[{again}]",
                actual=offsets[again],
            )
        for j, offset in enumerate(offsets):
            if not is_int(offset) or offset < 0:
                raise Violation(
                    f"{where}[{j}] is {offset!r}, not a character offset",
                    path=f"{where}[{j}]",
                    actual=offset,
                )
            if j and offset < offsets[j - 1]:
                raise Violation(
                    f"{name}.logprobs.text_offset decreases at {j}: {offsets[j - 1]} -> {offset}",
                    path=f"{where}[{j}]",
                    actual=offset,
                )
        text = choice.get("text")
        if isinstance(text, str) and offsets:
            _check_span(ctx, name, offsets, text)
        tokens = spelled_tokens(choice, lp)
        if tokens is not None:
            _check_advance(name, offsets, tokens)


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
