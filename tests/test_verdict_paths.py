"""Every path to "passed" goes through the judge core's one decide(): budget, shards, merge.

Each bug of issue 19's "Why" is reproduced here as it was met (a budget-cut run said
passed; conformance-merge decided on its own and lost the required capabilities, took a
doubled shard and mixed seeds), and the merge of shards is checked to give the unsharded
run's verdict over generated configurations (a metamorphic property).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import capability_table, examples

from conformance.front.merge import main as merge_main
from conformance.front.runner import run_suite
from conformance.judging.requirements import Level, Requirement
from conformance.judging.verdict.conclusion import merge
from conformance.judging.verdict.decision import decide
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.verdict.record import RunRecord, ScenarioRun, SkipCause
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.judging.wire.wire import exchange_from_wire
from conformance.run.session import Settings, Setup

# -- a budget-cut run is incomplete, and says what the budget cut ---------------------------


def test_a_budget_cut_run_is_incomplete_and_names_what_was_not_run(tmp_path: Path) -> None:
    """Before: ``--budget-requests 140`` skipped every stream batch and said passed."""
    # Serial: in-process, a module first imported on a chain thread would be assertion-
    # rewritten there, and CPython 3.11's ast is not thread-safe (see plugin.rewrite_no_library).
    setup = Setup(settings=Settings(budget_requests=140))
    outcome = run_suite(setup, report_dir=tmp_path)
    verdict = outcome.verdict
    errors = [(p.name, p.outcome.message) for p in outcome.played if p.outcome.word == "error"]
    checks = [(t.id, t.examples[:1]) for t in outcome.results.errors()]
    assert (verdict.word, verdict.exit_code) == ("incomplete", 7), (verdict, errors, checks)
    assert "because request budget spent (--budget-requests)" in verdict.reasons[-1]
    cut = {name for name, cause, _ in verdict.unrun if cause == "budget"}
    assert cut and all(name in verdict.reasons[-1] for name in sorted(cut)[:6])
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["verdict"] == "incomplete"
    assert data["meta"]["verdict_reasons"] == list(verdict.reasons)
    assert {e["scenario"] for e in data["meta"]["not_run"]} == cut
    assert data["record"]["budget"] == "request budget spent (--budget-requests)"
    summary = (tmp_path / "summary.md").read_text()
    assert "INCOMPLETE" in summary and "--budget-requests" in summary
    assert Results.from_json(data).run_record == outcome.results.run_record


# -- synthetic runs: requirements, items, shards ---------------------------------------------


def _ok(_: Any) -> bool:
    return True


REQS = [
    Requirement(f"M{i}", Level.MUST, "schema", f"must {i}", "spec", _ok, _ok) for i in range(4)
] + [
    Requirement(f"S{i}", Level.SHOULD, "schema", f"should {i}", "spec", _ok, _ok) for i in range(2)
]
MUSTS = tuple(r.id for r in REQS if r.level == Level.MUST)


def _exchange() -> Exchange:
    case = Case({"model": "m", "prompt": "x"}, label="text prompt")
    return exchange_from_wire(case, 200, [("content-type", "application/json")], b"{}")


def _identity(**changes: Any) -> RunRecord:
    return RunRecord(spec="aihubmix", target="t", model="m", seed=0, musts=MUSTS).with_(**changes)


def _item(name: str, findings: list[tuple[str, str]], **run: Any) -> Results:
    """One played item's results: its findings (requirement, outcome) and its record entry."""
    results = Results.for_requirements(REQS)
    if findings:
        results.record(_exchange(), [Finding(rid, outcome) for rid, outcome in findings])
    budget = run.pop("budget", None)
    no_verdict = run.pop("no_verdict", None)
    caps = run.pop("capabilities", {})
    results.capabilities = capability_table(caps)
    results.run_record = RunRecord(
        scenarios=(ScenarioRun(name, **run),), budget=budget, no_verdict=no_verdict
    )
    return results


def _run(record: RunRecord, items: list[Results]) -> Results:
    whole = Results.for_requirements(REQS)
    whole.run_record = record
    for item in items:
        whole.merge(item)
    return whole


def _shards(items: list[Results], n: int, **identity: Any) -> list[Results]:
    """The items played as ``n`` shards (every n-th item, as --shard does), each read back
    from its results.json."""
    out = []
    for k in range(1, n + 1):
        record = _identity(run_id=f"run{k}", shards=(f"{k}/{n}",), **identity)
        shard = _run(record, items[k - 1 :: n])
        shard.decided(decide(shard, partial=True))
        out.append(Results.from_json(json.loads(shard.dumps())))
    return out


def _write(tmp_path: Path, runs: list[Results]) -> list[str]:
    paths = []
    for i, run in enumerate(runs):
        path = tmp_path / f"shard{i}.json"
        path.write_text(run.dumps())
        paths.append(str(path))
    return paths


def _every_must_passed() -> list[Results]:
    return [_item(f"item{i}", [(rid, "passed")], outcome="passed") for i, rid in enumerate(MUSTS)]


def test_required_capabilities_decide_the_merge_as_they_decide_each_shard(tmp_path: Path) -> None:
    """Before: --require-capabilities was not in results.json; three shards that each failed
    on a declined best_of merged to passed, exit 0."""
    declined = {"best_of": {"outcome": "declined", "detail": "400"}}
    items = [
        *_every_must_passed(),
        _item("capabilities", [], outcome="passed", capabilities=declined),
    ]
    shards = _shards(items, 3, require_capabilities=("best_of",))
    assert {decide(s, partial=True).word for s in shards} == {"failed"}
    paths = _write(tmp_path, shards)
    assert merge_main([*paths, "--report-dir", str(tmp_path / "out")]) == 1
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["meta"]["verdict"] == "failed"
    assert "required capabilities not offered: best_of" in data["meta"]["verdict_reasons"][0]


@pytest.mark.parametrize(
    ("order", "message"),
    [
        ((1, 1, 2, 3), "the same run given twice"),
        ((1, 2, 3, 2), "the same run given twice"),
    ],
)
def test_a_doubled_shard_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], order: tuple[int, ...], message: str
) -> None:
    """Before: ``conformance-merge s1 s1 s2 s3`` said "passed (4 shards)"."""
    shards = _shards(_every_must_passed(), 3)
    paths = _write(tmp_path, [shards[k - 1] for k in order])
    assert merge_main([*paths, "--report-dir", str(tmp_path / "out")]) == BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("conformance-merge: error: ") and message in err
    assert not (tmp_path / "out").exists()


def test_shards_of_different_seeds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: shards run with different seeds merged without a word. Refused, because each
    seed draws other generated cases: the slices are not one run's cases."""
    shards = _shards(_every_must_passed(), 2)
    shards[1].run_record = shards[1].run_record.with_(seed=1)
    assert (
        merge_main([*_write(tmp_path, shards), "--report-dir", str(tmp_path / "out")]) == BAD_INPUT
    )
    assert "different seeds (" in capsys.readouterr().err


def test_whole_runs_are_not_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = [_run(_identity(run_id=f"r{i}"), _every_must_passed()) for i in range(2)]
    assert (
        merge_main([*_write(tmp_path, whole), "--report-dir", str(tmp_path / "out")]) == BAD_INPUT
    )
    assert "whole runs, not shards" in capsys.readouterr().err


# -- the metamorphic property: merge(shards) decides as the unsharded run --------------------

OUTCOMES = st.sampled_from(["passed", "failed", "unsupported"])
CAUSES = st.sampled_from([None, *SkipCause])


@st.composite
def items(draw: st.DrawFn) -> list[Results]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        findings = draw(
            st.lists(st.tuples(st.sampled_from([r.id for r in REQS]), OUTCOMES), max_size=4)
        )
        cause = draw(CAUSES)
        run: dict[str, Any] = {"outcome": "skipped" if cause else "passed", "cause": cause}
        if cause is not None:
            run["reason"] = f"why {i}"
            run["covers"] = tuple(draw(st.lists(st.sampled_from(MUSTS), max_size=2, unique=True)))
        if cause == SkipCause.BUDGET:
            run["budget"] = "request budget spent (--budget-requests)"
            run["unsent"] = draw(st.integers(0, 3))
        if cause == SkipCause.RATE_LIMITED:
            run["no_verdict"] = "the target kept answering 429"
        caps = draw(
            st.dictionaries(
                st.sampled_from(["echo", "best_of"]),
                st.sampled_from(["offered", "declined"]),
                max_size=2,
            )
        )
        run["capabilities"] = {f: {"outcome": o, "detail": ""} for f, o in caps.items()}
        out.append(_item(f"item{i}", findings, **run))
    return out


def _essence(verdict: Any) -> tuple[Any, ...]:
    return (
        verdict.word,
        verdict.exit_code,
        sorted(verdict.failed),
        sorted(verdict.unrun),
        sorted(u.id for u in verdict.coverage.untested),
        sorted(u.id for u in verdict.coverage.not_applicable),
        sorted(verdict.coverage.deselected),
    )


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    played=items(),
    n=st.integers(1, 4),
    strict=st.booleans(),
    required=st.lists(st.sampled_from(["echo", "best_of"]), max_size=2, unique=True),
    deselected=st.lists(st.sampled_from(MUSTS), max_size=2, unique=True),
    not_applicable=st.lists(st.sampled_from(MUSTS), max_size=2, unique=True),
    known=st.lists(st.sampled_from([r.id for r in REQS]), max_size=2, unique=True),
)
def test_the_merge_of_shards_decides_as_the_unsharded_run(
    played: list[Results],
    n: int,
    strict: bool,
    required: list[str],
    deselected: list[str],
    not_applicable: list[str],
    known: list[str],
) -> None:
    identity: dict[str, Any] = {
        "strict": strict,
        "require_capabilities": tuple(required),
        "deselected": tuple(deselected),
        "not_applicable": {rid: "the spec declares no such thing" for rid in not_applicable},
        "known_failures": tuple(sorted(known)),
    }
    whole = _run(_identity(run_id="whole", **identity), played)
    unsharded = decide(whole)
    _, merged = merge(_shards(played, n, **identity))
    assert _essence(merged) == _essence(unsharded)
