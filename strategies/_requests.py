"""Valid request bodies, bounds read from the Spec's request schema."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from conformance.case import Case
from conformance.spec import Spec


def _bounds(spec: Spec, name: str, low: float, high: float) -> tuple[float, float]:
    """The [minimum, maximum] the spec declares for ``name``, else the given defaults."""
    schema = spec.request_properties.get(name) or {}
    for branch in [schema, *schema.get("anyOf", [])]:
        if "minimum" in branch or "maximum" in branch:
            return branch.get("minimum", low), branch.get("maximum", high)
    return low, high


def prompts(vocab_size: int) -> st.SearchStrategy[Any]:
    """All four prompt forms, the simplest first so failures shrink well."""
    text = st.text(
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40
    )
    token = st.integers(0, vocab_size - 1)
    return st.one_of(
        text,
        st.lists(text, min_size=1, max_size=3),
        st.lists(token, min_size=1, max_size=8),
        st.lists(st.lists(token, min_size=1, max_size=8), min_size=1, max_size=3),
    )


@st.composite
def valid_requests(
    draw: st.DrawFn,
    spec: Spec,
    *,
    model: str,
    max_tokens: int = 8,
    vocab_size: int = 1000,
    stream: bool = False,
) -> Case:
    """A schema-valid request within the run's cost bounds."""
    body: dict[str, Any] = {"model": model, "prompt": draw(prompts(vocab_size))}
    body["max_tokens"] = draw(st.integers(0, max_tokens))
    lo, hi = _bounds(spec, "temperature", 0, 2)
    if draw(st.booleans()):
        body["temperature"] = draw(st.floats(lo, hi))
    if draw(st.booleans()):
        body["n"] = draw(st.integers(1, 2))
    if stream:
        body["stream"] = True
    return Case(body, mode="valid", label="valid request")
