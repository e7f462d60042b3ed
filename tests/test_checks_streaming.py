"""Streaming requirements, each proven both ways on the reference target.

A proof is one request: on the conformant target the requirement is checked and passes
(and nothing fails), with exactly the matching fault switched on it fails with a message
naming the problem, and no unrelated MUST requirement fails.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import API_KEY, FAST_LIMITS, Target, Targets, case, failed, judge, must_failures

from conformance.judging.checks.stream_text import corruption
from conformance.judging.checks.streaming import TWIN_TAG
from conformance.judging.verdict.latency import is_buffered, stream_latency
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import SSEEvent
from conformance.reference import FAULTS, TOLERATED
from conformance.run.client import Client, Limits
from conformance.run.engine import Run
from conformance.run.session import Settings

FLAVORS = ("aihubmix", "nscale")
USAGE = {"stream_options": {"include_usage": True}}
STOP = " fola"  # the third word of the greedy completion of support.case's prompt
#: Two prompts with n=2 and echo: each choice's text shows where it belongs.
PLACED = {"prompt": ["Count: 1 2 3 4 5 6 7 8", "Say hi"], "n": 2, "echo": True}


class _Targets(Targets):
    """Targets that stop all at once: one by one, this module's ~70 servers take seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[Target] = []

    def get(self, flavor: str, *faults: str, limits: Limits = FAST_LIMITS) -> Target:
        target = super().get(flavor, *faults, limits=limits)
        if target not in self.started:
            self.started.append(target)
        return target

    def stop(self) -> None:
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(lambda t: t.server.stop(), self.started))
        super().stop()  # closes the clients; stopping a stopped server returns at once


@pytest.fixture(scope="module")
def targets() -> Iterator[Targets]:
    """This module's reference targets, so that they stop when it ends."""
    running = _Targets()
    yield running
    running.stop()


def streamed(**body: Any) -> Case:
    """A greedy streamed request (temperature 0, so every run sees the same text)."""
    return case(stream=True, temperature=0, **body)


@dataclass(frozen=True)
class Proof:
    """A requirement, the fault that breaks it, the request that shows it, the words."""

    rid: str
    fault: str
    words: str
    body: dict[str, Any] = field(default_factory=dict)
    #: MUST requirements the same defect breaks too (named, never "anything").
    also: frozenset[str] = frozenset()
    flavors: tuple[str, ...] = FLAVORS

    def __str__(self) -> str:
        return f"{self.rid}:{self.fault}"


PROOFS = [
    Proof("STREAM-CONTENT-TYPE", "stream-content-type-json", "'application/json'"),
    Proof("STREAM-CHUNK-SCHEMA", "stream-not-json", "is not JSON"),
    Proof("STREAM-FRAMING", "stream-single-newline", "single newline"),
    Proof("STREAM-DONE", "stream-no-done", "without data: [DONE]"),
    Proof("STREAM-DONE", "stream-data-after-done", "follow data: [DONE]"),
    Proof("STREAM-CONSISTENT-IDS", "stream-id-changes", "id changes"),
    Proof("STREAM-FINISH", "stream-no-finish-reason", "never receives", {"n": 2}),
    Proof("STREAM-FINISH", "stream-double-finish", "2 finish_reasons", {"n": 2}),
    Proof("STREAM-FINISH", "stream-text-after-finish", "' extra'", {"n": 2}),
    Proof("STREAM-INDEXES", "stream-index-zero", "indexes are [0]", {"n": 2}),
    Proof("STREAM-USAGE", "stream-usage-missing", "no chunk", USAGE),
    Proof("STREAM-USAGE", "stream-usage-misplaced", "comes before the content", USAGE),
    Proof("STREAM-USAGE", "stream-usage-every-chunk", "chunks carry a usage object", USAGE),
    Proof("STREAM-USAGE", "usage-arithmetic", "total_tokens 7 != prompt_tokens 2", USAGE),
    Proof("STREAM-USAGE", "stream-usage-twice", "2 chunks carry a usage object", USAGE),
    Proof("STREAM-INDEXES", "choices-choice-major", "echoes prompt 1 'Say hi'", PLACED),
    Proof(
        "STREAM-SUFFIX-ABSENT", "suffix-appended", "the request's suffix", {"suffix": " (the end)"}
    ),
    Proof(
        "STREAM-TEXT-INTACT",
        "stream-text-cumulative",
        "repeats all the text before it",
        {"max_tokens": 8},
    ),
    Proof("STREAM-USAGE-UNREQUESTED", "stream-usage-unrequested", "not requested"),
    Proof("STREAM-ERROR-EVENT", "stream-error-event", "'upstream failed'"),
    Proof(
        "STREAM-MAX-TOKENS",
        "exceed-max-tokens",
        "completion_tokens 7 exceeds",
        {**USAGE, "logprobs": 1},
    ),
    Proof("STREAM-FINISH-LENGTH", "finish-not-length", 'not "length"', {"logprobs": 1}),
    # Only AIHubMix declares a finish_reason enum; its schema check sees the value too.
    Proof(
        "STREAM-FINISH-ENUM",
        "finish-enum",
        "'eos_token'",
        also=frozenset({"STREAM-CHUNK-SCHEMA"}),
        flavors=("aihubmix",),
    ),
    Proof("STREAM-STOP-ABSENT", "stop-in-text", repr(STOP), {"stop": [STOP], "max_tokens": 8}),
    Proof("STREAM-ECHO-PREFIX", "echo-ignored", "does not start with the prompt", {"echo": True}),
    Proof("STREAM-LOGPROBS-PRESENCE", "logprobs-ignored", "logprobs=2 requested", {"logprobs": 2}),
    Proof("STREAM-LOGPROBS-VALUES", "logprobs-positive", "is 0.5", {"logprobs": 2}),
    Proof("STREAM-LOGPROBS-TOP-COUNT", "top-logprobs-extra", "at most 3 allowed", {"logprobs": 2}),
    Proof("STREAM-LOGPROBS-SHAPE", "logprobs-length-mismatch", "differ in length", {"logprobs": 2}),
    Proof("STREAM-LOGPROBS-TOP-FULL", "top-logprobs-short", "asks for the 2", {"logprobs": 2}),
    Proof(
        "STREAM-LOGPROBS-OFFSETS",
        "stream-text-offset-stalled",
        "do not follow the text",
        {"logprobs": 1},
    ),
]
PAIRS = [(p, f) for p in PROOFS for f in p.flavors]


@pytest.mark.parametrize(("proof", "flavor"), PAIRS, ids=[f"{p}-{f}" for p, f in PAIRS])
def test_holds_on_the_conformant_target(targets: Targets, proof: Proof, flavor: str) -> None:
    findings = targets.get(flavor).judge(streamed(**proof.body))
    assert findings[proof.rid].outcome == "passed"
    assert failed(findings) == set()


@pytest.mark.parametrize(("proof", "flavor"), PAIRS, ids=[f"{p}-{f}" for p, f in PAIRS])
def test_fails_with_its_fault(targets: Targets, proof: Proof, flavor: str) -> None:
    findings = targets.get(flavor, proof.fault).judge(streamed(**proof.body))
    assert proof.rid in failed(findings)
    assert proof.words in findings[proof.rid].message
    assert must_failures(findings) <= {proof.rid, *proof.also}


def test_finish_enum_does_not_apply_without_an_enum(targets: Targets) -> None:
    findings = targets.get("nscale", "finish-enum").judge(streamed())
    assert "STREAM-FINISH-ENUM" not in findings


def _twin_probe(target: Target, **extra: Any) -> dict[str, Any]:
    """Ask without streaming, then the same request streamed; judge the stream."""
    body = {"max_tokens": 6, "temperature": 0, "seed": 7, "n": 2, **extra}
    twin = target.send(case(mode="probe", **body))
    probe = Case({**twin.case.body, "stream": True}, mode="probe", tags=frozenset({TWIN_TAG}))
    return target.judge(probe, related=(twin,))


@pytest.mark.parametrize("flavor", FLAVORS)
def test_stream_matches_its_non_streamed_twin(targets: Targets, flavor: str) -> None:
    findings = _twin_probe(targets.get(flavor))
    assert findings["STREAM-MATCHES-NONSTREAM"].outcome == "passed"
    assert failed(findings) == set()
    findings = _twin_probe(targets.get(flavor, "stream-text-differs"))
    assert failed(findings) == {"STREAM-MATCHES-NONSTREAM"}
    assert "differs from the non-streamed text" in findings["STREAM-MATCHES-NONSTREAM"].message


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("stream-text-cumulative", "repeats all the text before it"),
        ("stream-leading-space-dropped", "lost their leading space"),
        ("stream-utf8-replaced", "multi-byte UTF-8 characters were broken apart"),
    ],
)
def test_a_corrupted_stream_text_is_stream_text_intacts_alone(
    targets: Targets, fault: str, words: str, flavor: str
) -> None:
    # A non-ASCII prompt: the reference model answers it with accented words.
    findings = _twin_probe(targets.get(flavor), prompt="Describe the Rhône:")
    assert findings["STREAM-TEXT-INTACT"].outcome == "passed"
    assert failed(findings) == set()
    findings = _twin_probe(targets.get(flavor, fault), prompt="Describe the Rhône:")
    assert failed(findings) == {"STREAM-TEXT-INTACT"}
    assert words in findings["STREAM-TEXT-INTACT"].message
    assert findings["STREAM-MATCHES-NONSTREAM"].outcome == "passed"


@pytest.mark.parametrize(
    ("pieces", "twin", "words"),
    [
        (["Hi", "Hi there", "Hi there you", "Hi there you all"], None, "cumulative"),
        ([" a", " a b"], " a b", "cumulative"),
        (["a", "b"], " a b", "leading space"),
        ([" caf\ufffd\ufffd", " au lait"], " café au lait", "U+FFFD"),
        ([" \ufffd\ufffd\ufffd\ufffd wave"], " 🌊 wave", "U+FFFD"),
    ],
)
def test_stream_text_corruptions_are_recognised(
    pieces: list[str], twin: str | None, words: str
) -> None:
    problem = corruption(pieces, "".join(pieces), twin)
    assert problem is not None and words in problem


@pytest.mark.parametrize(
    ("pieces", "twin"),
    [
        (["\n", "\n\n", "\n\n\n", "\n\n\n\n"], None),  # newline tokens may grow
        ([" the", " they", " they're"], None),  # three by chance, and no twin to tell
        ([" a", " b"], " a b"),
        ([" caf\ufffd"], " caf\ufffd"),  # the body has U+FFFD too (llama.cpp's bytes)
        ([" a", "\nb"], " a b"),  # whitespace changed, none lost: STREAM-MATCHES-NONSTREAM's
        ([" caf\ufffd x"], " café y"),  # differs beyond the characters
        ([" x"], " y"),
    ],
)
def test_other_stream_texts_are_not_called_corrupted(pieces: list[str], twin: str | None) -> None:
    assert corruption(pieces, "".join(pieces), twin) is None


#: The legal stream variations of the fault catalogue (seven of them).
VARIATIONS = sorted(
    f for f in TOLERATED if f.startswith("sse-") or f in ("finish-on-empty-chunk", "vendor-fields")
)
RICH = {**USAGE, "n": 2, "logprobs": 2, "echo": True, "stop": [STOP], "max_tokens": 8}


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("variation", VARIATIONS)
def test_legal_variations_pass(targets: Targets, variation: str, flavor: str) -> None:
    target = targets.get(flavor, variation)
    for body in ({}, RICH):
        findings = target.judge(streamed(**body))
        assert {rid: f.message for rid, f in findings.items() if f.outcome != "passed"} == {}
        assert {"STREAM-FRAMING", "STREAM-DONE", "STREAM-FINISH"} <= set(findings)


def test_every_variation_and_fault_is_in_the_catalogue() -> None:
    assert len(VARIATIONS) == 7
    assert {p.fault for p in PROOFS} <= FAULTS.keys()


def test_an_unterminated_last_event_is_a_framing_failure(targets: Targets) -> None:
    target = targets.get("aihubmix")
    exchange = target.send(streamed())
    assert exchange.events
    # What the client records when the body ends before the blank line of [DONE].
    cut = dataclasses.replace(
        exchange,
        events=exchange.events[:-1],
        stream_error="body ended with an unterminated event (1 data line(s), 6 characters, "
        "not followed by the blank line that dispatches it)",
    )
    findings = judge(target.spec, cut)
    assert failed(findings) == {"STREAM-FRAMING"}
    assert "unterminated event" in findings["STREAM-FRAMING"].message


def test_merged_events_are_named_even_when_dispatched(targets: Targets) -> None:
    target = targets.get("nscale")
    exchange = target.send(streamed())
    assert exchange.events
    merged = SSEEvent("\n".join(ev.data for ev in exchange.events), at=exchange.events[-1].at)
    findings = judge(target.spec, dataclasses.replace(exchange, events=[merged]))
    assert failed(findings) == {"STREAM-FRAMING"}
    assert "single newline" in findings["STREAM-FRAMING"].message


def test_a_stalled_stream_ends_at_the_gap_bound(targets: Targets) -> None:
    target = targets.get("aihubmix", "stream-stall")
    gap = 0.5
    client = Client(
        target.server.url,
        api_key=API_KEY,
        media_type=target.spec.request_media_type,
        limits=Limits(ttfb=5.0, gap=gap, total=10.0),
    )
    try:
        started = time.perf_counter()
        exchange = client.send(streamed())
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    findings = judge(target.spec, exchange)
    assert elapsed < gap + 1.5
    assert "gap" in findings["HTTP-COMPLETE"].message
    assert must_failures(findings) == {"HTTP-COMPLETE"}


def _events(*times: float) -> list[SSEEvent]:
    return [SSEEvent("{}", at=t) for t in times]


@pytest.mark.parametrize(
    ("times", "buffered"),
    [
        ((2.0,) * 10, True),  # one read at the end of a 2 s wait
        ((0.1, *([1.95] * 10)), True),  # a first event, then a burst at the end
        (tuple(0.2 * i for i in range(1, 11)), False),  # spread over 2 s: a real stream
        ((0.3,) * 10, False),  # one read, but too quick to tell
        ((2.0, 2.0), False),  # too few events to tell
    ],
)
def test_buffered_streams_are_recognised(times: tuple[float, ...], buffered: bool) -> None:
    assert is_buffered(_events(*times)) is buffered


def test_latency_is_measured_and_recorded_for_streams(targets: Targets) -> None:
    target = targets.get("aihubmix")
    run = Run(Settings(), target.spec, target.client)
    item = run.item()
    item.judge(target.send(streamed(**USAGE)))
    item.judge(target.send(case()))  # not streamed: no latency entry
    assert len(item.results.latency) == 1
    entry = item.results.latency[0]
    assert entry.events == 6  # 4 tokens, the usage chunk, [DONE]
    assert entry.buffered is False
    assert entry.max_gap_s is not None and entry.total_s is not None
    assert 0 <= entry.max_gap_s <= entry.total_s
    assert entry.first_event_s is not None and entry.ttfb_s is not None
    assert entry.first_event_s >= entry.ttfb_s > 0
    assert stream_latency(target.send(case())) is None
