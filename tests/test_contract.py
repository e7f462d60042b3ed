"""The contract a document is judged under (conformance/judging/document/contract.py), end to end.

OpenAI-compatible is the default contract: a document that declares OpenAI's fields under
OpenAI's names promises OpenAI's meaning for them, so a server that breaks that meaning
fails the run under Nscale's prose-less document as it does under AIHubMix's and OpenAI's
(issue 25: 33 such defect shapes used to pass the Nscale gate with an advisory). The
``document`` contract judges by the document alone, with the levels of before.
"""

from __future__ import annotations

import pytest
from support import API_KEY, MODEL, Targets, declines_unnamed, meta_of

from conformance.front.proofs import CONTRACT_SHAPES, TOLERANCE
from conformance.front.proofs_exact import EXACT
from conformance.front.runner import Outcome, run_suite
from conformance.judging.document.contract import (
    OPENAI_TYPES,
    Contract,
    compatible,
    declared_types,
    json_types,
)
from conformance.judging.document.spec import load_spec
from conformance.judging.document.spec_notes import header_lines
from conformance.run.session import Settings, Setup

#: Issue 25's defect shapes by fault (conformance/front/proofs.py CONTRACT_SHAPES).
SHAPES = {fault: shape for shape, fault in CONTRACT_SHAPES}


def run(targets: Targets, flavor: str, fault: str, contract: Contract) -> Outcome:
    url = targets.get(flavor, fault).server.url
    settings = Settings(model=MODEL, max_examples=3, concurrency=8)
    setup = Setup(settings, spec=flavor, target_url=url, api_key=API_KEY, contract=contract)
    return run_suite(setup)


def must_failures(outcome: Outcome) -> set[str]:
    return {t.id for t in outcome.results.tallies.values() if t.failed and t.level == "MUST"}


@pytest.mark.parametrize("fault", sorted(SHAPES))
def test_each_defect_shape_fails_the_nscale_run(targets: Targets, fault: str) -> None:
    outcome = run(targets, "nscale", fault, Contract.OPENAI_COMPATIBLE)
    failed = {t.id for t in outcome.results.tallies.values() if t.failed}
    # Owned as the fault corpus measured it (one defect, one finding), and deciding.
    assert failed == EXACT[(fault, ())]["nscale"], SHAPES[fault]
    assert must_failures(outcome), f"{SHAPES[fault]}: only advisories under nscale"
    assert outcome.verdict.word == "failed", (SHAPES[fault], outcome.verdict.reasons)
    assert outcome.results.run_record.contract == "openai-compatible"


@pytest.mark.exhaustive
@pytest.mark.parametrize("flavor", ["aihubmix", "openai"])
@pytest.mark.parametrize("fault", sorted(SHAPES))
def test_each_defect_shape_still_fails_under_the_other_documents(
    targets: Targets, flavor: str, fault: str
) -> None:
    outcome = run(targets, flavor, fault, Contract.OPENAI_COMPATIBLE)
    failed = {t.id for t in outcome.results.tallies.values() if t.failed}
    # OpenAI's document gives the same owners as AIHubMix's, its OpenAI-compatible copy.
    assert failed == EXACT[(fault, ())]["aihubmix"], f"{SHAPES[fault]} under {flavor}"
    assert must_failures(outcome) and outcome.verdict.word == "failed", SHAPES[fault]


def test_by_the_document_alone_nscale_keeps_its_former_levels(targets: Targets) -> None:
    # --contract document: Nscale says nothing of max_tokens, so the overrun is advisory.
    outcome = run(targets, "nscale", "exceed-max-tokens", Contract.DOCUMENT)
    tally = outcome.results.tallies["USAGE-MAX-TOKENS"]
    assert tally.failed and tally.level == "SHOULD"
    assert "document contract" in tally.why_level
    assert outcome.verdict.word == "passed"
    assert meta_of(outcome.results)["contract"] == "document"


def test_a_created_a_client_cannot_read_fails_under_either_contract(targets: Targets) -> None:
    # Milliseconds: datetime.fromtimestamp refuses the value (client-visible, a MUST even
    # where the document alone is judged and says nothing of `created`).
    outcome = run(targets, "nscale", "created-millis", Contract.DOCUMENT)
    tally = outcome.results.tallies["RESP-CREATED"]
    assert tally.failed and (tally.level, tally.evidence) == ("MUST", "client-visible")
    assert outcome.verdict.word == "failed"


@pytest.mark.exhaustive
@pytest.mark.parametrize("fault", sorted({fault for fault, _ in TOLERANCE}))
def test_legal_variations_stay_silent_under_openais_document(targets: Targets, fault: str) -> None:
    # The fault corpus proves them silent under aihubmix and nscale; OpenAI's document,
    # under the default contract, too: 0 false alarms under every profile.
    outcome = run(targets, "openai", fault, Contract.OPENAI_COMPATIBLE)
    failed = sorted(t.id for t in outcome.results.tallies.values() if t.failed)
    assert failed == [], f"{fault} under openai: {failed}"
    assert outcome.verdict.word == "passed"
    results = outcome.results
    reasons = {u.id: u.reason for u in outcome.verdict.coverage.not_applicable}
    exercised = {rid for rid, t in results.tallies.items() if t.checked > t.unsupported}
    caps = {f: {"outcome": e.outcome, "detail": e.detail} for f, e in results.capabilities.items()}
    assert not declines_unnamed(caps, reasons, exercised, load_spec("openai"))


def test_the_header_names_the_contract() -> None:
    assert header_lines(load_spec("nscale"))[0].startswith(
        "conformance: contract openai-compatible"
    )
    alone = load_spec("nscale", contract=Contract.DOCUMENT)
    assert header_lines(alone)[0].startswith("conformance: contract document: the document alone")


def test_openai_types_are_those_of_openais_own_document() -> None:
    # Pinned so a run need not load the 3 MB document; re-derived here from it.
    openai = load_spec("openai")
    for name, pinned in OPENAI_TYPES.items():
        found: set[str] = set()
        for types in declared_types(openai, name):
            assert types is not None, name
            found |= types
        assert found - {"number"} == pinned, name


@pytest.mark.parametrize(
    ("schema", "name", "binds"),
    [
        ({"type": "integer", "format": "int32"}, "max_tokens", True),
        ({"type": "integer", "nullable": True}, "max_tokens", True),
        ({"type": "number"}, "max_tokens", True),  # an integer is a number
        ({"type": "string"}, "max_tokens", False),  # no OpenAI value fits
        ({"anyOf": [{"type": "string"}, {"type": "array"}]}, "stop", True),
        ({}, "stop", True),  # untyped: admits OpenAI's values
        ({"type": "object"}, "echo", False),
        ({"type": "boolean"}, "unknown_field", False),  # not an OpenAI field
    ],
)
def test_a_declared_type_binds_when_openais_value_could_take_it(
    schema: dict[str, object], name: str, binds: bool
) -> None:
    assert compatible([json_types(schema)], name) is binds
