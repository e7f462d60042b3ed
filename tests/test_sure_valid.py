"""The one-pass "valid for certain" never says valid where jsonschema finds an error.

conformance/judging/document/sure_valid.py lets the judge skip jsonschema's descent when an
instance is valid for certain. Proof by comparison: for drawn schemas (every keyword it
decides, and keywords it leaves to jsonschema beside them) and drawn values, in both
dialects, a "certain" is never wrong, and the errors through it are jsonschema's own, to
the message; on the vendored documents' schemas, real chunks and bodies and their faulty
twins give the same errors; and two chunks that differ only in a value the schema pins
are still judged apart.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import best_match
from support import examples, plain_validator

from conformance.judging.document import sure_valid
from conformance.judging.document.quick_schema import compile_validator
from conformance.judging.document.spec import load_spec

NAMES = ["id", "object", "n", "x"]
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]

leaves = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3),
        "format": st.sampled_from(["int32", "int64", "date", "float", "unixtime"]),
        "nullable": st.booleans(),
        "enum": st.lists(st.sampled_from(["a", "b", None, 1, True, 1.0, [], {}]), max_size=3),
        "const": st.sampled_from(["a", None, 1, False]),
        "minimum": st.integers(-3, 3),
        "pattern": st.just("^a"),
        "description": st.just("d"),
        "readOnly": st.booleans(),
        "x-extra": st.just(1),
    },
)


def _objects(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array", "string"]),
            "properties": st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
            "required": st.lists(st.sampled_from(NAMES), max_size=2),
            "additionalProperties": st.booleans() | inner,
            "patternProperties": st.just({"^x": {"type": "integer"}}),
            "nullable": st.booleans(),
        },
    )


def _arrays(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("array")},
        optional={
            "items": inner | st.booleans(),
            "prefixItems": st.lists(inner, max_size=1),
            "minItems": st.integers(0, 2),
        },
    )


def _combined(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        *(
            st.fixed_dictionaries({k: st.lists(inner, min_size=0, max_size=3)})
            for k in ("anyOf", "allOf", "oneOf")
        ),
        st.fixed_dictionaries(
            {"anyOf": st.lists(inner, min_size=1, max_size=2), "discriminator": st.just({})}
        ),
    )


schemas = st.recursive(
    leaves | st.booleans(),
    lambda inner: _objects(inner) | _arrays(inner) | _combined(inner),
    max_leaves=10,
).map(lambda schema: schema if isinstance(schema, dict) else {"allOf": [schema]})
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 2**33)
    | st.floats(allow_nan=True, width=32)
    | st.sampled_from([1.0, 0.0, "a", "b", "2024-01-01", "", "ax"])
    | st.text(max_size=2),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(NAMES), inner),
    max_leaves=12,
)


def _errors(validator: Any, found: Any) -> tuple[Any, ...]:
    """Every error (message, path, schema path) and the best match, or what was raised."""
    try:
        errors = list(found)
        best = best_match(iter(errors))
    except Exception as exc:
        return (type(exc).__name__, str(exc))
    listed = [(e.message, list(e.path), list(e.schema_path)) for e in errors]
    return listed, None if best is None else (best.message, list(best.path))


def _same(validator: Any, instance: Any) -> None:
    plain = plain_validator(validator.schema, _is_31(validator))
    certain = sure_valid.compile_sure(validator)(instance)
    through = _errors(validator, sure_valid.iter_errors(validator, instance))
    assert through == _errors(validator, validator.iter_errors(instance))
    assert through == _errors(plain, plain.iter_errors(instance))
    if certain:
        assert through == ([], None)


def _is_31(validator: Any) -> bool:
    from conformance.judging.document.quick_schema import QuickOAS31Validator

    return type(validator) is QuickOAS31Validator


@settings(max_examples=examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas, instance=values, is_31=st.booleans())
def test_a_certain_valid_is_never_wrong_and_the_errors_are_jsonschemas(
    schema: Any, instance: Any, is_31: bool
) -> None:
    _same(compile_validator(schema, is_31), instance)


def _chunk(**fields: Any) -> dict[str, Any]:
    chunk = {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1_700_000_000,
        "model": "m",
        "choices": [{"text": " tok", "index": 0, "logprobs": None, "finish_reason": None}],
        "t": 12,
    }
    return chunk | fields


def _twins() -> list[Any]:
    """A valid chunk, a final one with usage and logprobs, and faulty twins of them."""
    final = _chunk(
        choices=[
            {
                "text": "a",
                "index": 0,
                "finish_reason": "length",
                "logprobs": {
                    "tokens": ["a"],
                    "token_logprobs": [-0.5],
                    "top_logprobs": [{"a": -0.5}],
                    "text_offset": [0],
                },
            }
        ],
        usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        system_fingerprint="fp",
    )
    out: list[Any] = [_chunk(), final, {}, [], None, "x"]
    for base in (_chunk(), final):
        for key in list(base):
            for value in (None, 1, 1.0, True, "s", [], {}, "lengthy"):
                twin = copy.deepcopy(base)
                twin[key] = value
                out.append(twin)
            twin = copy.deepcopy(base)
            del twin[key]
            out.append(twin)
        for key in ("text", "index", "logprobs", "finish_reason"):
            for value in (None, 1, 2.0, False, "stop", "lengthy", [], {"tokens": [1]}):
                twin = copy.deepcopy(base)
                twin["choices"][0][key] = value
                out.append(twin)
            twin = copy.deepcopy(base)
            del twin["choices"][0][key]
            out.append(twin)
    return out


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("name", ["aihubmix", "nscale", "openai"])
def test_the_vendored_schemas_give_the_same_errors_on_chunks_and_their_faulty_twins(
    name: str, strict: bool
) -> None:
    spec = load_spec(name, strict=strict)
    for validator in spec.validators.values():
        if validator is None:
            continue
        for instance in _twins():
            _same(validator, instance)


@pytest.mark.parametrize("name", ["aihubmix", "nscale", "openai"])
def test_a_conformant_chunk_is_decided_in_one_pass(name: str) -> None:
    """The short cut is taken where it matters: every chunk of a conformant stream."""
    spec = load_spec(name)
    assert sure_valid.compile_sure(spec.validators["chunk"])(_chunk())
    assert sure_valid.compile_sure(spec.validators["response"])(
        _chunk(
            choices=[{"text": "a", "index": 0, "logprobs": None, "finish_reason": "stop"}],
            usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        )
    )


@pytest.mark.parametrize("name", ["aihubmix", "openai"])
def test_chunks_that_differ_only_in_a_pinned_value_are_judged_apart(name: str) -> None:
    """A finish_reason outside the declared enum and an object other than text_completion
    are not valid for certain: jsonschema runs and reports them, as before."""
    spec = load_spec(name)
    validator = spec.validators["chunk"]
    certain = sure_valid.compile_sure(validator)
    good = _chunk(choices=[{"text": "a", "index": 0, "logprobs": None, "finish_reason": "length"}])
    for bad in (
        _chunk(choices=[{"text": "a", "index": 0, "logprobs": None, "finish_reason": "lengthy"}]),
        _chunk(object="text_completions"),
        _chunk(created=1.5),
        _chunk(created=True),
        _chunk(id=None),
    ):
        assert certain(good) and not certain(bad)
        assert list(sure_valid.iter_errors(validator, good)) == []
        found = [e.message for e in sure_valid.iter_errors(validator, bad)]
        assert found == [e.message for e in validator.iter_errors(bad)] != []


def test_another_validator_class_is_never_short_cut() -> None:
    plain = plain_validator({"type": "object"}, True)
    assert not sure_valid.compile_sure(plain)({})
    assert json.dumps(list(sure_valid.iter_errors(plain, {}))) == "[]"
