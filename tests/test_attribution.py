"""Attribution: a witness the target is shown to get wrong is no evidence for another
requirement (conformance/attribution.py), on synthetic exchanges judged into Results.

The fault corpus (tests/test_fault_corpus.py) runs the same shapes on the reference
target: usage-completion-off-by-one and stream-logprobs-cumulative.
"""

from __future__ import annotations

import copy
from typing import Any

from support import judge
from synthetic import body_exchange, chunks_for, completion_for, req, stream_exchange

from conformance.attribution import ATTRIBUTION, attribute
from conformance.exchange import Exchange
from conformance.requirements import REGISTRY, load_checks
from conformance.results import Results
from conformance.spec import load_spec

load_checks()
AIHUBMIX = load_spec("aihubmix")


def run(*exchanges: Exchange) -> Results:
    results = Results.for_requirements(list(REGISTRY.values()))
    for exchange in exchanges:
        results.record(exchange, list(judge(AIHUBMIX, exchange).values()))
    return results


def failing(results: Results) -> set[str]:
    return {rid for rid, t in results.tallies.items() if t.failed}


def off_by_one(body: dict[str, Any]) -> dict[str, Any]:
    """FastChat: completion_tokens is its loop index, one short; the rest is right."""
    out = copy.deepcopy(body)
    out["usage"]["completion_tokens"] -= 1
    out["usage"]["total_tokens"] -= 1
    return out


def test_usage_off_by_one_is_usage_completion_tokens_alone() -> None:
    with_logprobs, plain = req(logprobs=1), req()
    results = run(
        body_exchange(with_logprobs, off_by_one(completion_for(with_logprobs))),
        body_exchange(plain, off_by_one(completion_for(plain))),
    )
    # Judged alone, the plain answer's usage (3 tokens, "length" at max_tokens 4) is all
    # FINISH-LENGTH can count by; the logprobs of the other answer show usage is wrong.
    assert failing(results) == {"USAGE-COMPLETION-TOKENS", "FINISH-LENGTH"}
    withheld = attribute(results)
    assert failing(results) == {"USAGE-COMPLETION-TOKENS"}
    finish = results.tallies["FINISH-LENGTH"]
    assert finish.not_judged == [
        "1 finding(s) not judged: usage shown wrong by USAGE-COMPLETION-TOKENS"
    ]
    assert (finish.checked, finish.fingerprints, finish.examples) == (1, [], [])
    assert withheld == results.meta[ATTRIBUTION]
    assert attribute(results) == []  # settled once: running it again changes nothing
    assert failing(results) == {"USAGE-COMPLETION-TOKENS"}


def test_a_finish_counted_by_usage_stands_while_usage_is_not_shown_wrong() -> None:
    plain = req()
    body = completion_for(plain)
    body["choices"][0]["finish_reason"] = "length"
    body = off_by_one(body)
    results = run(body_exchange(plain, body))
    attribute(results)
    assert failing(results) == {"FINISH-LENGTH"}


def test_streamed_usage_off_by_one_is_not_also_stream_finish_length() -> None:
    with_logprobs = req(logprobs=1, stream=True, stream_options={"include_usage": True})
    plain = req(stream=True, stream_options={"include_usage": True})
    exchanges = []
    for case in (with_logprobs, plain):
        chunks = chunks_for(case)
        chunks[-1]["usage"]["completion_tokens"] -= 1
        chunks[-1]["usage"]["total_tokens"] -= 1
        exchanges.append(stream_exchange(case, chunks))
    results = run(*exchanges)
    assert failing(results) == {"USAGE-COMPLETION-TOKENS", "STREAM-FINISH-LENGTH"}
    attribute(results)
    assert failing(results) == {"USAGE-COMPLETION-TOKENS"}


def cumulative(case: Any, words: list[str]) -> list[dict[str, Any]]:
    """One chunk per token (the echoed prompt first, with echo), each chunk's logprobs
    holding every token so far."""
    whole = completion_for(case, words)["choices"][0]
    lp, chunks = whole["logprobs"], []
    tokens = lp["tokens"]
    for i, token in enumerate(tokens):
        piece = {k: v[: i + 1] for k, v in lp.items()}
        finish = whole["finish_reason"] if i == len(tokens) - 1 else None
        choice = {"index": 0, "text": token, "logprobs": piece, "finish_reason": finish}
        head = {"id": "cmpl-1", "object": "text_completion", "created": 1_760_000_000}
        chunks.append({**head, "model": "reference-model", "choices": [choice]})
    return chunks


def test_cumulative_stream_logprobs_are_not_summed_into_an_overrun() -> None:
    case = req(logprobs=1, stream=True, max_tokens=4)
    words = ["Hello", " world", " and", " more"]
    results = run(stream_exchange(case, cumulative(case, words)))
    # Summed, the chunks' logprobs make 1 + 2 + 3 + 4 = 10 tokens for max_tokens 4.
    assert "STREAM-MAX-TOKENS" in failing(results)
    assert "10 generated tokens" in results.tallies["STREAM-MAX-TOKENS"].examples[0]["message"]
    attribute(results)
    assert "STREAM-MAX-TOKENS" not in failing(results)
    assert failing(results) == {"STREAM-LOGPROBS-OFFSETS"}
    note = results.tallies["STREAM-MAX-TOKENS"].not_judged[0]
    assert "logprobs shown wrong by" in note


def test_usage_shown_wrong_only_through_wrong_logprobs_keeps_usage_findings() -> None:
    # USAGE-COMPLETION-TOKENS' finding rests on the cumulative logprobs: withheld first,
    # it no longer shows usage wrong, so a usage-counted finding elsewhere would stand.
    case = req(logprobs=1, stream=True, max_tokens=4, stream_options={"include_usage": True})
    words = ["Hello", " world", " and", " more"]
    chunks = cumulative(case, words)
    chunks.append(
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 1_760_000_000,
            "model": "reference-model",
            "choices": [],
            "usage": {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6},
        }
    )
    results = run(stream_exchange(case, chunks))
    assert "USAGE-COMPLETION-TOKENS" in failing(results)
    attribute(results)
    assert "USAGE-COMPLETION-TOKENS" not in failing(results)
    assert "STREAM-MAX-TOKENS" not in failing(results)


def test_cumulative_logprobs_with_echo_are_one_finding() -> None:
    # With echo the first chunk holds the prompt's null logprob; repeated by every later
    # chunk, the joined arrays would break LOGPROBS-VALUES' and TOP-COUNT's rules too.
    case = req(logprobs=1, stream=True, max_tokens=4, echo=True)
    words = ["Hello", " world", " and", " more"]
    chunks = cumulative(req(logprobs=1, echo=True), words)
    results = run(stream_exchange(case, chunks))
    attribute(results)
    assert failing(results) == {"STREAM-LOGPROBS-OFFSETS"}


def test_a_wrong_prompt_count_does_not_withhold_a_completion_count() -> None:
    # USAGE-PROMPT-TOKENS says nothing of how many tokens were generated: FINISH-LENGTH,
    # counted by completion_tokens, stands.
    plain = req()
    body = completion_for(plain)
    body["choices"][0]["finish_reason"] = "length"
    body = off_by_one(body)
    other = completion_for(plain)
    other["usage"]["prompt_tokens"] = 0
    other["usage"]["total_tokens"] = other["usage"]["completion_tokens"]
    results = run(body_exchange(plain, body), body_exchange(plain, other))
    attribute(results)
    assert failing(results) == {"FINISH-LENGTH", "USAGE-PROMPT-TOKENS"}
