"""Spec-mutation property test: tighten a copy of each vendored spec at random, and the
generated requests follow the copy, judged by openapi-core (an independent validator).

Every valid, edge and probe case validates under the tightened copy without adapting;
every invalid case breaks exactly its rule; no prompt form the copy allows disappears.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.judging.document.oracle import alternatives
from conformance.judging.document.spec import BUILTIN_SPECS, Spec, load_spec, resolve_refs
from conformance.run.preflight import probe_case, quick_probe_case
from conformance.strategies import (
    build_case,
    draw,
    edge_requests,
    invalid_cases,
    oracle_rules,
    prompt_form,
    valid_requests,
)
from conformance.strategies._schema import types_of

MODEL = "m"
# The two vendor documents: OpenAI's (also in BUILTIN_SPECS) has AIHubMix's request schema
# upstream, and re-parsing its 3 MB here would cost ~30 s per run (bench_spec_load.py).
MUTATED_SPECS = tuple(name for name in BUILTIN_SPECS if name != "openai")
DOCUMENTS = {
    name: resolve_refs(yaml.safe_load(load_spec(name).path.read_text())) for name in MUTATED_SPECS
}


def request_properties(document: dict[str, Any]) -> dict[str, Any]:
    body = document["paths"]["/v1/completions"]["post"]["requestBody"]["content"]
    schema = next(iter(body.values()))["schema"]
    props: dict[str, Any] = schema["properties"]
    return props


def leaves(schema: Any) -> list[dict[str, Any]]:
    return [leaf for leaf in alternatives(schema) if types_of(leaf) - {"null"}]


def tighten(document: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy of ``document`` with request bounds tightened at random (never emptied)."""
    doc = copy.deepcopy(document)
    props = request_properties(doc)
    for name, schema in props.items():
        for leaf in leaves(schema):
            kinds = types_of(leaf)
            if "string" in kinds and name in ("prompt", "stop", "suffix", "user"):
                if rng.random() < 0.7:
                    leaf["maxLength"] = rng.randint(1, 12)
                if rng.random() < 0.3:
                    leaf["minLength"] = rng.randint(1, leaf.get("maxLength", 12))
            if "array" in kinds and isinstance(leaf.get("items"), dict):
                if rng.random() < 0.6:
                    leaf["maxItems"] = rng.randint(max(1, leaf.get("minItems", 1)), 3)
                if rng.random() < 0.3:
                    leaf["minItems"] = rng.randint(1, leaf.get("maxItems", 3))
                for item in leaves(leaf["items"]):
                    item_kinds = types_of(item)
                    if "integer" in item_kinds and rng.random() < 0.6:
                        item["minimum"] = rng.choice([1, 100, 500])
                        if rng.random() < 0.5:
                            item["maximum"] = item["minimum"] + rng.randint(0, 50)
                    if "string" in item_kinds and rng.random() < 0.6:
                        item["maxLength"] = rng.randint(1, 6)
                    if "array" in item_kinds and rng.random() < 0.5:
                        item["maxItems"] = rng.randint(1, 4)
                        for inner in leaves(item.get("items")):
                            if "integer" in types_of(inner) and rng.random() < 0.5:
                                inner["minimum"] = rng.choice([3, 250])
            if kinds & {"integer", "number"} and name != "seed":
                low = leaf.get("minimum")
                high = leaf.get("maximum")
                if rng.random() < 0.5:
                    new_low = (low if isinstance(low, int | float) else 0) + rng.randint(0, 2)
                    if high is None or new_low <= high:
                        leaf["minimum"] = new_low
                if rng.random() < 0.5:
                    floor = leaf.get("minimum", 0)
                    leaf["maximum"] = floor + rng.randint(0, 3)
            if leaf.get("enum") and len(leaf["enum"]) > 1 and rng.random() < 0.5:
                leaf["enum"] = leaf["enum"][: rng.randint(1, len(leaf["enum"]))]
    return doc


def write(doc: dict[str, Any], tmp: Path, name: str) -> Spec:
    path = tmp / f"{name}-tight.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return load_spec(str(path))


def forms_of(cases: list[Any]) -> set[str]:
    return {str(prompt_form(c.body.get("prompt"))) for c in cases} - {"null", "None"}


def assert_follows(spec: Spec, expected_forms: set[str]) -> None:
    valid = draw(valid_requests(spec, model=MODEL, stream=None), 24, seed_value=3)
    edges = edge_requests(spec, model=MODEL)
    for case in [*valid, *edges]:
        assert oracle_rules(spec, case.body) == set(), (case.label, case.body)
        assert "(adapted:" not in case.label, case.label
    assert forms_of(valid) | forms_of(edges) == expected_forms
    for case in invalid_cases(spec, model=MODEL):
        assert oracle_rules(spec, case.body, raw=case.raw_body) == {case.breaks}, case.label
    # The preflight's quick check (run/preflight.py) takes the minimal request only when
    # the case constructor would send it unchanged.
    quick = quick_probe_case(MODEL, spec)
    assert quick is None or quick == probe_case(MODEL, spec)


# Fixed seeds rather than @given: each example costs a second, and a failure names its seed
# (shrinking a spec mutation by hand is quicker than Hypothesis shrinking a Random seed).
SEEDS = range(5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(MUTATED_SPECS))
def test_generation_follows_a_tightened_spec(name: str, seed: int, tmp_path: Path) -> None:
    spec = write(tighten(DOCUMENTS[name], random.Random(seed)), tmp_path, name)
    assert_follows(spec, {"string", "strings", "tokens", "token-lists"})


def test_the_issue_example_tightening(tmp_path: Path) -> None:
    """String maxLength 5, string-array maxItems 1, token ids minimum 100 (issue 13)."""
    doc = copy.deepcopy(DOCUMENTS["aihubmix"])
    branches = leaves(request_properties(doc)["prompt"])
    by_form = {prompt_form(_sample(b)): b for b in branches}
    by_form["string"]["maxLength"] = 5
    by_form["strings"]["maxItems"] = 1
    by_form["tokens"]["items"]["minimum"] = 100
    spec = write(doc, tmp_path, "aihubmix")
    assert_follows(spec, {"string", "strings", "tokens", "token-lists"})
    tokens = [
        c.body["prompt"]
        for c in draw(valid_requests(spec, model=MODEL), 40)
        if prompt_form(c.body["prompt"]) == "tokens"
    ]
    assert tokens and all(t >= 100 for ids in tokens for t in ids)


def _sample(branch: dict[str, Any]) -> Any:
    items = branch.get("items") or {}
    if "string" in types_of(branch):
        return "x"
    if "string" in types_of(items):
        return ["x"]
    if "integer" in types_of(items):
        return [1]
    return [[1]]


def test_build_case_adapts_or_skips(tmp_path: Path) -> None:
    doc = copy.deepcopy(DOCUMENTS["aihubmix"])
    props = request_properties(doc)
    leaves(props["max_tokens"])[0]["minimum"] = 1
    leaves(props["n"])[0]["maximum"] = 1
    spec = write(doc, tmp_path, "aihubmix")
    body = {"model": MODEL, "prompt": "Say hi", "max_tokens": 0, "n": 2, "stream": True}
    case = build_case(spec, body, mode="probe", label="streamed max_tokens 0")
    assert case.body["max_tokens"] == 1 and case.body["n"] == 1
    assert "adapted: max_tokens 0→1, n 2→1" in case.label
    assert oracle_rules(spec, case.body) == set()
    # A string prompt where the spec admits only token prompts cannot be adapted.
    only_tokens = copy.deepcopy(DOCUMENTS["aihubmix"])
    prompt = request_properties(only_tokens)["prompt"]
    prompt["oneOf"] = [b for b in prompt["oneOf"] if b.get("type") == "array"][1:2]
    spec = write(only_tokens, tmp_path, "tokens")
    from conformance.strategies import CaseSkipped

    with pytest.raises(CaseSkipped, match="prompt"):
        build_case(spec, {"model": MODEL, "prompt": "Say hi"}, mode="probe", label="text")
    # An invalid case must break exactly its rule.
    with pytest.raises(ValueError, match="should break"):
        build_case(
            spec, {"model": MODEL, "prompt": [1]}, mode="invalid", label="x", breaks="n:type"
        )


def test_a_minimal_request_the_document_does_not_take_is_left_to_the_constructor(
    tmp_path: Path,
) -> None:
    """The preflight's quick check takes the minimal request only as it is: a document
    whose max_tokens starts at 2 gets the constructor's adapted case (run/preflight.py)."""
    doc = copy.deepcopy(DOCUMENTS["aihubmix"])
    leaves(request_properties(doc)["max_tokens"])[0]["minimum"] = 2
    spec = write(doc, tmp_path, "aihubmix")
    assert quick_probe_case(MODEL, spec) is None
    assert probe_case(MODEL, spec).body["max_tokens"] == 2
