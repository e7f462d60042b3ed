"""Edge requests: valid requests that sit on a boundary, each sent once.

A list rather than a strategy: each edge is a deliberate point (a bound hit exactly, a
feature pair, a hard string), so every one should be sent, in a stable order, and no
run should depend on a draw to reach it.
"""

from __future__ import annotations

from typing import Any

from conformance.case import Case
from conformance.spec import Spec
from strategies._requests import BEST_OF_MARGIN, MAX_CHOICES, Plan, as_case, make_plan
from strategies._schema import SchemaView

BASE_PROMPT = "Say hi"
UNICODE_PROMPTS = (
    ("emoji prompt", "Say hi 👋🌍 👩‍👩‍👧 🇫🇷"),
    ("right-to-left prompt", "قل مرحبا ‏שלום‎ hello"),
    ("prompt with U+2028/U+2029", "line one\u2028line two\u2029next paragraph"),
    ("combining marks and CJK prompt", "e\u0301 n\u0303 Z\u0337 你好，世界"),
)


def _prompt_edges(plan: Plan, view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """Prompts at the edges: empty, hard Unicode, vocabulary ends, the most prompts."""
    edges: list[tuple[str, dict[str, Any]]] = []
    top = plan.vocab_size - 1
    if "string" in plan.forms:
        if view.accepts("prompt", ""):
            edges.append(("empty string prompt", {"prompt": ""}))
        edges += [(label, {"prompt": text}) for label, text in UNICODE_PROMPTS]
    if view.accepts("prompt", None):
        edges.append(("null prompt (the spec's default)", {"prompt": None}))
    n_for_three = 2 if plan.n is not None and plan.n[0] <= 2 <= plan.n[1] else None
    if "strings" in plan.forms:
        many: dict[str, Any] = {"prompt": [BASE_PROMPT, UNICODE_PROMPTS[0][1], "1, 2, 3,"]}
        if n_for_three:
            many["n"] = n_for_three
        edges.append(("three text prompts, the most choices", many))
    if "tokens" in plan.forms:
        edges.append(("token ids at both ends of the vocabulary", {"prompt": [0, top]}))
    if "token-lists" in plan.forms:
        lists: dict[str, Any] = {"prompt": [[0], [top, 1], [2, 3, top]]}
        if n_for_three:
            lists["n"] = n_for_three
        edges.append(("three token prompts, the most choices", lists))
    return edges


def _sampling_edges(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """Each sampling parameter at both of its bounds (the spec's, else OpenAI's)."""
    edges: list[tuple[str, dict[str, Any]]] = []
    bounds = dict(plan.samplers)
    for name in ("temperature", "top_p"):
        if name in bounds:
            b = bounds[name]
            if not b.low_open:
                edges.append((f"{name} at its minimum", {name: b.low}))
            if not b.high_open:
                edges.append((f"{name} at its maximum", {name: b.high}))
    penalties = [p for p in ("frequency_penalty", "presence_penalty") if p in bounds]
    for end in ("low", "high"):
        params: dict[str, Any] = {
            p: getattr(bounds[p], end) for p in penalties if not getattr(bounds[p], f"{end}_open")
        }
        if params:
            edges.append((f"penalties at their {'minimum' if end == 'low' else 'maximum'}", params))
    return edges


def _count_edges(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """n and best_of: n > 1, best_of > n (never equal), within the cost caps."""
    edges: list[tuple[str, dict[str, Any]]] = []
    if plan.n is not None and plan.n[1] > 1:
        edges.append((f"n={plan.n[1]}", {"n": plan.n[1]}))
    if plan.best_of is None:
        return edges
    low, high = plan.best_of
    for n in (1, 2):
        if n > 1 and (plan.n is None or not plan.n[0] <= n <= plan.n[1]):
            continue
        best_of = min(high, n + BEST_OF_MARGIN, MAX_CHOICES)
        if best_of > n and best_of >= low:
            params = {"best_of": best_of} if n == 1 else {"n": n, "best_of": best_of}
            edges.append((f"best_of={best_of} > n={n}", params))
    return edges


def _feature_edges(plan: Plan, view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """logprobs, echo, stop, max_tokens, seed, logit_bias, suffix, user at their edges."""
    edges: list[tuple[str, dict[str, Any]]] = []
    if plan.max_tokens is not None and plan.max_tokens[0] == 0:
        edges.append(("max_tokens=0", {"max_tokens": 0}))
    if plan.logprobs is not None:
        low, high = plan.logprobs
        edges.append((f"logprobs at its minimum ({low})", {"logprobs": low}))
        edges.append((f"logprobs at its maximum ({high})", {"logprobs": high}))
        if plan.echo:
            edges.append(("echo with logprobs", {"echo": True, "logprobs": high}))
            if plan.max_tokens is not None and plan.max_tokens[0] == 0:
                scoring = {"echo": True, "logprobs": 1, "max_tokens": 0}
                edges.append(("echo, logprobs, max_tokens=0: scoring the prompt", scoring))
    if plan.echo:
        edges.append(("echo without logprobs", {"echo": True}))
    if plan.stop_items is not None:
        most = plan.stop_items[1]
        stops = ["\n", ".", "。", "👋", "END", "###"][:most]
        edges.append((f"stop with exactly {most} sequences (the most)", {"stop": stops}))
    if plan.stop_string:
        edges.append(("stop as a newline string", {"stop": "\n"}))
    if plan.seed is not None:
        edges.append(("seed=0", {"seed": 0}))
        top = view.interval("seed", formats=True).high
        if isinstance(top, int) and top > plan.seed[1]:
            edges.append((f"seed at its largest value ({top})", {"seed": top}))
    if plan.logit_bias is not None:
        _, low, high = plan.logit_bias
        bias = {"0": low, str(plan.vocab_size - 1): high}
        edges.append(("logit_bias at both ends", {"logit_bias": bias}))
    for name in plan.texts:
        edges.append((name, {name: "user-1234" if name == "user" else " The end."}))
    return edges


def _stream_edges(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """Streamed requests: plain, with each include_usage, and with the other features."""
    if not plan.stream:
        return []
    edges: list[tuple[str, dict[str, Any]]] = [("stream", {"stream": True})]
    if plan.stream_options:
        for usage in (True, False):
            options = {"stream": True, "stream_options": {"include_usage": usage}}
            edges.append((f"stream with include_usage={str(usage).lower()}", options))
    mixed: dict[str, Any] = {"stream": True}
    if plan.n is not None and plan.n[0] <= 2 <= plan.n[1]:
        mixed["n"] = 2
    if plan.logprobs is not None:
        mixed["logprobs"] = plan.logprobs[1]
    if plan.echo:
        mixed["echo"] = True
    if plan.stop_items is not None:
        mixed["stop"] = ["\n", "."][: plan.stop_items[1]]
    if len(mixed) > 1:
        edges.append(("stream with n, logprobs, echo and stop", mixed))
    return edges


def _null_edges(view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """Every optional parameter the schema lets be null, as an explicit null.

    max_tokens stays set: a null would let the target's default decide the cost.
    """
    skip = {"model", "prompt", "max_tokens", *view.required}
    nulls = {name: None for name in view.properties if name not in skip}
    nulls = {name: None for name in nulls if view.accepts(name, None)}
    return [("explicit null for every nullable parameter", nulls)] if nulls else []


def edge_requests(
    spec: Spec,
    *,
    model: str,
    max_tokens: int = 8,
    vocab_size: int = 1000,
    stream: bool | None = None,
) -> list[Case]:
    """The boundary-hitting valid requests of ``spec``, as a list (``stream``: filter)."""
    plan = make_plan(spec, model=model, max_tokens=max_tokens, vocab_size=vocab_size)
    view = SchemaView(spec)
    edges = [
        *_prompt_edges(plan, view),
        *_count_edges(plan),
        *_feature_edges(plan, view),
        *_sampling_edges(plan),
        *_stream_edges(plan),
        *_null_edges(view),
    ]
    cases = []
    for label, params in edges:
        body: dict[str, Any] = {"model": model, "prompt": BASE_PROMPT}
        if plan.max_tokens is not None:
            body["max_tokens"] = plan.max_tokens[1]
        body.update(params)
        if stream is None or (body.get("stream") is True) == stream:
            cases.append(as_case(body, "edge", label))
    return cases
