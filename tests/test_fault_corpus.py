"""The fault corpus: every requirement proven to fail on its fault, and exactly what fails.

For each fault of conformance/front/proofs.py and each flavor, the whole suite runs
against the reference target with that one fault on; the requirements that fail, at any
level, must be exactly the recorded set (``EXACT``), which holds each proof's requirement
(a CAPABILITY one is reported unsupported instead). Every legal variation must produce no
finding at all. docs/proof.md is generated from the same tables.

Cost: one in-process suite run per (fault, flavor), about 140 runs (3-7 s each on 2 busy
cores): the exhaustive tier (``pytest -n auto -m exhaustive``; CI runs it). The default
tier runs a sample (``SAMPLE``): a fault of each kind under each spec and two legal
variations, so that a change that breaks the corpus's loop shows in every test run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import Targets, declines_unnamed, target_args

from conformance.front.plugin import SUITE_DIR
from conformance.front.proofs import (
    FLAVORS,
    PROOFS,
    TOLERANCE,
    measure,
    render_proof_table,
    runs,
    unknown_faults,
    unproven,
)
from conformance.front.proofs_exact import EXACT
from conformance.judging.checks import load_checks
from conformance.judging.document.spec import load_spec
from conformance.judging.requirements import REGISTRY
from conformance.reference.faults import CAPABILITY

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


RUNS = runs()
#: The runs of the default tier: a fault of each stage (serving, content, streaming, auth)
#: and two legal variations, across both specs; the rest are the exhaustive tier's.
SAMPLE = {
    ("empty-id", "aihubmix"),
    ("stream-no-done", "nscale"),
    ("usage-arithmetic", "nscale"),
    ("auth-ignored", "aihubmix"),
    ("sse-crlf", "aihubmix"),
    ("vendor-fields", "nscale"),
}


#: The requirements that report a proper 4xx decline as declined (Unsupported).
DECLINE_JUDGES = {"VALID-ACCEPTED", "SDK-COMPLETION", "SDK-STREAM", "USAGE-PROMPT-TOKENS-N"}


def _tiered(*values: Any) -> Any:
    """A parameter set, marked exhaustive unless its (fault, flavor) is in SAMPLE."""
    fault, flavor = values[0], values[1]
    marks = () if (fault, flavor) in SAMPLE else (pytest.mark.exhaustive,)
    return pytest.param(*values, marks=marks, id=f"{fault}-{flavor}")


@pytest.mark.parametrize(("fault", "flavor", "args"), [_tiered(*run) for run in RUNS])
def test_fault_fails_exactly_its_requirements(
    pytester: pytest.Pytester, targets: Targets, fault: str, flavor: str, args: tuple[str, ...]
) -> None:
    tallies = run_suite(pytester, targets, fault, flavor, *args)
    tallies.pop("verdict")
    failed = {rid for rid, t in tallies.items() if t["failed"]}
    expected = EXACT[(fault, args)][flavor]
    assert failed == expected, (
        f"{fault} under {flavor}: newly failing {sorted(failed - expected)}, "
        f"no longer failing {sorted(expected - failed)} (if on purpose: "
        "python -m conformance.front.proofs --measure, then --write)"
    )
    for proof in PROOFS:
        if proof.key != (fault, args) or proof.flavor != flavor:
            continue
        mine = tallies[proof.requirement]
        if mine["level"] == "CAPABILITY":
            assert mine["unsupported"], f"{proof.requirement} not reported unsupported"
        else:
            assert mine["examples"][0]["message"], "a failure says what is wrong"


def test_every_proof_is_in_its_exact_set() -> None:
    load_checks()
    for proof in PROOFS:
        if REGISTRY[proof.requirement].level.value != "CAPABILITY":
            assert proof.requirement in EXACT[proof.key][proof.flavor], proof
    assert set(EXACT) == {p.key for p in PROOFS}
    assert all(set(sets) == set(FLAVORS) for sets in EXACT.values())
    assert all(rid in REGISTRY for sets in EXACT.values() for ids in sets.values() for rid in ids)


@pytest.mark.parametrize(("fault", "flavor"), [_tiered(*pair) for pair in TOLERANCE])
def test_legal_variation_produces_no_finding(
    pytester: pytest.Pytester, targets: Targets, fault: str, flavor: str
) -> None:
    tallies = run_suite(pytester, targets, fault, flavor)
    assert tallies.pop("verdict") == "passed"
    findings = {rid for rid, t in tallies.items() if t["failed"]}
    assert findings == set()
    declined = {rid for rid, t in tallies.items() if t["unsupported"]}
    if fault in CAPABILITY:
        # A capability switch is a decline the requirements that judge declines report,
        # and the stated reason of every MUST it leaves out.
        assert declined and declined <= DECLINE_JUDGES, declined
        data = json.loads((pytester.path / "out" / "results.json").read_text())
        coverage = data["meta"]["coverage"]
        reasons = {u["id"]: u["reason"] for u in coverage["not_applicable"]}
        exercised = {rid for rid, t in tallies.items() if t["checked"] > t["unsupported"]}
        caps = data.get("capabilities", {})
        assert not declines_unnamed(caps, reasons, exercised, load_spec(flavor))
    else:
        assert declined == set()


def test_the_sample_is_part_of_the_corpus() -> None:
    corpus = {(fault, flavor) for fault, flavor, _ in RUNS} | set(TOLERANCE)
    assert corpus >= SAMPLE


def test_every_requirement_has_a_proof() -> None:
    load_checks()
    problems = unproven(set(REGISTRY))
    assert not problems, "\n".join(problems)
    assert unknown_faults() == set()


def test_proof_table_is_up_to_date() -> None:
    load_checks()
    levels = {rid: r.level.value for rid, r in REGISTRY.items()}
    assert (ROOT / "docs" / "proof.md").read_text() == render_proof_table(levels), (
        "docs/proof.md is stale: run python -m conformance.front.proofs --write"
    )


def test_measure_writes_exact_back_as_source() -> None:
    source = measure(lambda fault, flavor, args: EXACT[(fault, args)][flavor])
    namespace: dict[str, Any] = {"Mapping": Mapping, "_s": lambda *ids: frozenset(ids)}
    exec(source, namespace)
    assert namespace["EXACT"] == EXACT
