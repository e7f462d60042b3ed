"""Invalid requests: each breaks exactly one named rule and is otherwise valid and cheap.

The candidates are derived from the schema (required fields, JSON types, numeric and
array bounds, integer formats) and from the cross-field rules of the spec text, then
each is checked with :func:`broken_rules` when the strategy is built: a candidate that
breaks nothing (``prompt: []`` is a valid, empty list of strings) or more than its rule
is dropped, so the schema decides, not a guess about it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from conformance.judging.document.oracle import (
    BODY_NOT_JSON,
    BODY_TYPE,
    CROSS_BEST_OF_BELOW_N,
    CROSS_BEST_OF_STREAM,
    CROSS_STREAM_OPTIONS,
    alternatives,
    broken_rules,
)
from conformance.judging.document.policies import NULL_AS_DEFAULT
from conformance.judging.document.spec import Spec
from conformance.judging.wire.case import Case
from conformance.strategies._describe import request_tags
from conformance.strategies._requests import SAMPLE_PROMPTS, NoValidPrompt, make_plan
from conformance.strategies._schema import (
    INT_FORMATS,
    SchemaView,
    array_bounds,
    example,
    json_type,
    types_of,
)

BASE_PROMPT = SAMPLE_PROMPTS[0]
# Fields whose value multiplies the tokens a lenient target would spend on an invalid
# request: their out-of-range values stay below MAX_COSTLY (n=129 is fine, 2**31 not).
COST_FIELDS = frozenset({"max_tokens", "n", "best_of"})
MAX_COSTLY = 200
# One value per JSON type. Null is left out for optional fields: clients send it to mean
# "the default" and servers read it so, even where an OpenAPI 3.0 schema forbids it.
WRONG_VALUES: tuple[Any, ...] = ("many", 7, 2.5, True, {"value": 1}, [{"value": 1}])
NOT_JSON = b"{not json"


def _type_fits(accepted: set[str], value: Any) -> bool:
    kind = json_type(value)
    return kind in accepted or (kind == "integer" and "number" in accepted)


def _accepted_types(schema: Any) -> set[str]:
    """The JSON types some alternative of ``schema`` accepts (all, if one says none)."""
    accepted: set[str] = set()
    for leaf in alternatives(schema):
        kinds = types_of(leaf)
        if not kinds:
            return set(json_type(v) for v in (*WRONG_VALUES, None))
        accepted |= kinds
    return accepted


def wrong_values(schema: Any, *, nested: bool = True, null: bool = False) -> list[Any]:
    """Values of a JSON type ``schema`` rejects, at its top and one level inside it."""
    accepted = _accepted_types(schema)
    pool = (*WRONG_VALUES, None) if null else WRONG_VALUES
    out = [v for v in pool if not _type_fits(accepted, v)]
    if not nested:
        return out
    for leaf in alternatives(schema):
        kinds = types_of(leaf)
        if "array" in kinds and isinstance(leaf.get("items"), Mapping):
            out += [[w] for w in wrong_values(leaf["items"], nested=False)]
        if "object" in kinds:
            for name, sub in (leaf.get("properties") or {}).items():
                out += [{**example(leaf), name: w} for w in wrong_values(sub, nested=False)[:2]]
            extra = leaf.get("additionalProperties")
            if isinstance(extra, Mapping):
                out += [{"1": w} for w in wrong_values(extra, nested=False)[:2]]
    return out


def bound_values(schema: Any, field: str, *, nested: bool = True) -> list[tuple[str, Any]]:
    """(keyword, value) pairs just outside the bounds ``schema`` states."""
    out: list[tuple[str, Any]] = []
    for leaf in alternatives(schema):
        kinds = types_of(leaf)
        if kinds & {"integer", "number"}:
            for key, delta in (("minimum", -1), ("maximum", 1)):
                if isinstance(leaf.get(key), int | float):
                    out.append((key, leaf[key] + delta))
            for key in ("exclusiveMinimum", "exclusiveMaximum"):
                if isinstance(leaf.get(key), int | float) and not isinstance(leaf[key], bool):
                    out.append((key, leaf[key]))
            fmt = INT_FORMATS.get(str(leaf.get("format", "")))
            if fmt is not None and "integer" in kinds:
                out.append(("format", fmt[1] + 1))
        if "array" in kinds:
            low, high = array_bounds(leaf)
            item = leaf.get("items")
            if low:
                out.append(("minItems", [example(item, i) for i in range(low - 1)]))
            if high is not None:
                out.append(("maxItems", [example(item, i) for i in range(high + 1)]))
            if nested and isinstance(item, Mapping):
                fill = [example(item, i) for i in range(1, max(low or 1, 1))]
                out += [(k, [v, *fill]) for k, v in bound_values(item, field, nested=False)]
        if "object" in kinds:
            full = example(leaf)
            for name in leaf.get("required") or ():
                out.append(("required", {k: v for k, v in full.items() if k != name}))
            extra = leaf.get("additionalProperties")
            value = example(extra) if isinstance(extra, Mapping) else 1
            if isinstance(leaf.get("maxProperties"), int):
                count = leaf["maxProperties"] + 1
                out.append(("maxProperties", {str(i + 1): value for i in range(count)}))
            if nested and isinstance(extra, Mapping):
                out += [(k, {"1": v}) for k, v in bound_values(extra, field, nested=False)]
        if leaf.get("enum"):
            # A value of the enum's own type that it does not list.
            listed = leaf["enum"]
            if all(isinstance(v, str) for v in listed):
                out.append(("enum", "-".join(str(v) for v in listed[:2]) + "-unlisted"))
            elif all(isinstance(v, int) and not isinstance(v, bool) for v in listed):
                out.append(("enum", max(listed) + 1))
        if "string" in kinds:
            if leaf.get("minLength"):
                out.append(("minLength", "x" * (leaf["minLength"] - 1)))
            if isinstance(leaf.get("maxLength"), int) and leaf["maxLength"] < 4096:
                out.append(("maxLength", "x" * (leaf["maxLength"] + 1)))
    if field in COST_FIELDS:
        out = [(k, v) for k, v in out if not (isinstance(v, int | float) and v > MAX_COSTLY)]
    return out


@dataclass(frozen=True, slots=True)
class Breaker:
    """One rule and the checked bodies that break it (and nothing else)."""

    rule: str
    bodies: tuple[dict[str, Any], ...]
    raw: bytes | None = None
    detail: str = ""

    def case(self, body: dict[str, Any]) -> Case:
        """A Case of ``body`` (or of the raw bytes) breaking this rule."""
        if self.raw is not None:
            return Case(
                {},
                mode="invalid",
                label=f"{self.rule}: {self.detail}",
                breaks=self.rule,
                raw_body=self.raw,
            )
        return Case(
            body,
            mode="invalid",
            label=f"{self.rule}: {_detail(self.rule, body)}",
            breaks=self.rule,
            tags=request_tags(body),
        )


def _detail(rule: str, body: Mapping[str, Any]) -> str:
    field, _, keyword = rule.partition(":")
    if keyword == "required" and field not in body:
        return f"no {field}"
    if field == "cross":
        names = ("n", "best_of", "stream", "stream_options")
        return ", ".join(f"{k}={json.dumps(body[k])}" for k in names if k in body)
    text = json.dumps(body.get(field), ensure_ascii=False)
    return f"{field}={text if len(text) <= 40 else text[:39] + '…'}"


class _Builder:
    """Collects checked candidates per rule for one spec."""

    def __init__(self, spec: Spec, *, model: str, max_tokens: int) -> None:
        self.spec = spec
        self.view = SchemaView(spec)
        self.base: dict[str, Any] = {"model": model, "prompt": _base_prompt(spec, model)}
        for name in self.view.required:
            if name not in self.base and name in self.view.properties:
                self.base[name] = example(self.view.properties[name])
        if self.view.declares("max_tokens"):
            # One token: enough to show that the target served it, cheap if it does.
            low = self.view.interval("max_tokens").closed_ints(0, 10**9)[0]
            self.base["max_tokens"] = max(low, min(max_tokens, 1))
        self.found: dict[str, list[dict[str, Any]]] = {}

    def offer(self, rule: str, body: dict[str, Any]) -> None:
        """Keep ``body`` for ``rule`` if it breaks exactly that rule."""
        if broken_rules(self.spec, Case(body)) == {rule}:
            bodies = self.found.setdefault(rule, [])
            if body not in bodies:
                bodies.append(body)

    def field_base(self, field: str) -> dict[str, Any]:
        """The base body; with ``stream: true`` where ``field`` needs it (stream_options)."""
        if field == "stream_options" and self.view.declares("stream"):
            return {**self.base, "stream": True}
        return dict(self.base)

    def build(self) -> list[Breaker]:
        view = self.view
        for name in view.required:
            self.offer(f"{name}:required", {k: v for k, v in self.base.items() if k != name})
        for field, schema in view.properties.items():
            # Policy null-means-default: null is invalid only for required fields.
            null = field in view.required or not self.spec.uses(NULL_AS_DEFAULT.id)
            for value in wrong_values(schema, null=null):
                self.offer(f"{field}:type", {**self.field_base(field), field: value})
            for keyword, value in bound_values(schema, field):
                self.offer(f"{field}:{keyword}", {**self.field_base(field), field: value})
        self._cross()
        breakers = [Breaker(rule, tuple(bodies)) for rule, bodies in self.found.items()]
        breakers.append(Breaker(BODY_NOT_JSON, ({},), NOT_JSON, "body is not JSON"))
        array_body = json.dumps([self.base]).encode()
        breakers.append(Breaker(BODY_TYPE, ({},), array_body, "body is a JSON array"))
        return breakers

    def _cross(self) -> None:
        view = self.view
        if view.declares("best_of") and view.declares("n"):
            for n, best_of in ((2, 1), (3, 1), (3, 2)):
                self.offer(CROSS_BEST_OF_BELOW_N, {**self.base, "n": n, "best_of": best_of})
        if view.declares("best_of") and view.declares("stream"):
            for best_of in (2, 3):
                self.offer(CROSS_BEST_OF_STREAM, {**self.base, "stream": True, "best_of": best_of})
        if view.declares("stream_options"):
            for usage in (True, False):
                options = {"stream_options": {"include_usage": usage}}
                self.offer(CROSS_STREAM_OPTIONS, {**self.base, **options})
                if view.declares("stream"):
                    self.offer(CROSS_STREAM_OPTIONS, {**self.base, "stream": False, **options})


def _base_prompt(spec: Spec, model: str) -> Any:
    """A prompt the spec allows, so that the broken rule stays the only one ("Say hi"
    unless the spec's prompt is tighter: a copy may allow only 5 characters)."""
    try:
        return make_plan(spec, model=model, max_tokens=1, vocab_size=1000).base_prompt
    except NoValidPrompt:  # --strict-spec on a document that admits no prompt
        return BASE_PROMPT


def _breakers(spec: Spec, *, model: str, max_tokens: int) -> list[Breaker]:
    return _Builder(spec, model=model, max_tokens=max_tokens).build()


@st.composite
def _invalid_from(draw: st.DrawFn, breakers: tuple[Breaker, ...]) -> Case:
    breaker = draw(st.sampled_from(breakers))
    body = copy.deepcopy(draw(st.sampled_from(breaker.bodies)))
    if body.get("prompt") == BASE_PROMPT:
        # Any plain sentence keeps the prompt valid; the broken rule stays the only one.
        body["prompt"] = draw(st.sampled_from(SAMPLE_PROMPTS))
    return breaker.case(body)


def invalid_requests(spec: Spec, *, model: str, max_tokens: int = 8) -> st.SearchStrategy[Case]:
    """Requests that each break one named rule (``Case.breaks``) of ``spec``."""
    return _invalid_from(tuple(_breakers(spec, model=model, max_tokens=max_tokens)))


def invalid_cases(spec: Spec, *, model: str, max_tokens: int = 8) -> list[Case]:
    """One invalid request per rule of ``spec``, in a stable order."""
    breakers = _breakers(spec, model=model, max_tokens=max_tokens)
    return [b.case(copy.deepcopy(b.bodies[0])) for b in breakers]
