"""The quick validators say exactly what jsonschema's own say, only faster on long arrays.

Proof by comparison: for schemas inside and outside the shape the shortcut decides
(scalars with formats, arrays with bounds, anyOf/oneOf of them, nullable, refs of other
keywords) and JSON values drawn to hit and miss them, every error (message, path, schema
path) and the best match are the same as the plain OpenAPI validators'.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import best_match
from support import examples, plain_validator

from conformance.judging.document.quick_schema import compile_validator, sure
from conformance.judging.document.spec import load_spec

scalars = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean", "null", "object"])},
    optional={
        "format": st.sampled_from(["int32", "int64", "date", "float"]),
        "nullable": st.booleans(),
        "description": st.just("d"),
        "minimum": st.integers(-3, 3),
        "default": st.just(0),
    },
)


def _arrays(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("array")},
        optional={
            "items": inner,
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 4),
            "prefixItems": st.lists(inner, max_size=1),
            "example": st.just([]),
        },
    )


schemas = st.recursive(
    scalars,
    lambda inner: st.one_of(
        _arrays(inner),
        st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=4)}),
        st.fixed_dictionaries({"oneOf": st.lists(inner, min_size=1, max_size=4)}),
    ),
    max_leaves=8,
)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**33), 2**33)
    | st.floats(allow_nan=False, width=32)
    | st.sampled_from([1.0, 2**31, -(2**31) - 1])
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=12,
)


def _errors(validator: Any, instance: Any) -> tuple[Any, ...]:
    """Every error, the best match, or what was raised (a 3.0 schema of type null)."""
    try:
        found = [
            (e.message, list(e.path), list(e.schema_path)) for e in validator.iter_errors(instance)
        ]
        best = best_match(validator.iter_errors(instance))
    except Exception as exc:
        return (type(exc).__name__, str(exc))
    return found, None if best is None else (best.message, list(best.path))


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas, instance=values, is_31=st.booleans())
def test_the_quick_validators_report_what_the_plain_ones_do(
    schema: dict[str, Any], instance: Any, is_31: bool
) -> None:
    quick, plain = compile_validator(schema, is_31), plain_validator(schema, is_31)
    assert _errors(quick, instance) == _errors(plain, instance)
    verdict = sure(quick, schema, instance)
    if verdict is not None:  # when the shortcut decides, it decides right
        assert verdict == plain.is_valid(instance)


@pytest.mark.parametrize("name", ["aihubmix", "nscale", "openai"])
@pytest.mark.parametrize(
    "prompt",
    [
        [15] * 8183,  # the context-window probe's prompt: valid
        [15] * 8182 + ["x"],  # one string among the tokens, at the end
        [[1, 2], [3]] * 50,
        ["a", "b"] * 100,
        [True] * 3,
        [],
    ],
    ids=["tokens", "one-string", "token-arrays", "strings", "bools", "empty"],
)
def test_long_prompts_are_judged_as_before_under_every_vendored_document(
    name: str, prompt: list[Any]
) -> None:
    spec = load_spec(name)
    body = {"model": "m", "prompt": prompt, "max_tokens": 8}
    quick = spec.validators["request"]
    plain = plain_validator(quick.schema, spec.is_31)
    assert type(quick) is not type(plain)
    assert _errors(quick, body) == _errors(plain, body)


@pytest.mark.parametrize("name", ["aihubmix", "nscale"])
def test_a_long_token_prompt_is_decided_without_descending_into_each_token(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(name)
    quick = spec.validators["request"]
    calls = []
    descend = type(quick).descend

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return descend(self, *args, **kwargs)

    monkeypatch.setattr(type(quick), "descend", counted)
    assert quick.is_valid({"model": "m", "prompt": [15] * 8183, "max_tokens": 8})
    assert 0 < len(calls) < 100  # the plain validator descends more than 30,000 times
