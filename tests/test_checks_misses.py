"""The misses of issue 20, judged on synthetic exchanges: each check both ways.

The whole-suite proofs (a reference-target fault per requirement, both specs) are in the
fault corpus (conformance/front/proofs.py); these show each rule's edges cheaply.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support import failed, judge
from synthetic import body_exchange, chunks_for, completion_for, req, stream_exchange

from conformance.judging.checks.defaults import DEFAULT_MAX_TOKENS_TAG, default_max_tokens
from conformance.judging.checks.invariants import N_TWIN_TAG, STREAM_TWIN_TAG
from conformance.judging.checks.liveness import HEALTH_TAG
from conformance.judging.document.spec import Spec, load_spec
from conformance.judging.verdict.results import Finding
from conformance.judging.wire.case import MAY_REFUSE_TAG, Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.run.health import Health


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec("aihubmix")


# -- USAGE-PROMPT-TOKENS-N ------------------------------------------------------------------


def _n_pair(scale: int) -> tuple[Exchange, Exchange]:
    one = req(prompt="Say hi", temperature=0)
    two = req(prompt="Say hi", temperature=0, n=2, max_tokens=1, tags={N_TWIN_TAG})
    body = {**completion_for(two), "id": "cmpl-2"}
    body["usage"]["prompt_tokens"] *= scale
    body["usage"]["total_tokens"] = (
        body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )
    return body_exchange(one, completion_for(one)), body_exchange(two, body)


def test_prompt_tokens_counted_once_per_prompt_passes(spec: Spec) -> None:
    plain, n2 = _n_pair(1)
    findings = judge(spec, n2, (plain,))
    assert findings["USAGE-PROMPT-TOKENS-N"].outcome == "passed"


def test_prompt_tokens_counted_per_choice_fails_naming_it(spec: Spec) -> None:
    plain, n2 = _n_pair(2)
    findings = judge(spec, n2, (plain,))
    assert failed(findings) == {"USAGE-PROMPT-TOKENS-N"}
    assert "counted once per choice" in findings["USAGE-PROMPT-TOKENS-N"].message


def test_n_declined_with_a_4xx_is_unsupported_not_failed(spec: Spec) -> None:
    plain, n2 = _n_pair(1)
    declined = body_exchange(n2.case, {"error": {"message": "n must be 1"}}, status=400)
    finding = judge(spec, declined, (plain,))["USAGE-PROMPT-TOKENS-N"]
    assert finding.outcome == "unsupported"


# -- STREAM-USAGE-MATCHES -------------------------------------------------------------------


def _stream_pair(extra: int, words: list[str] | None = None) -> tuple[Exchange, Exchange]:
    plain = req(prompt="Say hi", temperature=0)
    usage = {"stream_options": {"include_usage": True}}
    streamed = req(prompt="Say hi", temperature=0, stream=True, **usage, tags={STREAM_TWIN_TAG})
    chunks = [{**c, "id": "cmpl-2"} for c in chunks_for(streamed, words)]
    chunks[-1]["usage"]["completion_tokens"] += extra
    chunks[-1]["usage"]["total_tokens"] += extra
    return body_exchange(plain, completion_for(plain)), stream_exchange(streamed, chunks)


def test_stream_usage_equal_to_the_twin_passes(spec: Spec) -> None:
    plain, streamed = _stream_pair(0)
    assert judge(spec, streamed, (plain,))["STREAM-USAGE-MATCHES"].outcome == "passed"


def test_stream_usage_differing_for_the_same_text_fails(spec: Spec) -> None:
    plain, streamed = _stream_pair(-1)
    findings = judge(spec, streamed, (plain,))
    assert "STREAM-USAGE-MATCHES" in failed(findings)
    assert "same text" in findings["STREAM-USAGE-MATCHES"].message


def test_stream_usage_above_max_tokens_is_stream_max_tokens_finding_alone(spec: Spec) -> None:
    """LiteLLM 1.108.7 in front of llama-cpp-python (the real-targets tier) counts a stream's
    text with its own tokenizer: 16 completion tokens for max_tokens 8, where the same text
    non-streamed counts 8. One defect: STREAM-MAX-TOKENS reports it, not this too."""
    plain, streamed = _stream_pair(20)
    findings = judge(spec, streamed, (plain,))
    assert "STREAM-MAX-TOKENS" in failed(findings)
    assert "STREAM-USAGE-MATCHES" not in failed(findings)


def test_stream_usage_of_a_different_text_is_not_compared(spec: Spec) -> None:
    """Different text is STREAM-MATCHES-NONSTREAM's finding; its count may differ with it, so
    the pair judges nothing (not a pass: it confirms no usage count, conformance.judging.
    attribution FORMED_BY)."""
    plain, streamed = _stream_pair(0, words=["Hello", " there"])
    findings = judge(spec, streamed, (plain,))
    assert "STREAM-USAGE-MATCHES" not in findings


# -- 429 answers ---------------------------------------------------------------------------


def _limited(body: object, retry_after: str | None = "1") -> Exchange:
    headers = [("content-type", "application/json"), ("x-request-id", "r1")]
    if retry_after is not None:
        headers.append(("retry-after", retry_after))
    ex = body_exchange(req(), body, status=429)
    ex.headers = Headers(headers)
    return ex


ENVELOPE = {"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate"}}


def test_429_in_the_error_envelope_passes(spec: Spec) -> None:
    findings = judge(spec, _limited(ENVELOPE))
    assert {"RATE-LIMIT-ENVELOPE", "RETRY-AFTER-FORMAT"} <= set(findings)
    assert failed(findings) == set()


def test_bare_message_429_fails_the_envelope(spec: Spec) -> None:
    findings = judge(spec, _limited({"message": "slow down"}))
    assert failed(findings) == {"RATE-LIMIT-ENVELOPE"}


@pytest.mark.parametrize("value", ["0", "120", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_well_formed_retry_after_passes(spec: Spec, value: str) -> None:
    assert failed(judge(spec, _limited(ENVELOPE, value))) == set()


@pytest.mark.parametrize("value", ["-1", "1.5", "soon", "21 Oct 2015"])
def test_malformed_retry_after_fails(spec: Spec, value: str) -> None:
    findings = judge(spec, _limited(ENVELOPE, value))
    assert failed(findings) == {"RETRY-AFTER-FORMAT"}
    assert json.dumps(value)[1:-1] in findings["RETRY-AFTER-FORMAT"].message


def test_no_retry_after_is_not_judged(spec: Spec) -> None:
    assert "RETRY-AFTER-FORMAT" not in judge(spec, _limited(ENVELOPE, None))


# -- TARGET-ALIVE and the health probe ------------------------------------------------------


def _probe_answer(status: int) -> Exchange:
    probe = req(max_tokens=1, mode="probe", tags={HEALTH_TAG})
    body = completion_for(probe) if status == 200 else {"error": {"message": "Not Found"}}
    return body_exchange(probe, body, status=status)


def test_a_live_target_answers_the_health_probe(spec: Spec) -> None:
    assert judge(spec, _probe_answer(200))["TARGET-ALIVE"].outcome == "passed"


def test_a_dead_target_is_one_finding_naming_the_requests(spec: Spec) -> None:
    """The first failure seen, then the requests in flight when it died (first started first)."""
    first = body_exchange(req(prompt="After"), {"error": {"message": "Not Found"}}, 404)
    killer = body_exchange(req(prompt=["Say hi"]), {"error": {"message": "Not Found"}}, 404)
    findings = judge(spec, _probe_answer(404), (first, killer, first))
    assert failed(findings) == {"TARGET-ALIVE"}
    message = findings["TARGET-ALIVE"].message
    seen, _, in_flight = message.partition("in flight when it died")
    assert '"After"' in seen and "answered 404" in seen
    assert in_flight.index('["Say hi"]') < in_flight.index('"After"')


def test_health_probes_only_after_answers_a_dead_target_gives() -> None:
    sent: list[Case] = []

    def send(case: Case) -> Exchange:
        sent.append(case)
        return _probe_answer(200 if len(sent) == 1 else 404)

    health = Health(send, lambda: req(max_tokens=1, mode="probe"))
    ok = body_exchange(req(), completion_for(req()))
    declined = body_exchange(req(echo=True), {"error": {"message": "no echo"}}, 400)
    invalid = body_exchange(req(mode="invalid"), {"error": {"message": "x"}}, 404)
    assert not health.unjudged(ok.case, ok, lambda: True)
    assert not health.unjudged(declined.case, declined, lambda: True)  # a decline, not a death
    assert not health.unjudged(invalid.case, invalid, lambda: True)
    assert sent == []
    first = body_exchange(req(), {"error": {"message": "boom"}}, 500)
    assert not health.unjudged(first.case, first, lambda: True)  # probed: alive
    dead = body_exchange(req(prompt=["x"]), {"error": {"message": "Not Found"}}, 404)
    assert health.unjudged(dead.case, dead, lambda: True)  # probed: down
    assert len(sent) == 2 and all(HEALTH_TAG in c.tags for c in sent)
    down = health.claim()
    # No flights known (a Health without a throttle): the first failure alone.
    assert down is not None and down.related == (dead,) and health.claim() is None
    later = body_exchange(req(), completion_for(req()))
    assert health.unjudged(later.case, later, lambda: True)  # nothing judged after the death


def test_no_probe_without_budget() -> None:
    health = Health(lambda case: pytest.fail("sent a probe"), lambda: req(max_tokens=1))
    failing = body_exchange(req(), {"error": {"message": "boom"}}, 500)
    assert not health.unjudged(failing.case, failing, lambda: False)


# -- edge token ids -------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_edges_send_a_token_id_past_the_vocabulary_and_the_largest_id(flavor: str) -> None:
    from conformance.strategies import edge_requests

    edges = {c.label: c for c in edge_requests(load_spec(flavor), model="m", vocab_size=500)}
    past = edges["a token id just past the vocabulary (500, --vocab-size)"]
    assert past.body["prompt"] == [500] and MAY_REFUSE_TAG in past.tags
    largest = [c for c in edges.values() if c.body.get("prompt") == [2**31 - 1]]
    assert len(largest) == 1 and MAY_REFUSE_TAG in largest[0].tags


def test_an_out_of_vocabulary_id_may_be_refused_but_not_with_a_5xx(spec: Spec) -> None:
    edge = replace(req(prompt=[1000], mode="edge"), tags=frozenset({MAY_REFUSE_TAG}))
    refused = body_exchange(edge, {"error": {"message": "Invalid token id"}}, status=400)
    findings = judge(spec, refused)
    assert failed(findings) == set() and findings["VALID-ACCEPTED"].outcome == "passed"
    crashed = body_exchange(edge, {"error": {"message": "index out of range"}}, status=500)
    assert "VALID-NO-5XX" in failed(judge(spec, crashed))


# -- MAX-TOKENS-DEFAULT ---------------------------------------------------------------------


def _default_answer(spec: Spec, count: int, finish: str) -> dict[str, Finding]:
    probe = req(prompt="Count", tags={DEFAULT_MAX_TOKENS_TAG})
    probe = replace(probe, body={k: v for k, v in probe.body.items() if k != "max_tokens"})
    words = ["w"] * count
    body = completion_for(replace(probe, body={**probe.body, "max_tokens": 100}), words)
    body["choices"][0]["finish_reason"] = finish
    return judge(spec, body_exchange(probe, body))


def test_the_declared_default_is_read_from_the_document() -> None:
    assert default_max_tokens(load_spec("aihubmix")) == 16
    assert default_max_tokens(load_spec("nscale")) is None


def test_an_answer_within_the_declared_default_passes(spec: Spec) -> None:
    assert _default_answer(spec, 16, "length")["MAX-TOKENS-DEFAULT"].outcome == "passed"
    assert _default_answer(spec, 5, "stop")["MAX-TOKENS-DEFAULT"].outcome == "passed"


def test_an_answer_past_the_declared_default_fails(spec: Spec) -> None:
    finding = _default_answer(spec, 24, "length")["MAX-TOKENS-DEFAULT"]
    assert finding.outcome == "failed" and "default is 16" in finding.message


def test_reaching_the_declared_default_without_length_fails(spec: Spec) -> None:
    finding = _default_answer(spec, 16, "stop")["MAX-TOKENS-DEFAULT"]
    assert finding.outcome == "failed" and 'expected "length"' in finding.message


# -- ECHO-LOGPROBS-PROMPT -------------------------------------------------------------------


def _scored(prompt: object, skip: int) -> dict[str, Finding]:
    scoring = req(prompt=prompt, echo=True, logprobs=1, max_tokens=0)
    body = completion_for(scoring if isinstance(prompt, str) else req(prompt="abc"))
    if isinstance(prompt, list):  # the synthetic answer echoes text prompts only
        body["choices"][0]["text"] = "abc"
        body["choices"][0]["logprobs"] = {
            "tokens": ["a", "b", "c"],
            "token_logprobs": [None, -1.0, -1.0],
            "top_logprobs": [None, {"b": -1.0}, {"c": -1.0}],
            "text_offset": [0, 1, 2],
        }
    lp = body["choices"][0]["logprobs"]
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        lp[key] = lp[key][skip:]
    return judge(load_spec("aihubmix"), body_exchange(scoring, body))


def test_echo_logprobs_covering_the_prompt_pass() -> None:
    assert _scored("Say hi", 0)["ECHO-LOGPROBS-PROMPT"].outcome == "passed"
    assert _scored([5, 6, 7], 0)["ECHO-LOGPROBS-PROMPT"].outcome == "passed"


def test_echo_logprobs_skipping_the_prompt_fail() -> None:
    finding = _scored("Say hi", 1)["ECHO-LOGPROBS-PROMPT"]  # max_tokens 0: nothing left
    assert finding.outcome == "failed" and "tokens is empty" in finding.message
    echo = req(prompt="Say hi", echo=True, logprobs=1, max_tokens=2)
    body = completion_for(echo)
    lp = body["choices"][0]["logprobs"]
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        lp[key] = lp[key][1:]
    finding = judge(load_spec("aihubmix"), body_exchange(echo, body))["ECHO-LOGPROBS-PROMPT"]
    assert finding.outcome == "failed" and "cover only the generated text" in finding.message
    finding = _scored([5, 6, 7], 1)["ECHO-LOGPROBS-PROMPT"]
    assert finding.outcome == "failed" and "3 token ids" in finding.message
