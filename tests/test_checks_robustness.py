"""The judge cannot crash: any JSON a target sends yields findings, never an exception.

Random mutations of conformant completions, stream chunks and error bodies (types
swapped, nulls, lists for objects, huge numbers, NaN and infinities, deep nesting) are
judged by every registered requirement; a check may only return, raise Violation or
raise Unsupported. The same exchanges unmutated produce no failure at all.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples
from synthetic import body_exchange, chunks_for, completion_for, req, stream_exchange

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import load_spec
from conformance.judging.requirements import REGISTRY, Context, Unsupported, Violation
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange

load_checks()
SPECS = {name: load_spec(name) for name in ("aihubmix", "nscale")}
USAGE = {"stream_options": {"include_usage": True}}
CASES: list[Case] = [
    req(),
    req(logprobs=2),
    req(logprobs=1, echo=True),
    req(prompt=["One", "Two"], n=2, logprobs=1),
    req(prompt=[1, 2, 3]),
    req(stop=[" and"], max_tokens=8),
    req(max_tokens=0),
    req(max_tokens=0, echo=True, logprobs=1),
    req(best_of=3, n=2),
    req(mode="invalid"),
]
STREAM_CASES: list[Case] = [
    req(stream=True, **USAGE),
    req(stream=True, logprobs=2, **USAGE),
    req(stream=True, prompt=["One", "Two"], n=2, echo=True, logprobs=1),
    req(stream=True, max_tokens=0, **USAGE),
    req(stream=True, stop=[" and"], tags={"probe:stream-twin"}),
]
ERROR = {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}}
DEEP = object()  # replaced by a deeply nested array after encoding

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.just(DEEP),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, original: Any) -> Any:
    value = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(value)))
        new = draw(values)
        if not path:
            value = new
            continue
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict | list):
            parent[path[-1]] = new
    return value


def _encode(value: Any) -> str:
    text = json.dumps(value, allow_nan=True, default=lambda _: "__DEEP__")
    return text.replace('"__DEEP__"', "[" * 3000 + "]" * 3000)


def _lenient(value: Any) -> Any:
    """``value`` with the deep marker made a real (but shallow enough) nested list."""
    if value is DEEP:
        nested: list[Any] = []
        for _ in range(50):
            nested = [nested]
        return nested
    if isinstance(value, dict):
        return {k: _lenient(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lenient(v) for v in value]
    return value


def judge_raw(exchange: Exchange, related: tuple[Exchange, ...] = ()) -> None:
    """Every requirement under both specs; only Violation and Unsupported may escape."""
    for spec in SPECS.values():
        ctx = Context(exchange.case, exchange, spec, related, now=1_760_000_100.0)
        for req_ in REGISTRY.values():
            try:
                if req_.applies(ctx):
                    req_.check(ctx)
            except (Violation, Unsupported):
                pass


def _with_sdk_view(exchange: Exchange, body: dict[str, Any]) -> Exchange:
    exchange.sdk = {
        "error": None,
        **{k: body[k] for k in ("id", "object", "created", "model")},
        "choices": [
            {**{k: c[k] for k in ("index", "text", "finish_reason")}, "tokens": None}
            for c in body["choices"]
        ],
        "usage": body["usage"],
    }
    return exchange


FAST = settings(
    max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@FAST
@given(data=st.data(), case=st.sampled_from(CASES), lenient=st.booleans())
def test_mutated_completions_never_crash_the_judge(
    data: st.DataObject, case: Case, lenient: bool
) -> None:
    original = completion_for(case)
    value = data.draw(mutated(original))
    exchange = _with_sdk_view(body_exchange(case, None, raw=_encode(value).encode()), original)
    if lenient:  # as if parsed by a lenient parser: the checks see NaN and odd types
        exchange._json, exchange._json_parsed = _lenient(value), True
    twin = body_exchange(case, original)
    judge_raw(exchange, related=(twin,))


@FAST
@given(data=st.data(), case=st.sampled_from(STREAM_CASES), raw=st.booleans())
def test_mutated_streams_never_crash_the_judge(data: st.DataObject, case: Case, raw: bool) -> None:
    chunks = chunks_for(case)
    n = data.draw(st.integers(0, len(chunks) - 1))
    payloads: list[Any] = list(chunks)
    mutated_chunk = data.draw(mutated(chunks[n]))
    payloads[n] = data.draw(st.text(max_size=20)) if raw else _encode(mutated_chunk)
    exchange = stream_exchange(case, payloads, done=data.draw(st.booleans()))
    twin = body_exchange(req(**{k: v for k, v in case.body.items() if k != "stream"}), None)
    twin._json, twin._json_parsed = _lenient(data.draw(mutated(completion_for(case)))), True
    judge_raw(exchange, related=(twin,))


@FAST
@given(data=st.data(), status=st.sampled_from([400, 401, 404, 422, 500, 503]))
def test_mutated_error_bodies_never_crash_the_judge(data: st.DataObject, status: int) -> None:
    value = data.draw(mutated(ERROR))
    exchange = body_exchange(req(mode="invalid"), None, status=status, raw=_encode(value).encode())
    judge_raw(exchange)


@pytest.mark.parametrize("case", CASES + STREAM_CASES, ids=lambda c: json.dumps(c.body))
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_conformant_synthetic_answers_fail_nothing(case: Case, spec: str) -> None:
    omit = spec == "nscale"  # Nscale types logprobs as non-nullable: omit it
    if case.stream:
        exchange = stream_exchange(case, chunks_for(case, omit_null=omit))
    else:
        exchange = body_exchange(case, completion_for(case, omit_null=omit))
    ctx = Context(case, exchange, SPECS[spec], now=1_760_000_100.0)
    failures = []
    for r in REGISTRY.values():
        if r.applies(ctx):
            try:
                r.check(ctx)
            except Violation as exc:
                failures.append(f"{r.id}: {exc}")
            except Unsupported:
                pass
    assert failures == [] or case.mode == "invalid", failures
