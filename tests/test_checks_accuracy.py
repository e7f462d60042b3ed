"""The judge's accuracy on shapes seen on real servers (issue #12): each fix proven both
ways with synthetic exchanges (tests/synthetic.py), besides the transcripts that found it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from support import failed, judge
from synthetic import body_exchange, chunks_for, completion_for, req, stream_exchange

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import load_spec
from conformance.judging.wire.case import Case

load_checks()
AIHUBMIX, NSCALE = load_spec("aihubmix"), load_spec("nscale")
USAGE = {"stream_options": {"include_usage": True}}


def _invalid(case: Case, breaks: str) -> Case:
    return dataclasses.replace(case, mode="invalid", breaks=breaks, label=breaks)


# -- a rule the judging document does not state -------------------------------------------


def test_a_cross_rule_the_spec_does_not_state_is_not_judged_by_invalid_rejected() -> None:
    case = _invalid(req(n=2, best_of=1, max_tokens=1), "cross:best_of<n")
    served = body_exchange(case, completion_for(case))
    # AIHubMix's text says best_of must be greater than n: serving it is a finding.
    assert "INVALID-REJECTED" in failed(judge(AIHUBMIX, served))
    # Nscale states no such rule: the request is valid there, and a 200 a proper answer.
    findings = judge(NSCALE, served)
    assert "INVALID-REJECTED" not in findings
    assert findings["USAGE-MAX-TOKENS"].outcome == "passed"  # judged as a valid answer


def test_an_unstated_rule_case_is_judged_by_the_valid_request_rules() -> None:
    body_in = req(max_tokens=1, stream_options={"include_usage": True})
    case = _invalid(body_in, "cross:stream_options-without-stream")
    body = completion_for(case)
    body["usage"] = {"prompt_tokens": 2, "completion_tokens": 20, "total_tokens": 22}
    findings = judge(NSCALE, body_exchange(case, body))
    assert "USAGE-MAX-TOKENS" in failed(findings)
    assert "max_tokens=1" in findings["USAGE-MAX-TOKENS"].message
    assert "INVALID-REJECTED" not in findings


def test_a_stated_rule_still_demands_rejection_under_both_specs() -> None:
    case = _invalid(req(max_tokens="one"), "max_tokens:type")
    for spec in (AIHUBMIX, NSCALE):
        findings = judge(spec, body_exchange(case, completion_for(req())))
        assert "INVALID-REJECTED" in failed(findings), spec.name
        assert "cross" not in findings["INVALID-REJECTED"].message


# -- a stream with no event at all ---------------------------------------------------------


def _empty_stream(case: Case) -> Any:
    exchange = stream_exchange(case, [], done=False)
    exchange.body = b""
    return exchange


def test_a_stream_without_any_event_is_stream_done_s_alone() -> None:
    case = req(stream=True, **USAGE)
    got = failed(judge(AIHUBMIX, _empty_stream(case)))
    assert "STREAM-DONE" in got
    assert not got & {"STREAM-INDEXES", "STREAM-USAGE"}, got


def test_a_stream_with_only_done_still_misses_its_choices_and_usage() -> None:
    case = req(stream=True, **USAGE)
    got = failed(judge(AIHUBMIX, stream_exchange(case, [])))
    assert {"STREAM-INDEXES", "STREAM-USAGE"} <= got
    assert "STREAM-DONE" not in got


# -- unrequested usage beside a payload that is not a chunk --------------------------------


def _with_null_event(case: Case, usage: Any) -> Any:
    chunks = chunks_for(case)
    for chunk in chunks:
        chunk["usage"] = usage
    return stream_exchange(case, [chunks[0], "null", *chunks[1:]])


def test_unrequested_usage_is_seen_on_the_chunks_beside_a_null_event() -> None:
    case = req(stream=True, prompt=["a", "b"])
    zeroed = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    got = failed(judge(AIHUBMIX, _with_null_event(case, zeroed)))
    assert {"STREAM-CHUNK-SCHEMA", "STREAM-USAGE-UNREQUESTED"} <= got
    clean = failed(judge(AIHUBMIX, _with_null_event(case, None)))
    assert "STREAM-CHUNK-SCHEMA" in clean and "STREAM-USAGE-UNREQUESTED" not in clean


# -- echo judged when the only prompt is known ---------------------------------------------


def test_echo_is_judged_on_the_only_prompt_even_with_a_wrong_index() -> None:
    case = req(echo=True, max_tokens=1)
    body = completion_for(case)
    body["choices"][0]["index"] = -7
    ok = failed(judge(AIHUBMIX, body_exchange(case, body)))
    assert "CHOICES-INDEX" in ok and "ECHO-PREFIX" not in ok
    body["choices"][0]["text"] = "string"
    bad = judge(AIHUBMIX, body_exchange(case, body))
    assert {"CHOICES-INDEX", "ECHO-PREFIX"} <= failed(bad)
    assert "does not start with the prompt" in bad["ECHO-PREFIX"].message


# -- a zeroed usage placeholder nobody asked for -------------------------------------------

ZEROED = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _stream_with_usage(case: Case, usage: dict[str, int]) -> Any:
    chunks = chunks_for(case)
    for chunk in chunks:
        chunk["usage"] = dict(usage) if not chunk["choices"] else chunk.get("usage", usage)
    return stream_exchange(case, chunks)


def test_an_unrequested_zeroed_usage_is_stream_usage_unrequested_s_alone() -> None:
    case = req(stream=True)
    got = failed(judge(AIHUBMIX, _stream_with_usage(case, ZEROED)))
    assert "STREAM-USAGE-UNREQUESTED" in got
    assert not got & {"USAGE-PROMPT-TOKENS", "USAGE-COMPLETION-TOKENS"}, got


def test_a_requested_zero_usage_still_fails_the_counts() -> None:
    case = req(stream=True, **USAGE)
    chunks = chunks_for(case)
    chunks[-1]["usage"] = dict(ZEROED)
    findings = judge(AIHUBMIX, stream_exchange(case, chunks))
    assert {"USAGE-PROMPT-TOKENS", "USAGE-COMPLETION-TOKENS"} <= failed(findings)
    assert "prompt_tokens is 0" in findings["USAGE-PROMPT-TOKENS"].message


def test_an_unrequested_usage_with_counts_is_still_counted() -> None:
    case = req(stream=True)
    wrong = {"prompt_tokens": 0, "completion_tokens": 4, "total_tokens": 4}
    got = failed(judge(AIHUBMIX, _stream_with_usage(case, wrong)))
    assert {"STREAM-USAGE-UNREQUESTED", "USAGE-PROMPT-TOKENS"} <= got


# -- prompt_tokens plausibility, both sides ------------------------------------------------


def _counted(case: Case, prompt_tokens: int) -> dict[str, Any]:
    body = completion_for(case)
    done = body["usage"]["completion_tokens"]
    body["usage"] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": done,
        "total_tokens": prompt_tokens + done,
    }
    return judge(AIHUBMIX, body_exchange(case, body))


LONG = "Count the apples in the basket, then the pears."  # 47 UTF-8 bytes


def test_legal_prompt_counts_pass() -> None:
    # BOS (llama.cpp, vLLM, TGI) and a dummy-prefix token on top of one token per byte.
    assert "USAGE-PROMPT-TOKENS" not in failed(_counted(req(prompt="Say hi"), 6 + 2))
    # A token-id prompt passed through as ids, with a BOS.
    assert "USAGE-PROMPT-TOKENS" not in failed(_counted(req(prompt=[5, 6, 7]), 4))
    # Echo returns the prompt; it is not counted twice.
    echoed = req(prompt=LONG, echo=True, logprobs=1)
    assert "USAGE-PROMPT-TOKENS" not in failed(_counted(echoed, 11))
    # Fill in the middle: the suffix and three markers are evaluated with the prompt.
    fim = req(prompt="def area(r):", suffix="\n    return result  # the area of a circle")
    assert "USAGE-PROMPT-TOKENS" not in failed(_counted(fim, 24))


def test_implausible_prompt_counts_fail() -> None:
    for case, counted in (
        (req(prompt="Say hi"), 0),  # a non-empty prompt counted as nothing
        (req(prompt=LONG), 470),  # ten times the prompt's bytes
        (req(prompt=[5, 6, 7, 8, 9]), 2),  # fewer than the ids sent
        (req(prompt="def area(r):", suffix="x"), 40),  # a short suffix explains little
    ):
        findings = _counted(case, counted)
        assert "USAGE-PROMPT-TOKENS" in failed(findings), (case.body, counted)
        assert f"prompt_tokens is {counted}" in findings["USAGE-PROMPT-TOKENS"].message


# -- id: a unique identifier for the completion ---------------------------------------------


def _answer(case: Case, cid: str) -> Any:
    body = completion_for(case)
    body["id"] = cid
    return body_exchange(case, body)


def test_the_answer_to_another_request_has_its_own_id() -> None:
    first = req(temperature=0, seed=3)
    probe = dataclasses.replace(
        req(temperature=0, seed=3, stop=["zz"]), mode="probe", tags=frozenset({"probe:stop"})
    )
    fine = judge(AIHUBMIX, _answer(probe, "cmpl-2"), related=(_answer(first, "cmpl-1"),))
    assert fine["RESP-ID"].outcome == "passed"
    same = judge(AIHUBMIX, _answer(probe, "string"), related=(_answer(first, "string"),))
    assert "RESP-ID" in failed(same)
    assert "not a unique identifier" in same["RESP-ID"].message


def test_the_same_request_served_again_may_keep_its_id() -> None:
    case = req(temperature=0, seed=3)
    twin = req(temperature=0, seed=3, stream=True)
    streamed = stream_exchange(twin, [{**c, "id": "cmpl-1"} for c in chunks_for(twin)])
    findings = judge(AIHUBMIX, _answer(case, "cmpl-1"), related=(streamed,))
    assert findings["RESP-ID"].outcome == "passed"


# -- data-only server-sent events ---------------------------------------------------------


def _typed(case: Case, kind: str | None, **fields: Any) -> Any:
    exchange = stream_exchange(case, chunks_for(case))
    assert exchange.events is not None
    exchange.events = [dataclasses.replace(e, event=kind, **fields) for e in exchange.events]
    return exchange


def test_a_typed_event_breaks_the_data_only_stream() -> None:
    case = req(stream=True)
    findings = judge(AIHUBMIX, _typed(case, "completion"))
    assert failed(findings) == {"STREAM-DATA-ONLY"}
    assert "'completion'" in findings["STREAM-DATA-ONLY"].message
    # The default type, and id/retry fields, change nothing for a client.
    for legal in (_typed(case, "message"), _typed(case, None, id="7", retry=1000)):
        assert judge(AIHUBMIX, legal)["STREAM-DATA-ONLY"].outcome == "passed"
