"""Edge requests: valid requests that sit on a boundary, each sent once.

A list rather than a strategy: each edge is a deliberate point (a bound hit exactly, a
feature pair, a hard string), so every one should be sent, in a stable order, and no
run should depend on a draw to reach it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.judging.document.spec import Spec
from conformance.judging.wire.case import MAY_REFUSE_TAG, Case
from conformance.strategies._branches import largest, smallest
from conformance.strategies._requests import (
    BEST_OF_MARGIN,
    MAX_CHOICES,
    STOP_CAPS,
    TEXT_CAPS,
    Plan,
    as_case,
    make_plan,
)
from conformance.strategies._schema import SchemaView, interval

BASE_PROMPT = "Say hi"
UNICODE_PROMPTS = (
    ("emoji prompt", "Say hi 👋🌍 👩‍👩‍👧 🇫🇷"),
    ("right-to-left prompt", "قل مرحبا ‏שלום‎ hello"),
    ("prompt with U+2028/U+2029", "line one\u2028line two\u2029next paragraph"),
    ("combining marks and CJK prompt", "e\u0301 n\u0303 Z\u0337 你好，世界"),
)
#: Non-ASCII text to be echoed with logprobs: its offsets show whether a server counts
#: characters (OpenAI) or UTF-8 bytes (llama-cpp-python before PR 1037).
NON_ASCII_PROMPT = "Café ☕ naïve 東京 😀 done"
#: A prompt with control characters that any JSON string may hold: echoed, it must come
#: back whole (llama.cpp cut prompts at a NUL: PR 25548). Declining it with a 4xx is legal.
CONTROL_PROMPT = "Say\u0000 hi\u0001 there\r and\u001f more"
#: Two prompts, neither the start of the other, for the choices of n with echo: each
#: choice's text shows which prompt it answers, so a choice at the wrong index shows
#: (OpenAI: choice j of prompt i at i × n + j). The first is the longer by 7 tokens, so a
#: server that numbers choices as they finish puts the second's first.
PLACED_PROMPTS = ("Count: 1 2 3 4 5 6 7 8", BASE_PROMPT)


def _prompt_edges(plan: Plan, view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """Prompts at the edges of each prompt branch: the smallest and the largest value it
    allows within the caps, hard Unicode where a string fits, the spec's null."""
    edges: list[tuple[str, dict[str, Any]]] = []
    caps = plan.prompt_caps
    n_for_three = 2 if plan.n is not None and plan.n[0] <= 2 <= plan.n[1] else None
    for branch in plan.prompt_branches:
        low, high = smallest(branch, caps), largest(branch, caps)
        if branch.form == "string":
            if view.accepts("prompt", ""):
                edges.append(("empty string prompt", {"prompt": ""}))
            edges += [
                (label, {"prompt": text})
                for label, text in UNICODE_PROMPTS
                if view.accepts("prompt", text)
            ]
            if high is not None and high != BASE_PROMPT and view.accepts("prompt", high):
                edges.append(
                    (f"text prompt of {len(high)} characters (the most)", {"prompt": high})
                )
            continue
        if branch.form == "tokens":
            top = largest(branch, replace(caps, items=2))
            ends = [low[0], top[-1]] if low and top else None
            if ends == [0, plan.vocab_size - 1] and view.accepts("prompt", ends):
                edges.append(("token ids at both ends of the vocabulary", {"prompt": ends}))
            elif ends and view.accepts("prompt", ends):
                edges.append(("token ids at both ends of the allowed range", {"prompt": ends}))
            elif low is not None:
                edges.append(("token ids, the fewest and lowest", {"prompt": low}))
            continue
        if branch.form == "strings" and view.accepts("prompt", [BASE_PROMPT]):
            # A list holding one prompt: mlx-lm's generation thread dies on it.
            edges.append(("one-item prompt list", {"prompt": [BASE_PROMPT]}))
        if high is None:
            continue
        # The hand-picked mix where the branch allows it, else the branch's largest value.
        top_id = plan.vocab_size - 1
        picked = {
            "strings": [BASE_PROMPT, UNICODE_PROMPTS[0][1], "1, 2, 3,"],
            "token-lists": [[0], [top_id, 1], [2, 3, top_id]],
        }.get(branch.form)
        many: dict[str, Any] = {"prompt": picked if view.accepts("prompt", picked) else high}
        high = many["prompt"]
        if n_for_three and len(high) * n_for_three <= MAX_CHOICES:
            many["n"] = n_for_three
        what = "text" if branch.form == "strings" else "token"
        edges.append((f"{len(high)} {what} prompts, the most choices", many))
        placed = _placed(plan, view)
        if branch.form == "strings" and placed is not None:
            edges.append(("2 text prompts, n=2, echo: each choice echoes its own prompt", placed))
    if view.accepts("prompt", None):
        edges.append(("null prompt (the spec's default)", {"prompt": None}))
    return edges


#: The largest token id when the schema sets no bound: token ids are 32-bit integers on
#: the servers we know (vLLM, llama.cpp, TGI), and larger ones overflow there.
INT32_MAX = 2**31 - 1


def _token_id_edges(plan: Plan, view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """Schema-valid token ids a model may not have: the first id past the vocabulary
    (--vocab-size) and the largest id the schema allows. A target may refuse them with a
    4xx (MAY_REFUSE_TAG); a 5xx is VALID-NO-5XX's finding."""
    edges: list[tuple[str, dict[str, Any]]] = []
    for branch in plan.prompt_branches:
        if branch.form != "tokens":
            continue
        items = branch.schema.get("items")
        bound = interval(items, formats=True).high
        top = INT32_MAX if bound is None else int(bound)
        largest = (
            f"the largest token id the schema allows ({top})"
            if bound is not None
            else f"token id 2^31-1 (the schema sets no bound; {top})"
        )
        ids = {
            f"a token id just past the vocabulary ({plan.vocab_size}, --vocab-size)": plan.vocab_size,
            largest: top,
        }
        for label, token in ids.items():
            if token >= plan.vocab_size and view.accepts("prompt", [token]):
                edges.append((label, {"prompt": [token]}))
        if top == plan.vocab_size:
            edges.pop()
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
    edges += _open_bound_edges(view)
    if plan.logprobs is not None:
        low, high = plan.logprobs
        edges.append((f"logprobs at its minimum ({low})", {"logprobs": low}))
        edges.append((f"logprobs at its maximum ({high})", {"logprobs": high}))
        if plan.echo:
            edges.append(("echo with logprobs", {"echo": True, "logprobs": high}))
            if view.accepts("prompt", NON_ASCII_PROMPT):
                body = {"echo": True, "logprobs": high, "prompt": NON_ASCII_PROMPT}
                edges.append(("echo with logprobs, a non-ASCII prompt", body))
            if plan.max_tokens is not None and plan.max_tokens[0] == 0:
                scoring = {"echo": True, "logprobs": min(max(1, low), high), "max_tokens": 0}
                edges.append(("echo, logprobs, max_tokens=0: scoring the prompt", scoring))
    if plan.echo:
        edges.append(("echo without logprobs", {"echo": True}))
        if view.accepts("prompt", CONTROL_PROMPT):
            label = "echo, a prompt with control characters (NUL, U+0001, a lone CR)"
            edges.append((label, {"echo": True, "prompt": CONTROL_PROMPT}))
    if plan.stop_items is not None:
        most = plan.stop_items[1]
        stops: Any = ["\n", ".", "。", "👋", "END", "###"][:most]
        stops += [f"END{i}" for i in range(len(stops), most)]
        if not view.accepts("stop", stops):
            lists = [b for b in plan.stop_branches if b.form != "string"]
            stops = largest(lists[0], STOP_CAPS) if lists else None
        if stops is not None:
            edges.append((f"stop with exactly {most} sequences (the most)", {"stop": stops}))
    if plan.stop_string:
        newline = "\n" if view.accepts("stop", "\n") else None
        strings = [b for b in plan.stop_branches if b.form == "string"]
        stop = newline or smallest(strings[0], STOP_CAPS)
        edges.append((f"stop as the string {stop!r}", {"stop": stop}))
    if plan.seed is not None:
        edges.append(("seed=0", {"seed": 0}))
        top = view.interval("seed", formats=True).high
        if isinstance(top, int) and top > plan.seed[1]:
            edges.append((f"seed at its largest value ({top})", {"seed": top}))
    if plan.logit_bias is not None:
        _, low, high = plan.logit_bias
        bias = {"0": low, str(plan.vocab_size - 1): high}
        edges.append(("logit_bias at both ends", {"logit_bias": bias}))
    for name, branch in plan.text_branches:
        ends = {
            smallest(branch, TEXT_CAPS[name]): "shortest",
            largest(branch, TEXT_CAPS[name]): "longest",
        }
        for end, which in ends.items():
            if end is not None:
                edges.append((f"{name}, the {which} allowed ({len(end)} characters)", {name: end}))
    return edges


def _placed(plan: Plan, view: SchemaView) -> dict[str, Any] | None:
    """Two text prompts, n=2 and echo, where the spec allows them (see PLACED_PROMPTS)."""
    prompts = list(PLACED_PROMPTS)
    two = plan.n is not None and plan.n[0] <= 2 <= plan.n[1]
    if not (plan.echo and two and view.accepts("prompt", prompts)):
        return None
    return {"prompt": prompts, "n": 2, "echo": True}


def _stream_edges(plan: Plan, view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """Streamed requests: plain, with each include_usage, and with the other features."""
    if not plan.stream:
        return []
    edges: list[tuple[str, dict[str, Any]]] = [("stream", {"stream": True})]
    if plan.stream_options:
        for usage in (True, False):
            options = {"stream": True, "stream_options": {"include_usage": usage}}
            edges.append((f"stream with include_usage={str(usage).lower()}", options))
    # Each streamed feature alone too: a target that declines one of the mixed request's
    # features (n other than 1, stop) must still have its streamed logprobs and echo judged.
    if plan.logprobs is not None:
        edges.append(("stream with logprobs", {"stream": True, "logprobs": plan.logprobs[1]}))
    if plan.echo:
        edges.append(("stream with echo", {"stream": True, "echo": True}))
        if plan.logprobs is not None and view.accepts("prompt", NON_ASCII_PROMPT):
            top = min(max(1, plan.logprobs[0]), plan.logprobs[1])
            body = {"stream": True, "echo": True, "logprobs": top, "prompt": NON_ASCII_PROMPT}
            edges.append(("stream with echo and logprobs, a non-ASCII prompt", body))
    mixed: dict[str, Any] = {"stream": True}
    if plan.n is not None and plan.n[0] <= 2 <= plan.n[1]:
        mixed["n"] = 2
    if plan.logprobs is not None:
        mixed["logprobs"] = plan.logprobs[1]
    if plan.echo:
        mixed["echo"] = True
    if plan.stop_items is not None and plan.stop_items[0] <= 2:
        mixed["stop"] = ["\n", "."][: max(plan.stop_items[0], min(2, plan.stop_items[1]))]
    if len(mixed) > 1:
        edges.append(("stream with n, logprobs, echo and stop", mixed))
    placed = _placed(plan, view)
    if placed is not None:
        edges.append(("stream with 2 text prompts, n=2, echo", {"stream": True, **placed}))
    for name, branch in plan.text_branches:
        suffix = largest(branch, TEXT_CAPS[name]) if name == "suffix" else None
        if suffix:
            edges.append(
                (
                    f"stream with a suffix ({len(suffix)} characters)",
                    {"stream": True, "suffix": suffix},
                )
            )
    return edges


def _open_bound_edges(view: SchemaView) -> list[tuple[str, dict[str, Any]]]:
    """max_tokens where the spec sets no minimum: the values real servers mishandle.

    -1 (and 0, sent anyway) are valid under such a document (llama-cpp-python answers -1 with a 500).
    A large max_tokens is left out: it would cost what the run's budget did not agree to.
    """
    if not view.declares("max_tokens") or view.interval("max_tokens").low is not None:
        return []
    return [
        (f"max_tokens={v} (the spec sets no minimum)", {"max_tokens": v})
        for v in (-1,)
        if view.accepts("max_tokens", v)
    ]


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
    refusable = {label for label, _ in _token_id_edges(plan, view)}
    edges = [
        *_prompt_edges(plan, view),
        *_token_id_edges(plan, view),
        *_count_edges(plan),
        *_feature_edges(plan, view),
        *_sampling_edges(plan),
        *_stream_edges(plan, view),
        *_null_edges(view),
    ]
    cases = []
    for label, params in edges:
        body: dict[str, Any] = {"model": model, "prompt": plan.base_prompt}
        if plan.max_tokens is not None:
            body["max_tokens"] = plan.max_tokens[1]
        body.update(params)
        if stream is None or (body.get("stream") is True) == stream:
            case = as_case(spec, body, "edge", label)
            if label in refusable:
                case = replace(case, tags=case.tags | {MAY_REFUSE_TAG})
            cases.append(case)
    return cases
