"""The fault corpus: every requirement proven to fail on its fault, and nothing else.

For each proof in conformance/reference/proofs.py the whole suite runs against the
reference target with that one fault on; the requirement must fail (a CAPABILITY one: be
reported unsupported) and no MUST requirement outside the proof's ``also`` may fail.
Every legal variation must produce no finding at all. docs/proof.md is generated from
the same table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import Targets, target_args

from conformance.plugin import SUITE_DIR
from conformance.reference.proofs import (
    PROOFS,
    TOLERANCE,
    Proof,
    render_proof_table,
    unknown_faults,
)
from conformance.requirements import REGISTRY, load_checks

ROOT = Path(__file__).resolve().parents[1]


def run_suite(
    pytester: pytest.Pytester, targets: Targets, fault: str, flavor: str, *args: str
) -> dict[str, dict[str, Any]]:
    """Run the whole suite against the faulty target: tallies by requirement ID, and
    the run's verdict under the key "verdict"."""
    url = targets.get(flavor, fault).server.url
    out = pytester.path / "out"
    pytester.runpytest_inprocess(
        str(SUITE_DIR),
        "-p",
        "no:cacheprovider",
        "--max-examples",
        "3",
        "--spec",
        flavor,
        *target_args(url),
        "--report-dir",
        str(out),
        *args,
    )
    results = json.loads((out / "results.json").read_text())
    tallies = {t["id"]: t for t in results["requirements"]}
    tallies["verdict"] = results["meta"]["verdict"]
    return tallies


@pytest.mark.parametrize("proof", PROOFS, ids=[f"{p.requirement}:{p.fault}" for p in PROOFS])
def test_requirement_fails_on_its_fault(
    pytester: pytest.Pytester, targets: Targets, proof: Proof
) -> None:
    tallies = run_suite(pytester, targets, proof.fault, proof.flavor, *proof.args)
    tallies.pop("verdict")
    mine = tallies[proof.requirement]
    if mine["level"] == "CAPABILITY":
        assert mine["unsupported"], f"{proof.requirement} not reported unsupported"
    else:
        assert mine["failed"], f"{proof.requirement} did not fail on {proof.fault}"
        assert mine["examples"][0]["message"], "a failure says what is wrong"
    unrelated = {
        rid
        for rid, t in tallies.items()
        if t["failed"] and t["level"] == "MUST" and rid != proof.requirement
    }
    assert unrelated <= proof.also, f"unrelated MUST failures: {sorted(unrelated - proof.also)}"


@pytest.mark.parametrize(("fault", "flavor"), TOLERANCE, ids=[f"{f}-{fl}" for f, fl in TOLERANCE])
def test_legal_variation_produces_no_finding(
    pytester: pytest.Pytester, targets: Targets, fault: str, flavor: str
) -> None:
    tallies = run_suite(pytester, targets, fault, flavor)
    assert tallies.pop("verdict") == "passed"
    findings = {rid for rid, t in tallies.items() if t["failed"]}
    assert findings == set()
    declined = {rid for rid, t in tallies.items() if t["unsupported"]}
    assert declined <= ({"VALID-ACCEPTED"} if fault == "reject-token-prompts" else set())


def test_every_requirement_has_a_proof() -> None:
    load_checks()
    assert set(REGISTRY) - {p.requirement for p in PROOFS} == set()
    assert {p.requirement for p in PROOFS} - set(REGISTRY) == set()
    assert unknown_faults() == set()


def test_proof_table_is_up_to_date() -> None:
    load_checks()
    levels = {rid: r.level.value for rid, r in REGISTRY.items()}
    assert (ROOT / "docs" / "proof.md").read_text() == render_proof_table(levels), (
        "docs/proof.md is stale: run python -m conformance.reference.proofs --write"
    )
