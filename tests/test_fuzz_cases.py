"""conformance.strategies.fuzz_cases: schemathesis's generation, classified by the suite's oracle."""

from __future__ import annotations

import pytest

from conformance.judging.document.spec import BUILTIN_SPECS, load_spec
from conformance.strategies import fuzz_cases, oracle_rules

pytest.importorskip("schemathesis")


@pytest.mark.parametrize("name", sorted(BUILTIN_SPECS))
def test_fuzz_cases_are_what_they_claim(name: str) -> None:
    spec = load_spec(name)
    cases = fuzz_cases(spec, 30, 1, model="run-model", max_tokens=4)
    assert 20 <= len(cases) <= 30
    modes = {c.mode for c in cases}
    assert modes == {"valid", "invalid"}
    for case in cases:
        body = case.body
        if case.raw_body is not None:
            assert case.mode == "invalid"
            continue
        rules = oracle_rules(spec, body)
        if case.mode == "valid":
            assert rules == set(), case.label
        else:
            assert case.breaks == "fuzz: " + ", ".join(sorted(rules))
        if isinstance(body.get("model"), str):
            assert body["model"] == "run-model"
        value = body.get("max_tokens")
        assert not (isinstance(value, int) and not isinstance(value, bool) and value > 4)


def test_no_cases_for_zero() -> None:
    assert fuzz_cases(load_spec("aihubmix"), 0, model="m") == []


def test_integral_floats_and_open_counts_are_read_as_the_request_means_them() -> None:
    """Found by the deep fuzz on the reference target: ``n: 39.0`` and ``logprobs: 1.0``
    are JSON Schema integers (valid), served as such, and were judged as if absent
    (CHOICES-COUNT and LOGPROBS-PRESENCE false alarms); a negative ``n`` (valid under
    Nscale) made CHOICES-COUNT expect a negative count."""
    from conformance.judging.checks.logprobs_rules import requested_logprobs
    from conformance.judging.wire.case import Case

    assert Case({"n": 3.0}).n == 3 and Case({"n": 2}).n == 2
    assert Case({"n": True}).n == 1 and Case({"n": 2.5}).n == 1
    assert Case({"n": -2147483648}).n == 1 and Case({"n": 0}).n == 1
    assert Case({"max_tokens": 8.0}).int_param("max_tokens") == 8
    assert requested_logprobs({"logprobs": 1.0}) == 1
    assert requested_logprobs({"logprobs": -3}) is None


@pytest.mark.parametrize("spec", ["aihubmix", "nscale"])
def test_reference_target_answers_to_integral_floats_pass_every_check(spec: str) -> None:
    from conformance import judge
    from conformance.judging.requirements import REGISTRY, Level
    from conformance.judging.wire.case import Case
    from conformance.reference import ReferenceServer
    from conformance.run.client import Client

    loaded = load_spec(spec)
    body = {"model": "reference-model", "prompt": ["a", "b"], "max_tokens": 4.0, "n": 2.0}
    with ReferenceServer(spec) as server:
        client = Client(base_url=server.url, media_type=loaded.request_media_type)
        try:
            exchanges = [
                client.send(Case({**body, **extra}, mode="valid", label="integral floats"))
                for extra in ({}, {"logprobs": 1.0}, {"stream": True, "logprobs": 1.0})
            ]
        finally:
            client.close()
    for exchange in exchanges:
        # OpenAPI 3.0's validator (Nscale) refuses 2.0 as an integer: a 400 is allowed too.
        assert exchange.status == (200 if spec == "aihubmix" else 400)
        # MUST level: under Nscale the 400 is a declined valid request (SHOULD), not a defect.
        failed = [
            f
            for f in judge(loaded, exchange)
            if f.outcome != "passed" and REGISTRY[f.requirement].level == Level.MUST
        ]
        assert failed == [], [(f.requirement, f.message) for f in failed]
