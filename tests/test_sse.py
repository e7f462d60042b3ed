"""Tests for the incremental WHATWG server-sent-events parser ``conformance.judging.wire.sse``."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import examples

try:
    import conformance  # noqa: F401
except ImportError:  # plain `pytest` from the repo root does not put it on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.judging.wire.exchange import SSEEvent
from conformance.judging.wire.sse import SSEParser

# --------------------------------------------------------------------------- helpers


def parse(*chunks: bytes) -> tuple[list[SSEEvent], SSEParser, str | None]:
    """Feed ``chunks`` (arrival time = index), close, return events, parser, problem."""
    p = SSEParser()
    events: list[SSEEvent] = []
    for i, chunk in enumerate(chunks):
        events.extend(p.feed(chunk, float(i)))
    problem = p.close()
    return events, p, problem


def datas(*chunks: bytes) -> list[str]:
    return [e.data for e in parse(*chunks)[0]]


def key(e: SSEEvent) -> tuple[str, str | None, str | None, int | None]:
    return (e.data, e.event, e.id, e.retry)


def split_at(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(body)) for c in cuts})
    out, prev = [], 0
    for c in points:
        out.append(body[prev:c])
        prev = c
    out.append(body[prev:])
    return out


def reference(
    body: bytes,
) -> tuple[list[tuple[str, str | None, str | None, int | None]], bool]:
    """A deliberately naive, whole-body transcription of the WHATWG algorithm."""
    try:
        text = body.decode("utf-8")
        invalid = False
    except UnicodeDecodeError:
        text = body.decode("utf-8", errors="replace")
        invalid = True
    text = text.removeprefix("\ufeff")
    # The last piece has no line end: it is discarded.
    lines = re.split(r"\r\n|\r|\n", text)[:-1]
    out: list[tuple[str, str | None, str | None, int | None]] = []
    data, etype, last_id, retry = "", "", None, None
    for line in lines:
        if line == "":
            if data == "":
                etype, retry = "", None
                continue
            data = data.removesuffix("\n")
            out.append((data, etype or None, last_id, retry))
            data, etype, retry = "", "", None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            value = value.removeprefix(" ")
        else:
            name, value = line, ""
        if name == "data":
            data += value + "\n"
        elif name == "event":
            etype = value
        elif name == "id":
            if "\0" not in value:
                last_id = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return out, invalid


# --------------------------------------------------------------------------- line ends


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
def test_line_end_styles(eol: bytes) -> None:
    body = b"data: a" + eol + eol + b"data: b" + eol + b"data: c" + eol + eol
    events, p, problem = parse(body)
    assert [e.data for e in events] == ["a", "b\nc"]
    assert problem is None
    assert p.lines_seen == 5


def test_mixed_line_ends() -> None:
    assert datas(b"data: a\r\n\ndata: b\r\rdata: c\n\r\n") == ["a", "b", "c"]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    # If the LF were a second line end, "data: a" would be dispatched after the first
    # event, and "data: b" would be its own event rather than joined.
    events, p, _ = parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert [e.data for e in events] == ["a\nb"]
    assert p.lines_seen == 3


def test_cr_then_empty_chunk_then_lf() -> None:
    assert datas(b"data: a\r", b"", b"\n", b"\r\n") == ["a"]


def test_cr_at_chunk_end_then_other_text() -> None:
    assert datas(b"data: a\r", b"data: b\r", b"\r") == ["a\nb"]


def test_lone_cr_blank_line_after_chunk_boundary() -> None:
    # "\r" ends the data line, the next chunk's "\r" is a blank line (not CRLF).
    events, _, _ = parse(b"data: a\r", b"\r", b"data: b\n\n")
    assert [(e.data, e.at) for e in events] == [("a", 1.0), ("b", 2.0)]


@pytest.mark.parametrize(
    "sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
)
def test_unicode_separators_do_not_split_lines(sep: str) -> None:
    body = f"data: a{sep}b\n\ndata{sep}: x\n\n".encode()
    events, p, _ = parse(body)
    assert [e.data for e in events] == [f"a{sep}b"]
    assert p.lines_seen == 4


# --------------------------------------------------------------------------- fields


def test_data_with_and_without_space() -> None:
    assert datas(b"data:x\n\ndata: x\n\ndata:  x\n\ndata:\n\ndata\n\n") == [
        "x",
        "x",
        " x",
        "",
        "",
    ]


def test_multiline_data_joined_with_lf() -> None:
    assert datas(b'data: {\ndata:  "a": 1\ndata: }\n\n') == ['{\n "a": 1\n}']


def test_trailing_empty_data_line_keeps_one_lf() -> None:
    assert datas(b"data: a\ndata:\n\n") == ["a\n"]


def test_comments_ignored_and_counted() -> None:
    events, p, problem = parse(b": keep-alive\n\n:\ndata: x\n: between\n\n:tail\n")
    assert [e.data for e in events] == ["x"]
    assert p.comments_seen == 4
    assert problem is None


def test_event_type() -> None:
    events, _, _ = parse(b"event: add\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n")
    assert [(e.event, e.data) for e in events] == [
        ("add", "1"),
        (None, "2"),
        (None, "3"),
    ]


def test_event_type_without_data_does_not_leak() -> None:
    events, _, _ = parse(b"event: lost\n\ndata: 1\n\n")
    assert [(e.event, e.data) for e in events] == [(None, "1")]


def test_id_persists_across_events() -> None:
    events, p, _ = parse(b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 9\n\ndata: d\n\n")
    assert [(e.data, e.id) for e in events] == [
        ("a", "7"),
        ("b", "7"),
        ("c", ""),
        ("d", "9"),
    ]
    assert p.last_event_id == "9"


def test_id_with_nul_ignored() -> None:
    events, _, _ = parse(b"id: 1\n\ndata: a\n\nid: 2\x003\ndata: b\n\n")
    assert [e.id for e in events] == ["1", "1"]


def test_id_absent_is_none() -> None:
    assert parse(b"data: a\n\n")[0][0].id is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"3000", 3000),
        (b"0", 0),
        (b"007", 7),
        (b"", None),
        (b"-1", None),
        (b"+1", None),
        (b" 5", 5),  # one leading space is the separator
        (b"  5", None),
        (b"5 ", None),
        (b"1.5", None),
        (b"1_000", None),
        ("\u0663".encode(), None),  # ARABIC-INDIC DIGIT THREE: a digit, not ASCII
    ],
)
def test_retry_only_ascii_digits(value: bytes, expected: int | None) -> None:
    events, _, _ = parse(b"retry:" + value + b"\ndata: a\n\n")
    assert events[0].retry == expected


def test_retry_belongs_to_its_event_block() -> None:
    events, _, _ = parse(b"retry: 10\ndata: a\n\ndata: b\n\nretry: 5\n\ndata: c\n\n")
    assert [e.retry for e in events] == [10, None, None]


def test_unknown_fields_ignored() -> None:
    assert datas(b"foo: bar\nDATA: x\ndata : y\nData: z\ndata: ok\n\n") == ["ok"]


def test_field_value_may_contain_colons() -> None:
    assert datas(b'data: {"a":"b:c"}\n\n') == ['{"a":"b:c"}']


# --------------------------------------------------------------------------- dispatch


def test_blank_lines_without_data_dispatch_nothing() -> None:
    events, p, problem = parse(b"\n\n\r\n\r\r\n")
    assert events == [] and problem is None and p.events_seen == 0


def test_event_stamped_with_arrival_of_completing_chunk() -> None:
    events, _, _ = parse(b"data: a\n", b"\ndata: b", b"\n", b"\n")
    assert [(e.data, e.at) for e in events] == [("a", 1.0), ("b", 3.0)]


def test_event_fields() -> None:
    events, _, _ = parse(b"event: e\nid: i\nretry: 1\ndata: d\n\n")
    assert events == [SSEEvent(data="d", event="e", id="i", retry=1, at=0.0)]


# --------------------------------------------------------------------------- end of stream


def test_unterminated_last_event_reported() -> None:
    events, _, problem = parse(b"data: a\n\ndata: b\n")
    assert [e.data for e in events] == ["a"]
    assert problem is not None and "unterminated event" in problem


def test_incomplete_last_line_reported_and_discarded() -> None:
    events, _, problem = parse(b"data: a\n\ndata: b")
    assert [e.data for e in events] == ["a"]
    assert problem is not None and "inside a line" in problem


def test_unterminated_event_ending_in_cr() -> None:
    _, _, problem = parse(b"data: a\r")
    assert problem is not None and "unterminated event" in problem


def test_clean_end() -> None:
    for body in (b"", b"data: a\n\n", b"data: a\r\r", b": c\n", b"\n"):
        assert parse(body)[2] is None, body


def test_close_is_final() -> None:
    p = SSEParser()
    p.feed(b"data: a\n", 0.0)
    assert p.close() is not None
    assert p.close() is None
    with pytest.raises(ValueError):
        p.feed(b"\n", 1.0)


# --------------------------------------------------------------------------- decoding


def test_bom_stripped_once_at_start() -> None:
    bom = b"\xef\xbb\xbf"
    assert datas(bom + b"data: a\n\n") == ["a"]
    # A second BOM is part of the first line's field name: unknown field, ignored.
    assert datas(bom + bom + b"data: a\n\ndata: b\n\n") == ["b"]
    # A BOM later in the stream is ordinary text.
    assert datas(b"data: a\n\n" + bom + b"data: b\n\n") == ["a"]
    assert datas(b"data: " + bom + b"\n\n") == ["\ufeff"]


def test_bom_split_across_chunks() -> None:
    assert datas(b"\xef", b"\xbb", b"\xbfdata: a\n\n") == ["a"]


def test_multibyte_split_across_chunks() -> None:
    body = "data: é日🙂\n\n".encode()
    for i in range(len(body) + 1):
        assert datas(body[:i], body[i:]) == ["é日🙂"], i
    assert datas(*(body[i : i + 1] for i in range(len(body)))) == ["é日🙂"]


def test_invalid_utf8_replaced_and_flagged() -> None:
    events, p, problem = parse(b"data: a\xffb\n\ndata: c\xc3\n\n")
    assert [e.data for e in events] == ["a\ufffdb", "c\ufffd"]
    assert p.invalid_utf8 and problem is None


def test_invalid_utf8_split_across_chunks() -> None:
    events, p, _ = parse(b"data: \xe6", b"\x97", b"x\n\n")  # truncated 3-byte sequence
    assert [e.data for e in events] == ["\ufffdx"]
    assert p.invalid_utf8


def test_truncated_utf8_at_end_of_body_flagged() -> None:
    events, p, problem = parse(b"data: a\n\n\xe6\x97")
    assert [e.data for e in events] == ["a"]
    assert p.invalid_utf8
    assert problem is not None and "inside a line" in problem


def test_valid_utf8_not_flagged_even_with_literal_replacement_char() -> None:
    events, p, _ = parse("data: \ufffd\n\n".encode())
    assert [e.data for e in events] == ["\ufffd"]
    assert not p.invalid_utf8


def test_counters() -> None:
    body = b": hi\ndata: a\n\ndata: b\n"
    events, p, _ = parse(body)
    assert p.bytes_seen == len(body)
    assert p.lines_seen == 4
    assert p.comments_seen == 1
    assert p.events_seen == len(events) == 1


def test_huge_line_in_many_small_pieces() -> None:
    payload = b"x" * 2_000_000
    body = b"data: " + payload + b"\n\n"
    p = SSEParser()
    events = []
    for i in range(0, len(body), 1000):
        events.extend(p.feed(body[i : i + 1000], 0.0))
    assert p.close() is None
    assert [len(e.data) for e in events] == [2_000_000]


# --------------------------------------------------------------------------- properties

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"),
    max_size=20,
)


@dataclass
class Block:
    data: list[str]
    event: str | None
    id: str | None
    retry: str | None
    comments: list[str]


_blocks = st.builds(
    Block,
    data=st.lists(_text, max_size=4),
    event=st.none() | _text,
    id=st.none() | _text,
    retry=st.none() | st.from_regex(r"\A[0-9]{1,6}\Z") | _text,
    comments=st.lists(_text, max_size=2),
)


@st.composite
def streams(
    draw: st.DrawFn,
) -> tuple[bytes, list[tuple[str, str | None, str | None, int | None]]]:
    """A serialised stream and the events a WHATWG parser must produce from it."""
    blocks = draw(st.lists(_blocks, max_size=8))
    style = draw(st.sampled_from(["\n", "\r", "\r\n", "mixed"]))
    bom = draw(st.booleans())
    out: list[str] = ["\ufeff"] if bom else []
    prev_eol = ""

    def emit(line: str) -> None:
        nonlocal prev_eol
        eol = style if style != "mixed" else draw(st.sampled_from(["\n", "\r", "\r\n"]))
        if prev_eol == "\r" and line == "" and eol == "\n":
            eol = "\r\n"  # "\r" + "\n" would fuse into one CRLF line end
        out.append(line + eol)
        prev_eol = eol

    def field(name: str, value: str) -> None:
        sep = ": " if value.startswith(" ") else draw(st.sampled_from([":", ": "]))
        emit(name + sep + value)

    expected = []
    last_id: str | None = None
    for b in blocks:
        lines: list[tuple[str, str] | str] = [("data", d) for d in b.data]
        if b.event is not None:
            lines.append(("event", b.event))
        if b.id is not None:
            lines.append(("id", b.id))
        if b.retry is not None:
            lines.append(("retry", b.retry))
        lines.extend(":" + c for c in b.comments)
        data: list[str] = []
        for item in draw(st.permutations(lines)):
            if isinstance(item, str):
                emit(item)
            else:
                field(*item)
                if item[0] == "data":
                    data.append(item[1])
        emit("")
        if b.id is not None and "\0" not in b.id:
            last_id = b.id
        if data:
            retry = int(b.retry) if b.retry and b.retry.isascii() and b.retry.isdigit() else None
            expected.append(("\n".join(data), b.event or None, last_id, retry))
    return "".join(out).encode("utf-8"), expected


@settings(
    max_examples=examples(300),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_property_split_anywhere_same_events(
    stream: tuple[bytes, list[tuple[str, str | None, str | None, int | None]]],
    cuts: list[int],
) -> None:
    body, expected = stream
    whole, p_whole, problem_whole = parse(body)
    assert [key(e) for e in whole] == expected
    assert problem_whole is None and not p_whole.invalid_utf8

    pieces = split_at(body, [c % (len(body) + 1) for c in cuts])
    split, p_split, problem_split = parse(*pieces)
    assert [key(e) for e in split] == expected
    assert problem_split is None
    assert (p_split.lines_seen, p_split.comments_seen, p_split.bytes_seen) == (
        p_whole.lines_seen,
        p_whole.comments_seen,
        p_whole.bytes_seen,
    )


@settings(max_examples=examples(100), deadline=None, database=None)
@given(streams())
def test_property_byte_by_byte(
    stream: tuple[bytes, list[tuple[str, str | None, str | None, int | None]]],
) -> None:
    body, expected = stream
    events, _, problem = parse(*(body[i : i + 1] for i in range(len(body))))
    assert [key(e) for e in events] == expected and problem is None


# Arbitrary bytes from SSE-ish tokens (including broken UTF-8, BOMs, lone CRs): the
# incremental parser must match a naive whole-body reference, however the body is cut.
_tokens = st.sampled_from(
    [
        b"data:", b"data: ", b"data", b"event:", b"id: ", b"retry:", b":", b" ", b"x", b"1",
        b"\r", b"\n", b"\r\n", b"\x00", b"\xef\xbb\xbf", b"\xe2\x80\xa8", b"\xc2\x85",
        b"\xff", b"\xc3", b"\xa9", b"\xe6\x97", b"\xf0\x9f\x99\x82", b"\xed\xa0\x80",
    ]
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None, database=None)
@given(st.lists(_tokens, max_size=40), st.lists(st.integers(0, 400), max_size=20))
@example([b"data: x", b"\r", b"\n", b"\n"], [8])
@example([b"\xef\xbb\xbf", b"data: a", b"\n", b"\n"], [1, 2])
def test_property_random_bytes_match_reference(tokens: list[bytes], cuts: list[int]) -> None:
    body = b"".join(tokens)
    expected, invalid = reference(body)
    pieces = split_at(body, [c % (len(body) + 1) for c in cuts])
    events, p, problem = parse(*pieces)
    assert [key(e) for e in events] == expected
    assert p.invalid_utf8 == invalid
    whole_events, _, whole_problem = parse(body)
    assert [key(e) for e in whole_events] == expected
    assert problem == whole_problem


# --------------------------------------------------------------------------- openai SDK

SAMPLE = (
    b": connected\n\n"
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m",'
    b'"choices":[{"index":0,"text":" caf\xc3\xa9","logprobs":null,"finish_reason":null}]}\n\n'
    b'data:{"text":"no space"}\r\n\r\n'
    b"event: completion\ndata: line one\ndata: line two\r\rdata: \xe2\x80\xa8 separator\n\n"
    b": keep-alive\n\n"
    b"data: " + "日本語 🙂".encode() + b"\n\n"
    b"retry: 1000\ndata: with retry\n\n"
    b"data: [DONE]\n\n"
)


def _openai_decoder() -> Any:
    streaming = pytest.importorskip("openai._streaming")
    return streaming.SSEDecoder()


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096])
def test_agrees_with_openai_sdk_decoder(size: int) -> None:
    chunks = [SAMPLE[i : i + size] for i in range(0, len(SAMPLE), size)]
    theirs = [(e.data, e.event, e.retry) for e in _openai_decoder().iter_bytes(iter(chunks))]
    events, _, problem = parse(*chunks)
    ours = [(e.data, e.event, e.retry) for e in events]
    assert ours == theirs
    assert len(ours) == 7 and ours[-1][0] == "[DONE]" and problem is None
