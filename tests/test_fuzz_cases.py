"""strategies.fuzz_cases: schemathesis's generation, classified by the suite's oracle."""

from __future__ import annotations

import pytest

from conformance.spec import BUILTIN_SPECS, load_spec
from strategies import fuzz_cases, oracle_rules

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
