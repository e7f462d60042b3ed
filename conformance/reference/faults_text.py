"""Faults of the text as returned: offsets, stop sequences that span tokens, prompts, and
the keys of top_logprobs.

Each is a defect shape from a real server's tracker: offsets counted in UTF-8 bytes
(llama-cpp-python PR 1037), the head of a stop sequence kept streamed (llama.cpp PR 15007)
or in both modes (oMLX #2386), a prompt silently cut at a NUL (llama.cpp PR 25548).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.reference import model
from conformance.reference.registry import fault
from conformance.reference.shaping import Plan
from conformance.reference.validation import CompletionRequest

Body = dict[str, Any]


@fault(
    "text-offset-bytes",
    "`text_offset` advances by each token's UTF-8 bytes, not its characters (both modes).",
    "body",
    "chunk",
)
def _text_offset_bytes(body: Body, request: CompletionRequest) -> Body:
    for choice in body["choices"]:
        lp = choice.get("logprobs")
        if not isinstance(lp, dict) or not lp.get("text_offset"):
            continue
        offset, offsets = lp["text_offset"][0], []
        for token in lp["tokens"]:
            offsets.append(offset)
            offset += len(token.encode("utf-8"))
        lp["text_offset"] = offsets
    return body


@fault(
    "stop-head-kept",
    "A stop sequence is cut by dropping only its last token: the head of one that spans "
    "tokens stays in the text, finish_reason stop (both modes).",
    "plan",
)
def _stop_head_kept(plan: Plan) -> Plan:
    return replace(plan, stop_head_kept=True)


@fault(
    "stream-stop-head-kept",
    "Streamed, the head of a stop sequence that spans tokens is sent before the match ends "
    "the stream; the non-streamed text is cut right (streamed).",
    "plan",
)
def _stream_stop_head_kept(plan: Plan) -> Plan:
    return replace(plan, stop_head_kept=plan.streamed)


@fault(
    "prompt-cut-at-nul",
    "A text prompt is silently cut at its first NUL: echo and prompt_tokens show only the "
    "head (both modes).",
    "parsed",
)
def _prompt_cut_at_nul(request: CompletionRequest) -> CompletionRequest:
    cut = tuple(
        model.Prompt.from_text(p.text.split("\x00", 1)[0]) if "\x00" in p.text else p
        for p in request.prompts
    )
    return replace(request, prompts=cut)


@fault(
    "top-logprobs-byte-collisions",
    "At every position, three byte-level candidates decode to the same empty string and "
    "collide as one `top_logprobs` key (vLLM on a byte-level tokenizer) (both modes).",
    "body",
    "chunk",
    tolerated=True,
)
def _top_logprobs_byte_collisions(body: Body, request: CompletionRequest) -> Body:
    for choice in body["choices"]:
        lp = choice.get("logprobs")
        tops: list[Any] = (lp.get("top_logprobs") or []) if isinstance(lp, dict) else []
        for j, top in enumerate(tops):
            if isinstance(top, dict) and len(top) >= 3:
                ranked = sorted(top.items(), key=lambda kv: -kv[1])
                tops[j] = {**dict(ranked[:-3]), "": ranked[-3][1]}
    return body
