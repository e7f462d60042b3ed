"""The request oracle: which rules a request breaks, and their names.

The judge asks it whether a recorded invalid case still breaks a rule under the spec
(conformance.judging.verdict.results), openapi-core's errors are named by it (conformance.judging.document.validation),
and the generator (strategies/) builds and checks its cases with it: one oracle for all.

A rule name is a stable string in one of three forms:

- ``<field>:<keyword>`` for the request schema: the top-level field and the JSON Schema
  keyword that rejects it, e.g. ``model:required``, ``temperature:type``,
  ``logprobs:maximum``, ``n:minimum``, ``stop:maxItems``, ``seed:format``. A failure
  inside a field (a list item, an object member) is named after the top-level field.
- ``body:<problem>`` for the body as a whole: ``body:not-json``, ``body:type``.
- ``cross:<rule>`` for the cross-field rules of the spec text: ``cross:best_of<n``,
  ``cross:best_of+stream``, ``cross:stream_options-without-stream``; each only under a
  document whose text states it (:func:`stated_cross_rules`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from conformance.judging.document.policies import BEST_OF_EQUAL_N
from conformance.judging.document.spec import Spec
from conformance.judging.wire.case import Case

# A rule name as this module writes them (free-text reasons such as "no credentials" are
# not rule names, and are not judged by the oracle).
RULE_NAME = re.compile(r"^[\w.]+:[\w<>+\-=.]+$")
BODY_NOT_JSON = "body:not-json"
BODY_TYPE = "body:type"
CROSS_BEST_OF_BELOW_N = "cross:best_of<n"
CROSS_BEST_OF_STREAM = "cross:best_of+stream"
CROSS_STREAM_OPTIONS = "cross:stream_options-without-stream"

# The fields each cross-field rule relates. A rule is only judged when those fields are
# schema-valid themselves: a value the schema already rejects is not compared with others
# (best_of=-1 breaks best_of:minimum; that it is also below n is not a second rule).
CROSS_FIELDS: dict[str, frozenset[str]] = {
    CROSS_BEST_OF_BELOW_N: frozenset({"best_of", "n"}),
    CROSS_BEST_OF_STREAM: frozenset({"best_of", "stream"}),
    CROSS_STREAM_OPTIONS: frozenset({"stream_options", "stream"}),
}


def _int(value: Any) -> int | None:
    """``value`` if it is a JSON integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# Where a document states each cross-field rule: the property whose description says it,
# and the words that say it. A rule a document does not state is not judged under it.
CROSS_SOURCES: dict[str, tuple[str, re.Pattern[str]]] = {
    CROSS_BEST_OF_BELOW_N: ("best_of", re.compile(r"greater than\s+`?n`?", re.I)),
    CROSS_BEST_OF_STREAM: ("best_of", re.compile(r"cannot be streamed", re.I)),
    CROSS_STREAM_OPTIONS: ("stream_options", re.compile(r"only set this when.*`?stream", re.I)),
}


def stated_cross_rules(spec: Spec) -> frozenset[str]:
    """The cross-field rules ``spec``'s own text states (see CROSS_SOURCES)."""
    props = spec.request_properties
    return frozenset(
        rule
        for rule, (field, words) in CROSS_SOURCES.items()
        if field in props and words.search(json.dumps(props[field]))
    )


def cross_field_problems(
    body: Mapping[str, Any], *, n_default: int = 1, equal_breaks: bool = False
) -> list[str]:
    """The cross-field rules of the spec text that ``body`` breaks, as rule names.

    A null field counts as absent, and an absent ``n`` as ``n_default`` (OpenAI's 1;
    :func:`broken_rules` passes the spec's declared default). ``equal_breaks``: best_of
    == n breaks the "greater than n" rule too (policy best-of-equal-n-valid switched off).
    """
    problems = []
    best_of = _int(body.get("best_of"))
    n = n_default if body.get("n") is None else _int(body["n"])
    below = (
        best_of is not None and n is not None and (best_of <= n if equal_breaks else best_of < n)
    )
    if below:
        problems.append(CROSS_BEST_OF_BELOW_N)
    streamed = body.get("stream") is True
    if body.get("best_of") is not None and streamed:
        problems.append(CROSS_BEST_OF_STREAM)
    if body.get("stream_options") is not None and not streamed:
        problems.append(CROSS_STREAM_OPTIONS)
    return problems


def _branch_index(error: Any) -> int:
    return int(error.relative_schema_path[0])


def keywords(error: Any) -> set[str]:
    """The keywords that really reject an instance, looking inside ``anyOf``/``oneOf``.

    A combinator's own message ("not valid under any of the given schemas") says nothing.
    Its branches whose type does not fit the value are ignored; of the rest, those that
    fail only on something other than a type are preferred (``[[]]`` as a prompt is a
    too-short token list, not a string list with a wrong item). When no branch fits the
    value's type, the keyword is ``type``.
    """
    if error.validator not in ("anyOf", "oneOf"):
        return {str(error.validator)}
    if not error.context:
        return {str(error.validator)}  # oneOf matched more than one branch
    branches: dict[int, list[Any]] = defaultdict(list)
    for sub in error.context:
        branches[_branch_index(sub)].append(sub)
    fitting: list[set[str]] = []
    for subs in branches.values():
        found: set[str] = set()
        mismatch = False
        for sub in subs:
            words = keywords(sub)
            if not sub.path and words == {"type"}:
                mismatch = True
            found |= words
        if not mismatch:
            fitting.append(found)
    if not fitting:
        return {"type"}
    precise = [words for words in fitting if "type" not in words]
    return set().union(*(precise or fitting))


def schema_rules(spec: Spec, body: Any) -> set[str]:
    """The schema rules ``body`` breaks, as rule names."""
    if not isinstance(body, dict):
        return {BODY_TYPE}
    return rule_names(request_schema_errors(spec, body), body)


def rule_names(errors: Iterable[Any], body: Any) -> set[str]:
    """Rule names (``field:keyword``) of schema validation errors, jsonschema's or
    openapi-core's (conformance.judging.document.validation): one oracle, two validators."""
    rules: set[str] = set()
    # Keywords per instance location: a value of the wrong type also fails its `enum`
    # (or `format`, ...), but only the type is the rule it breaks.
    found: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    for error in errors:
        if error.path:
            found[tuple(error.path)] |= keywords(error)
        elif error.validator == "required":
            names = error.validator_value
            rules |= {f"{n}:required" for n in names if not isinstance(body, dict) or n not in body}
        elif error.validator == "type":
            rules.add(BODY_TYPE)
        else:
            rules |= {f"body:{word}" for word in keywords(error)}
    for path, words in found.items():
        rules |= {f"{path[0]}:{word}" for word in ({"type"} if "type" in words else words)}
    return rules


def broken_rules(spec: Spec, case: Case) -> set[str]:
    """Every rule ``case`` breaks: schema rules, then cross-field rules between valid fields."""
    body: Any = case.body
    if case.raw_body is not None:
        try:
            body = json.loads(case.raw_body)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
            return {BODY_NOT_JSON}
    rules = schema_rules(spec, body)
    if not isinstance(body, dict):
        return rules
    return rules | cross_rules(spec, body, rules)


def cross_rules(spec: Spec, body: Mapping[str, Any], schema_broken: set[str]) -> set[str]:
    """The cross-field rules ``spec`` states that ``body`` breaks between schema-valid fields."""
    bad_fields = {rule.split(":", 1)[0] for rule in schema_broken}
    n_default = _int(declared_default(spec.request_properties.get("n")))
    problems = cross_field_problems(
        body,
        n_default=1 if n_default is None else n_default,
        equal_breaks=not spec.uses(BEST_OF_EQUAL_N.id),
    )
    stated = stated_cross_rules(spec)
    return {p for p in problems if p in stated and not CROSS_FIELDS[p] & bad_fields}


def request_schema_errors(spec: Spec, body: Any) -> list[Any]:
    """jsonschema's errors of a whole body against the request schema (none without one)."""
    validator = spec.validators["request"]
    if validator is None:
        return []
    return list(validator.iter_errors(body))


def alternatives(schema: Any) -> Iterator[Mapping[str, Any]]:
    """The leaf alternatives of ``schema``: ``anyOf``/``oneOf`` branches, flattened."""
    if not isinstance(schema, Mapping):
        return
    branches = schema.get("anyOf") or schema.get("oneOf")
    if not branches:
        yield schema
        return
    for branch in branches:
        yield from alternatives(branch)


def declared_default(schema: Any) -> Any:
    """The ``default`` ``schema`` declares (itself, else its first alternative that has one)."""
    if isinstance(schema, Mapping) and "default" in schema:
        return schema["default"]
    for leaf in alternatives(schema):
        if "default" in leaf:
            return leaf["default"]
    return None
