"""The capability table from single-feature probes: offered, declined, ignored, broken."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support import MODEL, Targets, capability_table, judge, target_args

from conformance.front.plugin import SUITE_DIR
from conformance.judging.checks import load_checks
from conformance.judging.document.contract import Contract
from conformance.judging.document.spec import load_spec
from conformance.judging.verdict import capabilities as cap
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers

BASE = {"model", "prompt", "max_tokens", "temperature"}
# What a probe may carry besides its one feature, because the feature needs it.
ENABLERS = {"include_usage": {"stream"}, "best_of": {"n"}}


def _table(targets: Targets, flavor: str, *faults: str) -> dict[str, dict[str, str]]:
    """Send every probe of ``flavor`` to a reference target and build the table."""
    target = targets.get(flavor, *faults)
    results = Results()
    for case in cap.capability_probes(target.spec, MODEL, 4):
        exchange = target.send(case)
        related: tuple[Exchange, ...] = ()
        if cap.feature_of(case) == "seed":
            related = (exchange,)
            exchange = target.send(cap.seed_twin(case))
        findings = list(judge(target.spec, exchange, related).values())
        cap.record(results, case, exchange, findings, related)
    return {f: c.to_json() for f, c in results.capabilities.items()}


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_each_probe_adds_one_feature_and_is_tagged(flavor: str) -> None:
    spec = load_spec(flavor)
    probes = cap.capability_probes(spec, MODEL, 4)
    features = [cap.feature_of(c) for c in probes]
    assert len(features) == len(set(features)) and all(features)
    assert {"echo", "logprobs", "n", "best_of", "suffix", "include_usage", "seed"} <= set(features)
    assert {f for f in features if f.startswith("prompt:")} == {
        "prompt:string",
        "prompt:strings",
        "prompt:tokens",
        "prompt:token-lists",
    }
    for case in probes:
        feature = cap.feature_of(case)
        extra = set(case.body) - BASE - ENABLERS.get(feature, set())
        assert len(extra) <= 1, (feature, extra)  # the prompt-form probes add none
        assert spec.validate("request", case.body) is None, feature
        assert case.mode == "probe"


def test_limits_and_nulls_come_from_the_spec() -> None:
    spec = load_spec("aihubmix")
    probes = {cap.feature_of(c): c for c in cap.capability_probes(spec, MODEL, 4)}
    assert probes["logprobs:max"].body["logprobs"] == 5  # the document's maximum
    assert len(probes["stop:max"].body["stop"]) == 4  # its maxItems, three levels down
    nulls = {f for f in probes if f.startswith("null:")}
    assert "null:temperature" in nulls and "null:model" not in nulls
    for feature in nulls:
        assert probes[feature].body[feature[len("null:") :]] is None


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_conformant_target_offers_or_declines_every_feature(targets: Targets, flavor: str) -> None:
    table = _table(targets, flavor)
    outcomes = {f: e["outcome"] for f, e in table.items()}
    assert set(outcomes.values()) <= {"offered", "declined"}, table
    # The reference target declines token-array prompts with a proper 400 (a flavor gap).
    assert outcomes["n"] == outcomes["echo"] == outcomes["include_usage"] == "offered"


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_ignored_n_is_ignored_and_nothing_else(targets: Targets, flavor: str) -> None:
    table = _table(targets, flavor, "choices-ignore-n")
    ignored = {f for f, e in table.items() if e["outcome"] == "ignored"}
    assert ignored == {"n"}, table
    assert table["n"]["detail"] == "1 choice(s) for 2 asked"
    assert not any(e["outcome"] == "broken" for e in table.values()), table


def test_other_faults_show_as_ignored_or_broken(targets: Targets) -> None:
    assert _table(targets, "aihubmix", "echo-ignored")["echo"]["outcome"] == "ignored"
    assert _table(targets, "aihubmix", "logprobs-ignored")["logprobs"]["outcome"] == "ignored"
    usage = _table(targets, "aihubmix", "stream-usage-missing")["include_usage"]
    assert usage["outcome"] == "ignored"
    broken = _table(targets, "aihubmix", "capability-500")
    assert {f for f, e in broken.items() if e["outcome"] == "broken"} >= {"echo", "suffix"}
    assert broken["n"]["outcome"] == "offered"  # one feature per probe: no collateral


def _answer(status: int | None, body: object, feature: str = "logprobs") -> tuple[Case, Exchange]:
    case = Case({"model": "m", "prompt": "x"}, mode="probe", tags=frozenset({cap.TAG + feature}))
    raw = json.dumps(body).encode()
    exchange = Exchange(
        case=case,
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=b"{}",
        status=status,
        headers=Headers([("content-type", "application/json")]),
        body=raw,
        transport_error=None if status else "connection reset",
    )
    return case, exchange


ENVELOPE = {"error": {"message": "logprobs is not supported", "type": "invalid_request_error"}}
WITH_LOGPROBS = {"choices": [{"index": 0, "text": "x", "logprobs": {"tokens": ["x"]}}]}


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (400, ENVELOPE, "declined"),
        (400, {"detail": "no"}, "broken"),  # a 4xx without the envelope is not a proper decline
        (500, ENVELOPE, "broken"),
        (None, {}, "broken"),
        (429, ENVELOPE, "broken"),
        (200, {"choices": [{"index": 0, "text": "x", "logprobs": None}]}, "ignored"),
        (200, WITH_LOGPROBS, "offered"),
    ],
)
def test_classify_by_status_and_effect(status: int | None, body: object, outcome: str) -> None:
    case, exchange = _answer(status, body)
    assert cap.classify(case, exchange) == outcome


def test_a_must_failure_of_an_owning_requirement_breaks_the_feature() -> None:
    load_checks()
    case, exchange = _answer(200, WITH_LOGPROBS)
    owner = Finding("LOGPROBS-OFFSETS", "failed", "text_offset is one short")
    other = Finding("RESP-ID", "failed", "id is empty")
    assert cap.classify(case, exchange, [other]) == "offered"
    verdict = cap.assess(case, exchange, [owner])
    assert verdict.outcome == "broken" and "LOGPROBS-OFFSETS" in verdict.detail


def test_the_worse_outcome_stays_and_merges() -> None:
    a, b = Results(), Results()
    a.note_capability("echo", "offered", "200")
    a.note_capability("echo", "ignored", "no echo")
    a.note_capability("echo", "offered", "200")
    b.note_capability("echo", "broken", "status 500")
    assert a.capabilities["echo"].to_json() == {"outcome": "ignored", "detail": "no echo"}
    a.merge(b)
    assert a.capabilities["echo"].outcome == "broken"
    with pytest.raises(ValueError, match="unknown capability outcome"):
        a.note_capability("echo", "honoured")


def test_unmet_lists_what_is_not_offered_and_what_was_not_probed() -> None:
    results = Results()
    results.note_capability("echo", "offered", "200")
    results.note_capability("logprobs", "offered", "200")
    results.note_capability("logprobs:max", "declined", "400 with the error envelope")
    results.note_capability("n", "ignored", "1 choice(s) for 2 asked")
    assert cap.unmet(results, ["echo"]) == []
    assert cap.unmet(results, ["logprobs", "n", "suffix"]) == [
        "logprobs:max: declined (400 with the error envelope)",
        "n: ignored (1 choice(s) for 2 asked)",
        "suffix: not probed in this run",
    ]


def test_generated_requests_do_not_fill_the_table() -> None:
    results = Results()
    case = Case({"model": "m", "prompt": "x", "echo": True}, tags=frozenset({"param:echo"}))
    _, exchange = _answer(500, {})
    results.record(replace(exchange, case=case), [])
    assert results.capabilities == {}


def test_the_suite_scenario_fills_the_table(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    url = targets.get("aihubmix", "choices-ignore-n").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR / "test_capabilities.py"),
        "-p",
        "no:cacheprovider",
        *target_args(url),
        "--report-dir",
        str(tmp_path),
    )
    assert result.ret == 1, result.stdout.str()  # CHOICES-COUNT (MUST) fails on the n probe
    data = json.loads((tmp_path / "results.json").read_text())
    ignored = {f for f, e in data["capabilities"].items() if e["outcome"] == "ignored"}
    assert ignored == {"n"}
    summary = (tmp_path / "summary.md").read_text()
    assert "| n | ignored | 1 choice(s) for 2 asked |" in summary


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_features_are_probed_in_each_form_servers_treat_apart(flavor: str) -> None:
    probes = {cap.feature_of(c): c for c in cap.capability_probes(load_spec(flavor), MODEL, 4)}
    assert probes["stop:string"].body["stop"] == "\u20420"
    assert isinstance(probes["stop:max"].body["stop"], list)
    assert probes["echo:tokens"].body["prompt"] == probes["prompt:tokens"].body["prompt"]
    assert probes["echo:tokens"].body["echo"] is True


def test_echo_declined_with_token_prompts_is_declined_in_that_form_only(targets: Targets) -> None:
    table = _table_compared(targets, "aihubmix", "echo-declined-token-prompts")
    assert table["echo"]["outcome"] == "offered"
    assert table["echo:tokens"]["outcome"] == "declined"
    results = Results()
    results.capabilities = capability_table(table)
    assert cap.unmet(results, ["echo"]) == [
        'echo:tokens: declined (400 with the error envelope: "echo is not supported with token-id prompts.")'
    ]


def test_echo_ignored_with_token_prompts_is_ignored(targets: Targets) -> None:
    table = _table_compared(targets, "aihubmix", "echo-ignored")
    assert table["echo:tokens"]["outcome"] == "ignored"
    assert _table_compared(targets, "aihubmix")["echo:tokens"]["outcome"] == "offered"


def _table_compared(targets: Targets, flavor: str, *faults: str) -> dict[str, dict[str, str]]:
    """The table with each compared probe judged against the probe it compares with."""
    target = targets.get(flavor, *faults)
    results = Results()
    answered: dict[str, Exchange] = {}
    for case in cap.capability_probes(target.spec, MODEL, 4):
        feature = cap.feature_of(case)
        exchange = target.send(case)
        answered[feature] = exchange
        compared = answered.get(cap.COMPARED_WITH.get(feature, ""))
        related = (compared,) if compared is not None else ()
        findings = list(judge(target.spec, exchange, related).values())
        cap.record(results, case, exchange, findings, related)
    return {f: c.to_json() for f, c in results.capabilities.items()}


def test_require_capabilities_echo_fails_when_token_prompts_decline_it(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    url = targets.get("aihubmix", "echo-declined-token-prompts").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR / "test_capabilities.py"),
        "-p",
        "no:cacheprovider",
        *target_args(url),
        "--report-dir",
        str(tmp_path),
        "--require-capabilities",
        "echo",
    )
    assert result.ret == 1, result.stdout.str()
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["capabilities"]["echo:tokens"]["outcome"] == "declined"
    assert data["capabilities"]["echo"]["outcome"] == "offered"
    assert "echo:tokens: declined" in result.stdout.str()


def test_a_failure_breaks_a_feature_only_where_the_judged_document_makes_it_a_must() -> None:
    # LOGPROBS-TOP-COUNT is a MUST under AIHubMix's text ("up to logprobs+1 elements") and
    # under Nscale's document by the openai-compatible contract (it declares `logprobs`);
    # judged by Nscale's document alone, which says nothing of it, a SHOULD.
    load_checks()
    case, exchange = _answer(200, WITH_LOGPROBS)
    too_many = Finding("LOGPROBS-TOP-COUNT", "failed", "top_logprobs[0] has 7 entries")
    assert cap.classify(case, exchange, [too_many], spec=load_spec("aihubmix")) == "broken"
    assert cap.classify(case, exchange, [too_many], spec=load_spec("nscale")) == "broken"
    alone = load_spec("nscale", contract=Contract.DOCUMENT)
    assert cap.classify(case, exchange, [too_many], spec=alone) == "offered"
