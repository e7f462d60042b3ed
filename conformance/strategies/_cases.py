"""The one constructor of Cases: every body the suite calls valid is checked by openapi-core.

:func:`build_case` validates a valid, edge or probe body against the spec's operation with
openapi-core (conformance/judging/document/validation.py) and with the cross-field rules the document
states. A body that breaks the spec is moved to the nearest valid values (a number
clamped into its bounds, a string or list cut or padded to its lengths, an unlisted value
replaced by the enum's first, an optional field dropped as a last resort) and its label
says so; when no valid body is near, :class:`CaseSkipped` says why. An invalid case must
break exactly the rule it names, judged by openapi-core for schema rules and by the rule's
own predicate for the cross-field rules of the spec text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from conformance.judging.document.oracle import RULE_NAME, alternatives
from conformance.judging.document.spec import Spec
from conformance.judging.document.validation import oracle_rules
from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import Auth, Case, Mode
from conformance.strategies._describe import request_tags
from conformance.strategies._schema import example, interval, json_type, types_of, view_of

ADAPTED = "adapted"


class CaseSkipped(ConformanceError):
    """A scenario's body cannot be made valid under this spec (the reason is the message)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def build_case(
    spec: Spec,
    body: dict[str, Any],
    *,
    mode: Mode,
    label: str,
    tags: frozenset[str] = frozenset(),
    breaks: str | None = None,
    auth: Auth = "default",
    raw_body: bytes | None = None,
) -> Case:
    """A Case of ``body`` that is what ``mode`` says it is under ``spec``.

    valid/edge/probe: validated by openapi-core, adapted to the nearest valid values (the
    label names the change) or :class:`CaseSkipped`. invalid with a rule name in
    ``breaks``: must break exactly that rule, else ValueError (a suite defect). An
    invalid case with a free-text reason (bad credentials, an unknown model) must have a
    schema-valid body: only its stated reason is wrong.
    """
    if mode == "invalid" and breaks is not None and RULE_NAME.match(breaks):
        found = oracle_rules(spec, body, raw=raw_body)
        if found != {breaks}:
            raise ValueError(f"invalid case {label!r} should break {breaks!r}, breaks {found}")
        return Case(body, mode, label, breaks, auth, raw_body, tags)
    if raw_body is not None:
        return Case(body, mode, label, breaks, auth, raw_body, tags)
    problems = oracle_rules(spec, body)
    if problems:
        body, changes = adapt(spec, body, problems)
        left = oracle_rules(spec, body)
        if left:
            raise CaseSkipped(
                f"{label}: not valid under spec {spec.name!r} ({', '.join(sorted(left))})"
            )
        label = f"{label} ({ADAPTED}: {', '.join(changes)})"
    return Case(body, mode, label, breaks, auth, None, tags)


def generated_case(spec: Spec, body: dict[str, Any], mode: Mode, label: str) -> Case:
    """A generated body as a Case, tagged with what it uses, through :func:`build_case`."""
    return build_case(spec, body, mode=mode, label=label, tags=request_tags(body))


# -- adapting a body to the nearest valid one --------------------------------------------


def adapt(spec: Spec, body: dict[str, Any], problems: set[str]) -> tuple[dict[str, Any], list[str]]:
    """``body`` moved to the nearest valid values for each broken field; what changed."""
    view = view_of(spec)
    out = dict(body)
    changes: list[str] = []
    for rule in sorted(problems):
        field, _, keyword = rule.partition(":")
        if field == "cross":
            dropped = _cross_fix(rule, out)
            if dropped:
                changes.append(f"{dropped} dropped ({rule})")
            continue
        if keyword == "required":
            schema = view.properties.get(field)
            value = example(schema) if schema else None
            if value is None:
                raise CaseSkipped(f"the spec requires {field!r} and the suite cannot fill it")
            out[field] = value
            changes.append(f"{field} added")
            continue
        if field not in out:
            continue
        before = out[field]
        value = _nearest(view.properties.get(field), before)
        context = {k: v for k, v in out.items() if k != field}
        if value is not None and view.accepts(field, value, **context):
            out[field] = value
            changes.append(f"{field} {_short(before)}→{_short(value)}")
        elif field in view.required:
            raise CaseSkipped(f"{field}={_short(before)} has no valid neighbour under the spec")
        else:
            del out[field]
            changes.append(f"{field} dropped")
    return out, changes


def _cross_fix(rule: str, body: dict[str, Any]) -> str | None:
    for name in ("best_of", "stream_options"):
        if name in rule and name in body:
            del body[name]
            return name
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 16 else text[:15] + "…"


def _nearest(schema: Any, value: Any) -> Any:
    """The value of ``schema`` nearest to ``value`` (None if it has none near)."""
    for leaf in alternatives(schema):
        kinds = types_of(leaf)
        if value is None:
            if "null" in kinds:
                return None
            continue
        kind = json_type(value)
        if kind not in kinds and not (kind == "integer" and "number" in kinds):
            continue
        if leaf.get("enum"):
            return value if value in leaf["enum"] else leaf["enum"][0]
        if kind in ("integer", "number"):
            return _clamp(leaf, value)
        if kind == "string":
            return _fit_text(leaf, value)
        if kind == "array":
            return _fit_list(leaf, value)
        return value
    return None


def _clamp(leaf: Mapping[str, Any], value: float) -> float:
    bounds = interval(leaf, formats=True)
    if "integer" in types_of(leaf):
        first, last = bounds.closed_ints(-(2**63), 2**63 - 1)
        return int(min(max(value, first), last))
    step = 1e-9
    low = -math.inf if bounds.low is None else bounds.low + (step if bounds.low_open else 0)
    high = math.inf if bounds.high is None else bounds.high - (step if bounds.high_open else 0)
    return min(max(value, low), high)


def _fit_text(leaf: Mapping[str, Any], value: str) -> str:
    high = leaf.get("maxLength")
    low = int(leaf.get("minLength") or 0)
    if isinstance(high, int) and len(value) > high:
        value = value[:high]
    if len(value) < low:
        value = (value or "x") * (low // max(len(value), 1) + 1)
        value = value[: max(low, len(value) if high is None else min(len(value), high))]
    return value


def _fit_list(leaf: Mapping[str, Any], value: list[Any]) -> list[Any] | None:
    items = [_nearest(leaf.get("items") or {}, v) if leaf.get("items") else v for v in value]
    high = leaf.get("maxItems")
    low = int(leaf.get("minItems") or 0)
    if isinstance(high, int):
        items = items[:high]
    if len(items) < low:
        if not items:
            return None
        items += [items[-1]] * (low - len(items))
    return items
