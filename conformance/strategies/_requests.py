"""Valid requests: every declared parameter, within the spec's bounds and the run's cost.

A :class:`Plan` is read once from the Spec (which prompt forms and parameters the schema
accepts, and their bounds); the strategy then only draws. OpenAI's documented ranges
stand in where a spec states no bound, and cost caps apply on top of the spec's bounds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from conformance.judging.document.oracle import alternatives
from conformance.judging.document.policies import OPENAI_PROMPT_FORMS
from conformance.judging.document.spec import Spec
from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import Case, Mode
from conformance.strategies._branches import (
    PROMPT_FORMS,
    Branch,
    Caps,
    branch_values,
    branches,
    largest,
)
from conformance.strategies._describe import describe
from conformance.strategies._schema import Interval, SchemaView, interval, types_of

# Cost caps: a generated request asks for at most MAX_CHOICES completions of at most
# max_tokens tokens each (prompts x max(n, best_of)).
MAX_PROMPTS = 3
MAX_N = 3
MAX_CHOICES = 6
BEST_OF_MARGIN = 2
# OpenAI's limits, used where a spec states none: stop lists and logprobs (API reference),
# the sampling ranges (their descriptions), logit_bias values (its description).
MAX_STOP = 4
MAX_LOGPROBS = 5
SAMPLER_RANGES = {
    "temperature": (0, 2),
    "top_p": (0, 1),
    "frequency_penalty": (-2, 2),
    "presence_penalty": (-2, 2),
}
LOGIT_BIAS_RANGE = (-100, 100)
# Random seeds stay in int32 so that no server's seed type is the question.
MAX_RANDOM_SEED = 2**31 - 1

# The OpenAI prompt forms (policy openai-prompt-forms), for a schema that admits none.
OPENAI_PROMPT = {
    "anyOf": [
        {"type": "string"},
        {"type": "array", "items": {"type": "string"}},
        {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
        {
            "type": "array",
            "minItems": 1,
            "items": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
        },
    ]
}
SAMPLE_PROMPTS = (
    "Say hi",
    "Once upon a time",
    "The capital of France is",
    "def fibonacci(n):",
    "1, 2, 3, 4,",
    "Translate to German: good morning",
)
COMMON_STOPS = ("\n", ".", "\n\n", "###", "END")


class NoValidPrompt(ConformanceError, ValueError):
    """The request schema admits no prompt the suite can draw (the run cannot send one)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What the spec lets a valid request contain, with the run's options and cost caps."""

    model: str
    vocab_size: int
    prompt_branches: tuple[Branch, ...]
    stop_branches: tuple[Branch, ...]
    text_branches: tuple[tuple[str, Branch], ...]
    max_tokens: tuple[int, int] | None
    n: tuple[int, int] | None
    best_of: tuple[int, int] | None
    logprobs: tuple[int, int] | None
    samplers: tuple[tuple[str, Interval], ...]
    stop_items: tuple[int, int] | None
    logit_bias: tuple[bool, int, int] | None
    seed: tuple[int, int] | None
    echo: bool
    stream: bool
    stream_options: bool

    @property
    def forms(self) -> tuple[str, ...]:
        """The prompt forms this plan draws, in the usual order."""
        found = {b.form for b in self.prompt_branches}
        return tuple(f for f in PROMPT_FORMS if f in found)

    @property
    def texts(self) -> tuple[str, ...]:
        """The free-text fields (suffix, user) this plan can fill."""
        return tuple(dict.fromkeys(name for name, _ in self.text_branches))

    @property
    def stop_string(self) -> bool:
        return any(b.form == "string" for b in self.stop_branches)

    @property
    def base_prompt(self) -> Any:
        """A plain prompt the spec allows: "Say hi" if it may, else a branch's smallest."""
        from conformance.strategies._branches import smallest

        strings = [b for b in self.prompt_branches if b.form == "string"]
        for branch in strings:
            low, high = smallest(branch, self.prompt_caps), largest(branch, self.prompt_caps)
            if low is not None and len(low) <= len(SAMPLE_PROMPTS[0]) <= len(high or ""):
                return SAMPLE_PROMPTS[0]
        branch = (strings or list(self.prompt_branches))[0]
        return smallest(branch, self.prompt_caps)

    @property
    def prompt_caps(self) -> Caps:
        return Caps(24, MAX_PROMPTS, 8, (0, self.vocab_size - 1), SAMPLE_PROMPTS)


STOP_CAPS = Caps(8, MAX_STOP, 8, (0, 999), COMMON_STOPS)
TEXT_CAPS = {
    "suffix": Caps(12, 1, 1, (0, 999), (" The end.",)),
    "user": Caps(16, 1, 1, (0, 999), ("user-1234",)),
}


def _drawable(branch_list: tuple[Branch, ...], caps: Caps) -> tuple[Branch, ...]:
    return tuple(b for b in branch_list if branch_values(b, caps) is not None)


def prompt_branches(spec: Spec, view: SchemaView, caps: Caps) -> tuple[Branch, ...]:
    """The prompt branches to draw from; the OpenAI forms only by policy, else an error."""
    found = tuple(b for b in branches(view.properties.get("prompt")) if b.form in PROMPT_FORMS)
    drawable = tuple(b for b in _drawable(found, caps) if _accepted(view, b, caps))
    if drawable:
        return drawable
    if spec.uses(OPENAI_PROMPT_FORMS.id):
        return branches(OPENAI_PROMPT)
    raise NoValidPrompt(
        f"spec {spec.name!r} as written admits no prompt the suite can send "
        "(policy openai-prompt-forms is off under --strict-spec)"
    )


def _accepted(view: SchemaView, branch: Branch, caps: Caps) -> bool:
    """Whether a value drawn at a branch's end passes the whole field schema."""
    from conformance.strategies._branches import smallest

    value = smallest(branch, caps)
    return value is not None and view.accepts("prompt", value)


def _ints(view: SchemaView, name: str, low: int, high: int) -> tuple[int, int] | None:
    """The spec's integer range for ``name`` inside [low, high]; None if undeclared/empty."""
    if not view.declares(name):
        return None
    lo, hi = view.interval(name).closed_ints(low, high)
    return (lo, hi) if lo <= hi else None


def _logit_bias(view: SchemaView) -> tuple[bool, int, int] | None:
    """(integer values only?, low, high) for logit_bias, from its ``additionalProperties``."""
    if not view.accepts("logit_bias", {"1": 1}):
        return None
    values: Any = {}
    for leaf in alternatives(view.properties["logit_bias"]):
        if "object" in types_of(leaf):
            values = leaf.get("additionalProperties") or {}
            break
    integral = not any("number" in types_of(leaf) for leaf in alternatives(values))
    low, high = interval(values).closed_ints(*LOGIT_BIAS_RANGE)
    return integral, low, high


def make_plan(spec: Spec, *, model: str, max_tokens: int, vocab_size: int) -> Plan:
    """Read from ``spec`` what a valid request may contain."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be at least 1, got {vocab_size}")
    view = SchemaView(spec)
    caps = Caps(24, MAX_PROMPTS, 8, (0, vocab_size - 1), SAMPLE_PROMPTS)
    prompt = prompt_branches(spec, view, caps)
    limit = 10**9
    max_tokens_range = _ints(view, "max_tokens", 0, max_tokens)
    if view.declares("max_tokens") and max_tokens_range is None:
        max_tokens_range = (view.interval("max_tokens").closed_ints(0, limit)[0],) * 2
    stop_branches = _drawable(branches(view.properties.get("stop")), STOP_CAPS)
    stop_items = None
    lists = [b for b in stop_branches if "array" in types_of(b.schema)]
    if lists:
        from conformance.strategies._branches import item_range

        stop_items = item_range(lists[0].schema, MAX_STOP, True)
    text_branches = tuple(
        (name, b)
        for name in ("suffix", "user")
        for b in _drawable(branches(view.properties.get(name)), TEXT_CAPS[name])
        if b.form == "string"
    )
    samplers = tuple(
        (name, view.interval(name).with_defaults(*bounds))
        for name, bounds in SAMPLER_RANGES.items()
        if view.declares(name)
    )
    seed = None
    if view.declares("seed"):
        lo, hi = view.interval("seed", formats=True).closed_ints(0, MAX_RANDOM_SEED)
        seed = (lo, hi) if lo <= hi else None
    logprobs = _ints(view, "logprobs", 0, limit)
    if logprobs is not None and view.interval("logprobs").high is None:
        logprobs = (logprobs[0], max(logprobs[0], MAX_LOGPROBS))
    return Plan(
        model=model,
        vocab_size=vocab_size,
        prompt_branches=prompt,
        stop_branches=stop_branches,
        text_branches=text_branches,
        max_tokens=max_tokens_range,
        n=_ints(view, "n", 1, MAX_N),
        best_of=_ints(view, "best_of", 2, MAX_CHOICES),
        logprobs=logprobs,
        samplers=samplers,
        stop_items=stop_items,
        logit_bias=_logit_bias(view),
        seed=seed,
        echo=view.accepts("echo", True),
        stream=view.accepts("stream", True),
        stream_options=view.accepts("stream_options", {"include_usage": True}, stream=True),
    )


# -- value strategies -------------------------------------------------------------------
# Cached: building and validating a strategy costs more than drawing from it, and the
# composite below asks for the same few strategies on every draw.


@lru_cache(maxsize=256)
def token_ids(vocab_size: int) -> st.SearchStrategy[int]:
    """Token ids below ``vocab_size``."""
    return st.integers(0, vocab_size - 1)


def with_ends(
    low: float | None, high: float | None, between: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """``between``, or one of the given ends: each end about as often as the inside."""
    ends = [v for v in (low, high) if v is not None]
    if not ends:
        return between
    return st.sampled_from([*ends, None]).flatmap(
        lambda end: between if end is None else st.just(end)
    )


@lru_cache(maxsize=256)
def bounded_numbers(bounds: Interval) -> st.SearchStrategy[float]:
    """Numbers within ``bounds``, the closed ends themselves drawn often."""
    assert bounds.low is not None and bounds.high is not None
    inner = st.floats(
        bounds.low,
        bounds.high,
        exclude_min=bounds.low_open,
        exclude_max=bounds.high_open,
        allow_nan=False,
        allow_infinity=False,
    ).map(lambda x: _tidy(x, bounds))
    return with_ends(
        None if bounds.low_open else bounds.low,
        None if bounds.high_open else bounds.high,
        inner,
    )


@lru_cache(maxsize=256)
def bounded_ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers in [low, high], both ends drawn often."""
    return with_ends(low, high if high > low else None, st.integers(low, high))


def _tidy(x: float, bounds: Interval) -> float:
    """``x`` to two decimals, as people write these, unless that leaves the bounds."""
    rounded = round(x, 2)
    assert bounds.low is not None and bounds.high is not None
    above = rounded > bounds.low or (rounded == bounds.low and not bounds.low_open)
    below = rounded < bounds.high or (rounded == bounds.high and not bounds.high_open)
    return rounded if above and below else x


@lru_cache(maxsize=256)
def stops(plan: Plan) -> st.SearchStrategy[Any]:
    """A stop from one of the spec's stop branches (a string, a list), within the caps.

    The branch is drawn first, then a list's length, so that each length is as likely
    as the string.
    """
    options: list[st.SearchStrategy[Any]] = []
    for branch in plan.stop_branches:
        values = branch_values(branch, STOP_CAPS)
        assert values is not None
        if "array" in types_of(branch.schema) and plan.stop_items is not None:
            item = branch_values(
                Branch("item", json.dumps(branch.schema.get("items") or {})), STOP_CAPS
            )
            if item is not None:
                low, high = plan.stop_items
                options += [st.lists(item, min_size=k, max_size=k) for k in range(low, high + 1)]
                continue
        options.append(values)
    return st.sampled_from(options).flatmap(lambda strategy: strategy)


@lru_cache(maxsize=256)
def logit_biases(plan: Plan) -> st.SearchStrategy[dict[str, float]]:
    """One to three token ids (as strings, per the JSON object) with a bias each."""
    assert plan.logit_bias is not None
    integral, low, high = plan.logit_bias
    values: st.SearchStrategy[Any] = st.integers(low, high)
    if not integral:
        values = st.one_of(values, bounded_numbers(Interval(low, high)))
    keys = token_ids(plan.vocab_size).map(str)
    return st.dictionaries(keys, values, min_size=1, max_size=3)


def _values(branch: Branch, caps: Caps) -> st.SearchStrategy[Any]:
    values = branch_values(branch, caps)
    assert values is not None  # plans keep only drawable branches
    return values


def _text_of(plan: Plan, name: str) -> st.SearchStrategy[Any]:
    """suffix or user, from one of its string branches."""
    return st.one_of([_values(b, TEXT_CAPS[name]) for n, b in plan.text_branches if n == name])


@st.composite
def valid_bodies(draw: st.DrawFn, plan: Plan, stream: bool | None) -> dict[str, Any]:
    """A schema-valid body that keeps the cross-field rules and the cost caps."""
    body: dict[str, Any] = {"model": plan.model}
    # The form first, so each form is as likely however many branches it has.
    form = draw(st.sampled_from(plan.forms))
    branch = draw(st.sampled_from([b for b in plan.prompt_branches if b.form == form]))
    prompt = body["prompt"] = draw(_values(branch, plan.prompt_caps))
    count = len(prompt) if branch.form in ("strings", "token-lists") else 1
    budget = MAX_CHOICES // count
    if plan.max_tokens is not None:
        body["max_tokens"] = draw(bounded_ints(*plan.max_tokens))
    streamed = draw(st.booleans()) if stream is None else stream
    n = 1
    if plan.n is not None and draw(st.booleans()):
        low, high = plan.n[0], min(plan.n[1], budget)
        if low <= high:
            n = body["n"] = draw(st.integers(low, high))
    # best_of > n (the spec text's rule; equality is left untested), never with stream.
    if plan.best_of is not None and not streamed and draw(st.booleans()):
        low = max(plan.best_of[0], n + 1)
        high = min(plan.best_of[1], n + BEST_OF_MARGIN, budget)
        if low <= high:
            body["best_of"] = draw(st.integers(low, high))
    if plan.logprobs is not None and draw(st.booleans()):
        body["logprobs"] = draw(bounded_ints(*plan.logprobs))
    if plan.echo and draw(st.booleans()):
        # echo=false is the default: sending it says less than echo=true.
        body["echo"] = draw(st.sampled_from((True, True, False)))
    if (plan.stop_string or plan.stop_items is not None) and draw(st.booleans()):
        body["stop"] = draw(stops(plan))
    for name, bounds in plan.samplers:
        if draw(st.booleans()):
            body[name] = draw(bounded_numbers(bounds))
    if plan.seed is not None and draw(st.booleans()):
        body["seed"] = draw(st.integers(*plan.seed))
    if "suffix" in plan.texts and draw(st.booleans()):
        body["suffix"] = draw(_text_of(plan, "suffix"))
    if plan.logit_bias is not None and draw(st.booleans()):
        body["logit_bias"] = draw(logit_biases(plan))
    if "user" in plan.texts and draw(st.booleans()):
        body["user"] = draw(_text_of(plan, "user"))
    if streamed:
        body["stream"] = True
        if plan.stream_options and draw(st.booleans()):
            body["stream_options"] = {"include_usage": draw(st.booleans())}
    elif plan.stream and draw(st.booleans()):
        body["stream"] = False
    return body


def as_case(
    spec: Spec, body: dict[str, Any], mode: Mode = "valid", label: str | None = None
) -> Case:
    """A Case of ``body`` with its tags and a label, validated by :func:`build_case`."""
    from conformance.strategies._cases import generated_case

    return generated_case(spec, body, mode, label or describe(body))


def valid_requests(
    spec: Spec,
    *,
    model: str,
    max_tokens: int = 8,
    vocab_size: int = 1000,
    stream: bool | None = False,
) -> st.SearchStrategy[Case]:
    """Schema-valid requests within the run's cost bounds (``stream=None``: either way)."""
    plan = make_plan(spec, model=model, max_tokens=max_tokens, vocab_size=vocab_size)
    if stream and not plan.stream:
        raise ValueError(f"spec {spec.name!r} declares no `stream` parameter")
    return valid_bodies(plan, stream if plan.stream else False).map(
        lambda body: as_case(spec, body)
    )
