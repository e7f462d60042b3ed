"""One judge: every way the suite judges an exchange gives the same findings.

The transcript corpus (tests/transcripts/, real servers' answers) goes through every entry
point that judges an exchange: the public ``conformance.judge``, the core's
``judge_alone``, the transcript tool (``tools/real_targets/transcript.judge``), the traffic
judge reading each transcript as traffic (``completions-conformance judge``'s and the
proxy's ``TrafficJudge``, its verdict snapshot attributed) and the engine's ``ItemRun``
(the transcript's exchange handed to it as the answer to a send, its Results attributed as
``conclude`` attributes a run's). Each must give, per exchange, the same requirements with
the same outcomes and messages: they all call ``conformance.judging.judge.judge_into``, and
attribution (one defect, one finding) runs over what it tallied.

The requirements compared are those every entry point judges: the header-only ones a
transcript with no headers cannot witness are left out (``transcript.unknowable``, as the
transcript tool leaves them out), and so is TARGET-ALIVE, which traffic never judges (a
recorded answer says only that the target answered: ``traffic_judge.VACUOUS``).
"""

from __future__ import annotations

import sys
from concurrent.futures import Future
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

import conformance
from conformance.judging.checks import load_checks
from conformance.judging.document.spec import Spec
from conformance.judging.judge import judge_alone
from conformance.judging.requirements import REGISTRY, Requirement
from conformance.judging.traffic_judge import VACUOUS, TrafficJudge
from conformance.judging.verdict.attribution import attribute
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.wire.traffic import transcript_entry
from conformance.run.item import ItemRun
from conformance.run.resend import RetryPolicy
from conformance.run.session import RunState, Sent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "real_targets"))
import transcript

HERE = Path(__file__).resolve().parent / "transcripts"
FILES = sorted(HERE.glob("*/*.json"))

#: Per requirement: (outcome, message, path). A requirement that did not apply is absent.
Judged = dict[str, tuple[str, str, str | None]]


@cache
def _spec(path: Path) -> Spec:
    return transcript.spec_of(transcript.load(path), path.parent)


def _judges(data: dict[str, Any]) -> list[Requirement]:
    load_checks()
    skip = transcript.unknowable(data) | VACUOUS
    return [r for r in REGISTRY.values() if r.id not in skip]


def _of_findings(findings: list[Finding], ids: set[str]) -> Judged:
    assert len({f.requirement for f in findings}) == len(findings), "one finding per requirement"
    return {f.requirement: (f.outcome, f.message, f.path) for f in findings if f.requirement in ids}


def _of_results(results: Results, ids: set[str]) -> Judged:
    """What a Results tallied of its one exchange, read back per requirement (after
    attribution: a withheld failure is neither failed nor checked)."""
    out: Judged = {}
    for rid, tally in results.tallies.items():
        if rid not in ids or not tally.checked:
            continue
        if tally.errored or tally.failed or tally.unsupported:
            (example,) = tally.examples
            out[rid] = (example.outcome, example.message, example.path)
        else:
            out[rid] = ("passed", "", None)
    return out


def through_item_run(spec: Spec, judges: list[Requirement], data: dict[str, Any]) -> Results:
    """The exchange as the engine meets it: the answer to an ItemRun's send, judged by the
    run's requirements (each at its level under the document), then attributed as
    ``conclude`` attributes a run's Results."""
    exchange = transcript.to_exchange(data)

    def dispatch(case: Any, via: Any = None, **_: Any) -> Future[Sent]:
        sent: Future[Sent] = Future()
        sent.set_result(Sent(exchange))
        return sent

    run = SimpleNamespace(
        spec=spec,
        requirements=[r.under(spec) for r in judges],
        health=SimpleNamespace(down=None),
        client=SimpleNamespace(retry=RetryPolicy()),
        emit=lambda event: None,
        dispatch=dispatch,
    )
    item = ItemRun(cast(RunState, run))
    assert item.send(exchange.case) is exchange
    attribute(item.results)
    return item.results


def through_traffic(spec: Spec, judges: list[Requirement], path: Path) -> Results:
    """The transcript read as traffic (the reader of ``completions-conformance judge``),
    judged by the traffic judge, its verdict snapshot attributed."""
    judge = TrafficJudge(spec, target=str(path), requirements=judges)
    data = transcript.load(path)
    assert judge.take(transcript_entry(path.name, data)) is None
    return judge.snapshot().overall


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_every_judging_entry_point_gives_the_same_findings(path: Path) -> None:
    data = transcript.load(path)
    spec = _spec(path)
    judges = _judges(data)
    ids = {r.id for r in judges}
    exchange = transcript.to_exchange(data)

    alone = _of_findings(judge_alone(spec, exchange, requirements=judges), ids)
    seen = {
        "conformance.judge": _of_findings(conformance.judge(spec, exchange), ids),
        "ItemRun (the engine)": _of_results(through_item_run(spec, judges, data), ids),
        "TrafficJudge": _of_results(through_traffic(spec, judges, path), ids),
    }
    for name, judged in seen.items():
        assert judged == alone, f"{name} disagrees with judge_alone on {path.name}: " + repr(
            {
                rid: (judged.get(rid), alone.get(rid))
                for rid in sorted(set(judged) | set(alone))
                if judged.get(rid) != alone.get(rid)
            }
        )
    failed = {rid: message for rid, (outcome, message, _) in alone.items() if outcome == "failed"}
    tool = {rid: m for rid, m in transcript.judge(data, spec, where=path.parent).items()}
    assert {rid: m for rid, m in tool.items() if rid in ids} == failed


def test_the_corpus_exercises_every_outcome_and_attribution() -> None:
    """The comparison means something: the corpus holds failures, declined capabilities,
    and findings attribution withholds (so a judge that skipped attribution would differ)."""
    outcomes: set[str] = set()
    withheld = 0
    for path in FILES:
        data = transcript.load(path)
        spec, judges = _spec(path), _judges(data)
        exchange = transcript.to_exchange(data)
        raw = {f.requirement: f.outcome for f in judge_alone(spec, exchange, requirements=judges)}
        outcomes |= set(raw.values())
        results = through_item_run(spec, judges, data)
        withheld += sum(len(t.not_judged) for t in results.tallies.values())
    assert {"passed", "failed", "unsupported"} <= outcomes
    assert withheld > 0
