"""schemathesis as a second, independent generator (opt-in: ``--fuzz N``, extra ``[fuzz]``).

schemathesis reads the corrected document (conformance.judging.document.validation.corrected_document) and
generates by its own rules: its coverage phase (boundary values, wrong types, missing
required fields, one per scenario) and its positive and negative modes. Each body is then
classified by the suite's own oracle (openapi-core plus the stated cross-field rules), not
by the mode schemathesis meant: a valid body is a valid Case, any other an invalid Case
naming the rules it breaks. The run's model and cost caps are applied first (a fuzzed
model name only measures the target's 404; a fuzzed max_tokens of 10^15 only its bill).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from conformance.judging.document.spec import Spec
from conformance.judging.document.validation import corrected_document, oracle_rules
from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import Case
from conformance.strategies._cases import build_case
from conformance.strategies._describe import describe, request_tags
from conformance.strategies._draw import SEED_STRIDE, draw_some
from conformance.strategies._requests import MAX_CHOICES, MAX_N

# Share of the N cases taken from schemathesis's coverage phase (the rest: fuzzing).
COVERAGE_SHARE = 0.4
COST_CAPS = {"n": MAX_N, "best_of": MAX_CHOICES}


class FuzzUnavailable(ConformanceError):
    """schemathesis is not installed (``pip install 'completions-conformance[fuzz]'``)."""


def _operation(spec: Spec) -> Any:
    try:
        from schemathesis import openapi
    except ImportError as exc:
        raise FuzzUnavailable(
            "deep fuzzing needs schemathesis: pip install 'completions-conformance[fuzz]'"
        ) from exc
    return openapi.from_dict(corrected_document(spec))["/v1/completions"]["POST"]


def _coverage_bodies(operation: Any, limit: int) -> list[Any]:
    """Bodies of schemathesis's coverage phase, in its own order (internal API: guarded)."""
    try:
        from schemathesis import GenerationMode
        from schemathesis.config import GenerationConfig
        from schemathesis.generation.drivers import CoverageGenerator
        from schemathesis.generation.feedback import FeedbackSources
        from schemathesis.generation.overrides import Override
    except ImportError:  # another schemathesis: the fuzzing phase only
        return []
    generator = CoverageGenerator(
        operation=operation,
        generation_modes=list(GenerationMode),
        generation_config=GenerationConfig(),
        auth_storage=None,
        override=Override(query={}, headers={}, cookies={}, path_parameters={}, body={}),
        feedback=FeedbackSources(),
    )
    return [case.body for case in itertools.islice(iter(generator), limit)]


def _fuzzed_bodies(operation: Any, count: int, seed: int) -> list[Any]:
    """Bodies from schemathesis's positive and negative strategies, alternately, each drawn
    like the suite's own requests (conformance.strategies._draw: Hypothesis's public API, one seed per
    index); a draw schemathesis rejects throughout is left out."""
    from schemathesis import GenerationMode

    strategies = [operation.as_strategy(generation_mode=mode) for mode in GenerationMode]
    bodies: list[Any] = []
    for index in range(count * 4):
        if len(bodies) >= count:
            break
        strategy = strategies[index % len(strategies)]
        one = seed * SEED_STRIDE + index
        bodies += [case.body for case in draw_some(strategy, range(one, one + 1))]
    return bodies


def _within_caps(body: Any, model: str, max_tokens: int) -> Any:
    """The run's model, and no count or length beyond the run's cost caps."""
    if not isinstance(body, dict):
        return body
    body = dict(body)
    if isinstance(body.get("model"), str):
        body["model"] = model
    value = body.get("max_tokens")
    if isinstance(value, int) and not isinstance(value, bool) and value > max_tokens:
        body["max_tokens"] = max_tokens
    for name, cap in COST_CAPS.items():
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > cap:
            body[name] = cap
    return body


def _case(spec: Spec, body: Any, index: int) -> Case | None:
    if isinstance(body, bytes):  # negative mode's raw body: sent as is, it is not JSON
        try:
            body = json.loads(body)
        except ValueError:
            label = f"fuzz #{index}: body {body[:40]!r}"
            return Case({}, "invalid", label, "fuzz: body:json", raw_body=body)
    try:
        raw = json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError):
        return None
    if not isinstance(body, dict):
        return Case(
            {}, "invalid", f"fuzz #{index}: body {raw[:40]!r}", "fuzz: body:type", raw_body=raw
        )
    rules = oracle_rules(spec, body)
    if not rules:
        return build_case(
            spec,
            body,
            mode="valid",
            label=f"fuzz #{index}: {describe(body)}",
            tags=request_tags(body),
        )
    label = f"fuzz #{index}: breaks {', '.join(sorted(rules))}"
    return Case(
        body, "invalid", label, f"fuzz: {', '.join(sorted(rules))}", tags=request_tags(body)
    )


def fuzz_cases(spec: Spec, n: int, seed: int = 0, *, model: str, max_tokens: int = 8) -> list[Case]:
    """``n`` Cases from schemathesis's generation on the corrected document, deduplicated.

    Raises FuzzUnavailable without schemathesis.
    """
    if n <= 0:
        return []
    operation = _operation(spec)
    coverage = _coverage_bodies(operation, max(1, int(n * COVERAGE_SHARE)))
    fuzzed = _fuzzed_bodies(operation, n - len(coverage), seed)
    cases: list[Case] = []
    seen: set[str] = set()
    for index, body in enumerate([*coverage, *fuzzed]):
        body = _within_caps(body, model, max_tokens)
        key = json.dumps(body, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        case = _case(spec, body, index)
        if case is not None:
            cases.append(case)
    return cases
