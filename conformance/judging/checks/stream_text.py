"""The text a client assembles from a stream, against the same request answered whole.

The stream twin probe (scenarios.STREAM_TWIN) asks one request at temperature 0 with a
seed, once without streaming and once streamed. Two requirements judge the streamed
text, and never both one choice:

- STREAM-TEXT-INTACT (MUST, client-visible): the text is not corrupted in one of the ways
  real servers corrupt it while streaming, each recognisable for what it is: chunks that
  each repeat all the text before them (cumulative text), tokens that lost their leading
  space (the twin's text once whitespace is ignored, shorter), and multi-byte characters
  broken into U+FFFD (the twin's text with U+FFFD where it has non-ASCII characters).
  Cumulative text is recognisable without the twin too, on any stream whose every chunk
  (four or more) repeats the one before it.
- STREAM-MATCHES-NONSTREAM (SHOULD): any other difference from the twin's text, since
  temperature-0 determinism is best effort.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

from conformance.judging.checks.common import choices_of, declares, is_int, says
from conformance.judging.checks.streaming import TWIN_TAG
from conformance.judging.checks.views import answer, by_index, stream_view
from conformance.judging.requirements import Context, Level, Violation, requirement

MUST, SHOULD = Level.MUST, Level.SHOULD
STREAM_TEXT = "spec text: CreateCompletionRequest.stream"
REPLACEMENT = "\ufffd"
#: Chunks that must each repeat the one before before a stream without a twin is called
#: cumulative: a few tokens may extend one another by chance (" the", " they", " they're").
CUMULATIVE_ALONE = 4


def twin_body(ctx: Context) -> dict[str, Any] | None:
    """The non-streamed answer to the same request, when the probe sent one."""
    if TWIN_TAG not in ctx.case.tags or not ctx.related:
        return None
    twin = ctx.related[0]
    ok = twin.status == 200 and not twin.case.stream and isinstance(twin.json, dict)
    return twin.json if ok else None


def _twin_texts(ctx: Context) -> dict[int, str]:
    return {
        c["index"]: c["text"]
        for c in choices_of(twin_body(ctx))
        if is_int(c.get("index")) and isinstance(c.get("text"), str)
    }


def _pieces(ctx: Context, index: int) -> list[str]:
    """The non-empty texts the stream sent for one choice index, in order."""
    return [
        piece["text"]
        for _, _, piece in stream_view(ctx.exchange).pieces
        if piece.get("index") == index and isinstance(piece.get("text"), str) and piece["text"]
    ]


def _each_repeats_the_last(pieces: list[str]) -> bool:
    """Every chunk text starts with the whole one before it and adds to it; the first holds
    a word (newline tokens "\n", "\n\n", ... may well grow one from the other)."""
    return (
        len(pieces) >= 2
        and bool(pieces[0].strip())
        and all(b.startswith(a) and len(b) > len(a) for a, b in pairwise(pieces))
    )


def _finished(ctx: Context) -> set[Any]:
    """The choice indexes of the stream that received a finish_reason."""
    return {
        piece.get("index")
        for _, _, piece in stream_view(ctx.exchange).pieces
        if piece.get("finish_reason") is not None
    }


def _excerpt(text: str, size: int = 60) -> str:
    return repr(text[:size]) + ("..." if len(text) > size else "")


def _no_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _broken_characters(streamed: str, want: str) -> bool:
    """``streamed`` is ``want`` with some non-ASCII characters each turned into U+FFFD (one
    per byte at most: a character whose bytes a server decoded apart)."""
    if REPLACEMENT not in streamed or want.isascii():
        return False
    pattern = "".join(
        re.escape(c)
        if c.isascii() or c == REPLACEMENT
        else f"(?:{re.escape(c)}|{REPLACEMENT}{{1,4}})"
        for c in want
    )
    return re.fullmatch(pattern, streamed, re.DOTALL) is not None


def corruption(pieces: list[str], streamed: str, want: str | None) -> str | None:
    """How a streamed choice's text was corrupted, or None (the twin's text ``want``).

    ``pieces`` are the choice's non-empty chunk texts and ``streamed`` their join.
    """
    if _each_repeats_the_last(pieces) and (
        len(pieces) >= CUMULATIVE_ALONE or (want is not None and pieces[-1] == want)
    ):
        return (
            f"each of its {len(pieces)} chunks repeats all the text before it (cumulative "
            f"text, the last chunk alone is {_excerpt(pieces[-1])}): a client appending the "
            f"chunks shows {_excerpt(streamed)}"
        )
    if want is None or streamed == want:
        return None
    if len(streamed) < len(want) and _no_space(streamed) == _no_space(want):
        return (
            f"the streamed text {_excerpt(streamed)} is the non-streamed text {_excerpt(want)} "
            f"without {len(want) - len(streamed)} of its whitespace characters: tokens lost "
            "their leading space"
        )
    if _broken_characters(streamed, want):
        return (
            f"the streamed text {_excerpt(streamed)} has U+FFFD where the non-streamed text "
            f"{_excerpt(want)} has non-ASCII characters: multi-byte UTF-8 characters were "
            "broken apart"
        )
    return None


def _corrupted(ctx: Context) -> list[tuple[str, str]]:
    """(choice name, how its text was corrupted) for each corrupted streamed choice."""
    twin = _twin_texts(ctx)
    out = []
    for name, choice in answer(ctx).choices:
        index = choice["index"]
        problem = corruption(_pieces(ctx, index), choice["text"], twin.get(index))
        if problem is not None:
            out.append((name, problem))
    return out


@requirement(
    "STREAM-TEXT-INTACT",
    level=MUST,
    area="streaming",
    statement="The streamed text is not corrupted: no chunk repeats the text before it "
    "(cumulative text), and against the same request answered whole (temperature 0, a "
    "seed) no token lost its leading space and no multi-byte character became U+FFFD.",
    source="OpenAI clients append each chunk's text (openai-python's Stream, LangChain's "
    "streaming callbacks): what a stream assembles to is the text the user sees; "
    + STREAM_TEXT
    + " (partial progress of the same completion)",
    evidence="client-visible",
    scope=declares("stream"),
    applies=by_index,
)
def stream_text_intact(ctx: Context) -> None:
    for name, problem in _corrupted(ctx)[:1]:
        raise Violation(f"{name}: {problem}", path=f"{name.removeprefix('streamed ')}.text")


@requirement(
    "STREAM-MATCHES-NONSTREAM",
    level=SHOULD,
    area="streaming",
    statement="At temperature 0 with a fixed seed, each streamed choice's text equals the "
    "non-streamed text of the same request (a corruption STREAM-TEXT-INTACT recognises "
    "aside).",
    source=STREAM_TEXT + " (partial progress of the same completion); determinism is best "
    "effort (seed), hence SHOULD",
    evidence="spec-text",
    stated=says("stream", r"partial progress"),
    otherwise="openai-contract",
    scope=declares("stream"),
    # A stream none of whose choices finished was cut (STREAM-FINISH's finding): nothing to
    # compare, and so not counted as compared (untested is not passed).
    applies=lambda ctx: by_index(ctx) and twin_body(ctx) is not None and bool(_finished(ctx)),
)
def stream_matches_nonstream(ctx: Context) -> None:
    twin = _twin_texts(ctx)
    corrupted = {name for name, _ in _corrupted(ctx)}
    # A choice whose stream never finished was cut (STREAM-FINISH's finding): what it
    # assembled to is no witness of how the target streams a whole completion.
    finished = _finished(ctx)
    for name, choice in answer(ctx).choices:
        want = twin.get(choice["index"])
        cut = choice["index"] not in finished
        if name in corrupted or cut or want is None or choice["text"] == want:
            continue
        raise Violation(
            f"{name}.text {_excerpt(choice['text'])} differs from the non-streamed "
            f"text {_excerpt(want)}",
            path=f"{name.removeprefix('streamed ')}.text",
        )
