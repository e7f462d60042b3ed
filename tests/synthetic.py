"""Synthetic exchanges for judge-level tests: conformant answers built by hand.

``completion_for`` and ``chunks_for`` build what a conformant server answers to a case
(one token per word of a fixed text, logprobs when asked, echo when asked); tests change
one thing in them and judge the Exchange directly, without a server.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers, SSEEvent

MODEL = "reference-model"
CREATED = 1_760_000_000
WORDS = ["Hello", " world", " and", " more"]


def req(**body: Any) -> Case:
    tags = body.pop("tags", frozenset())
    mode = body.pop("mode", "valid")
    full = {"model": MODEL, "prompt": "Say hi", "max_tokens": 4, **body}
    return Case(full, mode=mode, label="synthetic", tags=frozenset(tags))


def _logprobs(tokens: list[str], k: int, start: int) -> dict[str, Any]:
    offsets, at = [], start
    for t in tokens:
        offsets.append(at)
        at += len(t)
    top = [{t: -0.1, **{f"alt{i}": -2.0 - i for i in range(k - 1)}} for t in tokens]
    return {
        "tokens": list(tokens),
        "token_logprobs": [-0.1] * len(tokens),
        "top_logprobs": top,
        "text_offset": offsets,
    }


def _generated(case: Case, words: list[str] | None) -> tuple[list[str], bool]:
    """The tokens generated for each choice, and whether a stop sequence ended them."""
    generated = (words if words is not None else WORDS)[: case.body.get("max_tokens", 16)]
    stop = case.body.get("stop") or []
    cut = [i for i, w in enumerate(generated) if w in stop]
    return (generated[: cut[0]], True) if cut else (generated, False)


def choices_for(
    case: Case, words: list[str] | None = None, omit_null: bool = False
) -> list[dict[str, Any]]:
    body = case.body
    limit = body.get("max_tokens", 16)
    generated, stopped = _generated(case, words)
    k = body.get("logprobs")
    out = []
    for i in range(len(case.prompts) * case.n):
        prompt = case.prompts[i // case.n]
        text = "".join(generated)
        tokens = list(generated)
        start = 0
        if body.get("echo") is True and isinstance(prompt, str):
            text = prompt + text
            tokens = [prompt, *tokens]
        elif isinstance(prompt, str):
            start = len(prompt)
        lp = _logprobs(tokens, k, start) if isinstance(k, int) and k > 0 else None
        if lp is not None and body.get("echo") is True:
            lp["token_logprobs"][0] = None
            lp["top_logprobs"][0] = None
        finish = "length" if len(generated) >= limit and not stopped else "stop"
        choice = {"index": i, "text": text, "finish_reason": finish}
        out.append(choice if lp is None and omit_null else {**choice, "logprobs": lp})
    return out


def usage_for(
    case: Case, choices: list[dict[str, Any]], words: list[str] | None = None
) -> dict[str, int]:
    done = len(_generated(case, words)[0]) * len(choices)
    prompt = sum(len(p) if isinstance(p, list) else 2 for p in case.prompts)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def completion_for(
    case: Case, words: list[str] | None = None, omit_null: bool = False
) -> dict[str, Any]:
    choices = choices_for(case, words, omit_null)
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": CREATED,
        "model": MODEL,
        "choices": choices,
        "usage": usage_for(case, choices, words),
    }


def chunks_for(
    case: Case, words: list[str] | None = None, omit_null: bool = False
) -> list[dict[str, Any]]:
    """One chunk per choice with its whole text, then the usage chunk when asked for."""
    head = {"id": "cmpl-1", "object": "text_completion", "created": CREATED, "model": MODEL}
    choices = choices_for(case, words, omit_null)
    chunks = [{**head, "choices": [c]} for c in choices]
    options = case.body.get("stream_options") or {}
    if options.get("include_usage"):
        chunks.append({**head, "choices": [], "usage": usage_for(case, choices, words)})
    return chunks


def body_exchange(case: Case, body: Any, status: int = 200, raw: bytes | None = None) -> Exchange:
    data = raw if raw is not None else json.dumps(body, allow_nan=True).encode()
    return Exchange(
        case=case,
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=json.dumps(case.body).encode(),
        status=status,
        headers=Headers(
            [("content-type", "application/json"), ("x-request-id", "r1"), ("inference-id", "r1")]
        ),
        body=data,
    )


def stream_exchange(case: Case, payloads: list[Any], *, done: bool = True) -> Exchange:
    """An event stream of ``payloads`` (objects are JSON-encoded, strings sent as they are)."""
    datas = [p if isinstance(p, str) else json.dumps(p, allow_nan=True) for p in payloads]
    if done:
        datas.append("[DONE]")
    events = [SSEEvent(data=d, at=0.01 * i) for i, d in enumerate(datas)]
    return Exchange(
        case=case,
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=json.dumps(case.body).encode(),
        status=200,
        headers=Headers(
            [("content-type", "text/event-stream"), ("x-request-id", "r1"), ("inference-id", "r1")]
        ),
        body=b"".join(b"data: " + d.encode() + b"\n\n" for d in datas),
        events=events,
    )
