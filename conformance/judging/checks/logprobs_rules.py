"""The legacy logprobs object's rules, over labelled choices: shared by bodies and streams.

Each ``check_*`` helper is one rule with one evidence; conformance/judging/checks/logprobs.py
registers each for bodies (LOGPROBS-*) and for the choices assembled from a stream
(STREAM-LOGPROBS-*), and other check modules read the arrays with the helpers here. Every
helper reads the arrays through :func:`arrays`, which keeps a value only when it is a list,
and checks each element's type before using it. Nothing here registers a requirement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conformance.judging.checks.common import is_int, is_number
from conformance.judging.checks.views import Labelled
from conformance.judging.requirements import Context, Violation
from conformance.judging.wire.case import requested_int

if TYPE_CHECKING:
    from conformance.judging.document.spec import Spec

ARRAYS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


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
    Positions holding a key that renders as nothing or as U+FFFD are let through whatever
    they lack: any number of byte-level candidates may decode to that one key (vLLM on a
    byte-level tokenizer computed 5 of 5 where the dict kept 3). OpenAI documents that
    fewer than requested may come back, hence this bound is never a MUST.
    """
    k = requested_logprobs(ctx.case.body) or 0
    for name, _, lp in logprobs_objects(choices):
        where = f"{path_of(name)}.logprobs.top_logprobs"
        tops = [
            (j, top)
            for j, top in enumerate(arrays(lp).get("top_logprobs", []))
            # Not an object: LOGPROBS-TOP-COUNT's finding.
            if isinstance(top, dict) and not any(t == "" or REPLACEMENT in str(t) for t in top)
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
    """The offsets stay inside the text they describe, counted in characters.

    With echo they index the returned text from 0. Without echo servers count from the
    completion (vLLM) or from the prompt as they detokenize it (OpenAI, llama-cpp-python),
    so the origin is unknown: the offsets may span at most the returned text.
    """
    where = f"{path_of(name)}.logprobs.text_offset"
    size, last = len(text), len(offsets) - 1
    if echoed(ctx) and offsets[-1] > size:
        # Rests on the echo having happened: a server that ignored echo (ECHO-PREFIX's
        # finding) counts its offsets as without it, and this is no second defect.
        raise Violation(
            f"{where} reaches {offsets[-1]}, past the end of the returned text ({size} characters): "
            "with echo the logprobs must describe the text returned",
            path=f"{where}[{last}]",
            expected=size,
            actual=offsets[-1],
            witness="echo",
        )
    if offsets[-1] - offsets[0] > size:
        raise Violation(
            f"{where} spans {offsets[0]}..{offsets[-1]}, more than the {size} characters of the "
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
    """Each offset is the previous one plus the previous token's length in characters:
    offsets index the text a client holds (OpenAI counts characters; a server counting
    UTF-8 bytes drifts after the first non-ASCII token: llama-cpp-python PR 1037)."""
    where = f"{path_of(name)}.logprobs.text_offset"
    for j in range(1, min(len(offsets), len(tokens))):
        step, token = offsets[j] - offsets[j - 1], tokens[j - 1]
        if step != len(token):
            in_bytes = step == len(token.encode("utf-8"))
            raise Violation(
                f"{where}[{j}] is {offsets[j]}, but token {j - 1} ({token!r}) starts at "
                f"{offsets[j - 1]} and is {len(token)} characters long: the offsets do not "
                "follow the text"
                + (" (they count UTF-8 bytes, not characters)" if in_bytes else ""),
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
