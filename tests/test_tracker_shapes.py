"""The sixth batch of real-tracker defect shapes, each through a reference-target fault.

Each shape fails the gate under every profile, named by the one requirement it breaks in
each mode it shows in (one defect, one finding); the legal variations beside them raise
nothing (conformance/reference/faults_text.py, faults_stream.py).
"""

from __future__ import annotations

import pytest
from support import API_KEY, MODEL, Targets

from conformance.front.runner import Outcome, run_suite
from conformance.judging.document.contract import Contract
from conformance.run.session import Settings, Setup

PROFILES = ("aihubmix", "nscale", "openai")

#: fault -> the requirements it must fail, exactly (every level).
SHAPES = {
    # llama-cpp-python PR 1037: offsets in UTF-8 bytes drift after a non-ASCII token.
    "text-offset-bytes": {"LOGPROBS-OFFSETS", "STREAM-LOGPROBS-OFFSETS"},
    # oMLX #2386: a stop cut by dropping only its last token keeps its head.
    "stop-head-kept": {"STOP-ABSENT", "STREAM-STOP-ABSENT"},
    # llama.cpp PR 15007: streamed, the head of a stop that spans tokens is flushed.
    "stream-stop-head-kept": {"STREAM-STOP-ABSENT"},
    # llama.cpp PR 25548: a prompt silently cut at a NUL.
    "prompt-cut-at-nul": {"ECHO-PREFIX"},
    # llama-cpp-python's concurrent streams, cut after one chunk: STREAM-FINISH alone (the
    # cut text is no witness for STREAM-MATCHES-NONSTREAM).
    "stream-cut-after-first-chunk": {"STREAM-FINISH"},
}
# Under aihubmix and nscale the fault corpus runs each shape (conformance/front/proofs.py
# PROOFS, EXACT: the same exact sets); here each runs under openai, and one of the two
# others in the default tier.
#: The default tier's sample; every shape under aihubmix and nscale is the fault corpus's too.
SAMPLE = {("stop-head-kept", "nscale"), ("text-offset-bytes", "openai")}
PAIRS = [
    pytest.param(fault, flavor, marks=() if (fault, flavor) in SAMPLE else pytest.mark.exhaustive)
    for i, fault in enumerate(sorted(SHAPES))
    for flavor in (PROFILES[i % 2], "openai")
]


def _run(targets: Targets, flavor: str, fault: str, **setup: object) -> Outcome:
    url = targets.get(flavor, fault).server.url
    settings = Settings(model=MODEL, max_examples=3, concurrency=8)
    return run_suite(Setup(settings, spec=flavor, target_url=url, api_key=API_KEY, **setup))  # type: ignore[arg-type]


def _failed(outcome: Outcome) -> set[str]:
    return {t.id for t in outcome.results.tallies.values() if t.failed}


@pytest.mark.parametrize(("fault", "flavor"), PAIRS)
def test_each_shape_fails_the_gate_named_by_its_requirement(
    targets: Targets, fault: str, flavor: str
) -> None:
    outcome = _run(targets, flavor, fault)
    assert outcome.verdict.word == "failed", outcome.verdict.reasons
    assert _failed(outcome) == SHAPES[fault]


@pytest.mark.parametrize(
    "flavor", [pytest.param(f, marks=() if f == "aihubmix" else pytest.mark.exhaustive)
               for f in PROFILES],
)  # fmt: skip
def test_byte_token_collisions_in_top_logprobs_raise_nothing(targets: Targets, flavor: str) -> None:
    outcome = _run(targets, flavor, "top-logprobs-byte-collisions")
    assert outcome.verdict.word == "passed", outcome.verdict.reasons
    assert not _failed(outcome)
    assert outcome.results.tallies["LOGPROBS-TOP-FULL"].checked


@pytest.mark.exhaustive  # whole runs
def test_null_logprobs_unasked_is_openai_s_answer_under_the_openai_compatible_contract(
    targets: Targets,
) -> None:
    """Nscale's document types logprobs non-nullable, OpenAI's makes it nullable and sends
    null when logprobs were not asked for: a finding only under the document contract."""
    compatible = _run(targets, "nscale", "null-fields")
    assert compatible.verdict.word == "passed" and not _failed(compatible)
    assert compatible.results.tallies["RESP-NULL-FIELDS"].checked
    document = _run(targets, "nscale", "null-fields", contract=Contract.DOCUMENT)
    assert _failed(document) == {"RESP-NULL-FIELDS"}


@pytest.mark.exhaustive  # whole runs
def test_a_cut_stream_is_not_counted_as_compared_with_its_twin(targets: Targets) -> None:
    """Untested is not passed: a stream cut before any finish_reason leaves
    STREAM-MATCHES-NONSTREAM nothing to judge, not a check that held."""
    cut = _run(targets, "aihubmix", "stream-cut-after-first-chunk")
    whole = _run(targets, "aihubmix", "sse-crlf")
    assert whole.results.tallies["STREAM-MATCHES-NONSTREAM"].checked
    assert not cut.results.tallies["STREAM-MATCHES-NONSTREAM"].checked
