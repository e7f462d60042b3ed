"""Judge-level proofs with synthetic exchanges: contracts, both-sided quantities, legal
variations that must pass, and one defect giving one finding.

Each test builds the Exchange directly (tests/synthetic.py), so it needs no server; the
reference target's faults for the same behaviours are listed in the checks report.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support import failed, judge, must_failures
from synthetic import body_exchange, chunks_for, completion_for, req, stream_exchange

from conformance.judging.checks import load_checks
from conformance.judging.checks.errors import unknown_model_probe
from conformance.judging.document.contract import Contract, binds
from conformance.judging.document.spec import load_spec
from conformance.judging.requirements import (
    EVIDENCE,
    MUST_EVIDENCE,
    REGISTRY,
    Context,
    Level,
    Violation,
    requirement,
)
from conformance.judging.wire.exchange import Exchange

load_checks()
AIHUBMIX, NSCALE = load_spec("aihubmix"), load_spec("nscale")
#: Nscale judged by the document alone (--contract document): the levels before contracts.
NSCALE_ALONE = load_spec("nscale", contract=Contract.DOCUMENT)
USAGE = {"stream_options": {"include_usage": True}}


def body_findings(case: Any, body: Any, spec: Any = AIHUBMIX, **kw: Any) -> dict[str, Any]:
    return judge(spec, body_exchange(case, body, **kw))


# -- contracts ---------------------------------------------------------------------------


def test_violation_carries_path_expected_actual() -> None:
    exc = Violation("bad", path="choices[1].text", expected="a", actual="b")
    assert (str(exc), exc.path, exc.expected, exc.actual) == ("bad", "choices[1].text", "a", "b")
    assert Violation("plain").path is None


def test_every_requirement_names_its_evidence_and_level_follows_it() -> None:
    for rid, r in REGISTRY.items():
        assert r.evidence in EVIDENCE, rid
        if r.level is Level.MUST:
            assert r.evidence in MUST_EVIDENCE, rid
        if r.evidence == "server-habit":
            assert r.level is not Level.MUST, rid


def test_a_server_habit_cannot_be_registered_as_must() -> None:
    with pytest.raises(ValueError, match="MUST needs"):
        requirement(
            "X-HABIT",
            level=Level.MUST,
            area="schema",
            statement="s",
            source="s",
            evidence="server-habit",
        )


def test_scope_names_why_a_requirement_cannot_apply() -> None:
    spec = load_spec("nscale")
    assert REGISTRY["AUTH-REQUIRED"].not_applicable(spec) is None
    spec.bearer_auth = False
    assert "bearer" in (REGISTRY["AUTH-REQUIRED"].not_applicable(spec) or "")
    assert REGISTRY["RESP-HEADERS-REQUIRED"].not_applicable(AIHUBMIX) is not None
    assert REGISTRY["RESP-HEADERS-REQUIRED"].not_applicable(NSCALE) is None


def test_views_are_cached_on_the_exchange_not_in_a_module() -> None:
    exchange = stream_exchange(req(stream=True), chunks_for(req(stream=True)))
    calls: list[Exchange] = []
    build = lambda ex: calls.append(ex) or len(calls)  # noqa: E731
    assert exchange.view("k", build) == exchange.view("k", build) == 1
    other = stream_exchange(req(stream=True), chunks_for(req(stream=True)))
    assert other.view("k", build) == 2


def test_created_is_judged_against_the_context_clock() -> None:
    exchange = body_exchange(req(), completion_for(req()))
    long_ago = Context(exchange.case, exchange, AIHUBMIX, now=1_600_000_000.0)
    with pytest.raises(Violation, match="plausible"):
        REGISTRY["RESP-CREATED"].check(long_ago)


# -- robustness: the cases issue 12 names ------------------------------------------------


def test_null_in_text_offset_is_a_finding_not_a_crash() -> None:
    case = req(logprobs=1)
    body = completion_for(case)
    body["choices"][0]["logprobs"]["text_offset"][1] = None
    findings = body_findings(case, body)
    assert "LOGPROBS-OFFSETS" in failed(findings)


def test_list_shaped_top_logprobs_entry_is_a_finding_not_a_crash() -> None:
    case = req(logprobs=1)
    body = completion_for(case)
    body["choices"][0]["logprobs"]["top_logprobs"][0] = [["Hello", -0.1]]
    assert "LOGPROBS-TOP-COUNT" in failed(body_findings(case, body))


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant: str) -> None:
    raw = completion_for(req(logprobs=1))
    text = body_exchange(req(logprobs=1), raw).body.decode()
    bad = text.replace("-0.1", constant, 1).encode()
    findings = judge(AIHUBMIX, body_exchange(req(logprobs=1), None, raw=bad))
    assert failed(findings) == {"RESP-SCHEMA"}
    assert "not a JSON number" in findings["RESP-SCHEMA"].message
    chunks: list[Any] = chunks_for(req(stream=True, logprobs=1))
    chunks[0] = body_exchange(req(), chunks[0]).body.decode().replace("-0.1", constant, 1)
    stream = judge(AIHUBMIX, stream_exchange(req(stream=True, logprobs=1), chunks))
    assert "STREAM-CHUNK-SCHEMA" in failed(stream)
    error = b'{"error": {"message": "x", "type": "t", "param": null, "code": NaN}}'
    errs = judge(AIHUBMIX, body_exchange(req(mode="invalid"), None, status=400, raw=error))
    assert failed(errs) == {"ERROR-ENVELOPE"}


# -- legal variations (no false alarm) ---------------------------------------------------


def test_created_may_differ_between_chunks() -> None:
    case = req(stream=True, n=2, **USAGE)
    chunks = chunks_for(case)
    for i, chunk in enumerate(chunks):
        chunk["created"] += i  # llama.cpp stamps each chunk with its own clock
    assert failed(judge(AIHUBMIX, stream_exchange(case, chunks))) == set()
    chunks[1]["created"] *= 1000
    findings = judge(AIHUBMIX, stream_exchange(case, chunks))
    assert failed(findings) == {"STREAM-CONSISTENT-IDS"}
    assert "milliseconds" in findings["STREAM-CONSISTENT-IDS"].message


def test_error_null_in_a_chunk_is_not_an_error_event() -> None:
    case = req(stream=True)
    chunks = [{**c, "error": None} for c in chunks_for(case)]
    assert failed(judge(AIHUBMIX, stream_exchange(case, chunks))) == set()
    chunks[0]["error"] = {"message": "upstream failed"}
    assert "STREAM-ERROR-EVENT" in failed(judge(AIHUBMIX, stream_exchange(case, chunks)))


ENVELOPE = (
    b'{"error": {"message": "no such model", "type": "invalid_request_error", '
    b'"param": null, "code": "model_not_found"}}'
)


@pytest.mark.parametrize(
    ("status", "must", "should"),
    [
        (404, set(), set()),
        (400, set(), {"MODEL-NOT-FOUND-404"}),  # LiteLLM's answer: legal, a SHOULD
        (200, {"MODEL-NOT-FOUND"}, set()),
        (500, {"MODEL-NOT-FOUND"}, set()),
    ],
)
def test_unknown_model_needs_a_declared_4xx_and_404_is_a_habit(
    status: int, must: set[str], should: set[str]
) -> None:
    body = ENVELOPE if status != 200 else body_exchange(req(), completion_for(req())).body
    exchange = body_exchange(unknown_model_probe(), None, status=status, raw=body)
    findings = judge(AIHUBMIX, exchange)
    assert must_failures(findings) == must
    assert failed(findings) - must == should


def test_end_of_text_token_at_max_tokens_with_stop_is_legal() -> None:
    case = req(stream=True, logprobs=1, max_tokens=4, **USAGE)
    body = completion_for(req(logprobs=1, max_tokens=4), words=["Hello", " world", " and", "</s>"])
    choice = body["choices"][0]
    choice["text"], choice["finish_reason"] = "Hello world and", "stop"
    assert failed(body_findings(req(logprobs=1, max_tokens=4), body)) == set()
    chunks = chunks_for(case, words=["Hello", " world", " and", "<|endoftext|>"])
    chunks[0]["choices"][0]["text"] = "Hello world and"
    chunks[0]["choices"][0]["finish_reason"] = "stop"
    assert failed(judge(AIHUBMIX, stream_exchange(case, chunks))) == set()


def test_stop_at_max_tokens_measured_by_usage_alone_is_legal() -> None:
    # llama-server counts the end-of-text token it sampled (recorded: transcripts
    # llama.cpp/eot-by-logit-bias-stop-at-max-tokens-no-logprobs); without logprobs the
    # usage count cannot show that token, so "stop" there is not judged.
    case = req(max_tokens=4)
    body = completion_for(case)
    assert body["usage"]["completion_tokens"] == 4
    body["choices"][0]["finish_reason"] = "stop"
    assert failed(body_findings(case, body)) == set()
    body["choices"][0]["finish_reason"] = "content_filter"
    assert failed(body_findings(case, body)) == {"FINISH-LENGTH"}


def test_unrequested_stream_usage_is_no_count_for_the_finish() -> None:
    # LiteLLM's zeroed usage on every chunk, include_usage not asked (recorded: transcripts
    # litellm/stream-forward-length-by-placeholder-usage): "length" is not judged by it.
    case = req(stream=True, max_tokens=4)
    chunks = chunks_for(case)
    for chunk in chunks:  # four tokens that render as no text (lone UTF-8 bytes)
        chunk["usage"] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for choice in chunk["choices"]:
            choice["text"] = ""
    chunks[-1]["choices"][0]["finish_reason"] = "length"
    findings = judge(AIHUBMIX, stream_exchange(case, chunks))
    assert "STREAM-USAGE-UNREQUESTED" in failed(findings)
    assert "STREAM-FINISH-LENGTH" not in failed(findings)


# -- both sides of each quantity ---------------------------------------------------------


def test_prompt_tokens_plausible_for_the_prompt() -> None:
    body = completion_for(req())
    body["usage"].update(prompt_tokens=0, total_tokens=body["usage"]["completion_tokens"])
    findings = body_findings(req(), body)
    assert failed(findings) == {"USAGE-PROMPT-TOKENS"}
    assert findings["USAGE-PROMPT-TOKENS"].message.startswith("prompt_tokens is 0")
    token_prompt = req(prompt=[5, 6, 7, 8, 9])
    short = completion_for(token_prompt)
    short["usage"].update(prompt_tokens=2, total_tokens=2 + short["usage"]["completion_tokens"])
    assert failed(body_findings(token_prompt, short)) == {"USAGE-PROMPT-TOKENS"}
    huge = completion_for(req())
    huge["usage"].update(
        prompt_tokens=10_000, total_tokens=10_000 + huge["usage"]["completion_tokens"]
    )
    assert failed(body_findings(req(), huge)) == {"USAGE-PROMPT-TOKENS"}


def test_prompt_tokens_counted_the_same_streamed_and_not() -> None:
    plain = req()
    twin = body_exchange(plain, completion_for(plain))
    streamed = req(stream=True, tags={"probe:stream-twin"}, **USAGE)
    chunks = chunks_for(streamed)
    assert failed(judge(AIHUBMIX, stream_exchange(streamed, chunks), (twin,))) == set()
    chunks[-1]["usage"]["prompt_tokens"] += 1
    chunks[-1]["usage"]["total_tokens"] += 1
    findings = judge(AIHUBMIX, stream_exchange(streamed, chunks), (twin,))
    assert failed(findings) == {"USAGE-PROMPT-TOKENS"}
    assert "non-streamed" in findings["USAGE-PROMPT-TOKENS"].message


def test_completion_tokens_at_least_what_the_choices_show() -> None:
    case = req(logprobs=1, n=2)
    body = completion_for(case)
    body["usage"].update(completion_tokens=5, total_tokens=body["usage"]["prompt_tokens"] + 5)
    findings = body_findings(case, body)
    assert failed(findings) == {"USAGE-COMPLETION-TOKENS"}
    assert "at least 8" in findings["USAGE-COMPLETION-TOKENS"].message
    streamed = req(stream=True, **USAGE)
    chunks = chunks_for(streamed)
    chunks[-1]["usage"].update(
        completion_tokens=0, total_tokens=chunks[-1]["usage"]["prompt_tokens"]
    )
    assert failed(judge(AIHUBMIX, stream_exchange(streamed, chunks))) == {"USAGE-COMPLETION-TOKENS"}


@pytest.mark.parametrize("stream", [False, True])
def test_length_only_when_max_tokens_was_reached(stream: bool) -> None:
    case = req(logprobs=1, max_tokens=6, stream=stream)
    rid = "STREAM-FINISH-LENGTH" if stream else "FINISH-LENGTH"
    payload = chunks_for(case) if stream else completion_for(case)
    choice = payload[0]["choices"][0] if stream else payload["choices"][0]
    assert choice["finish_reason"] == "stop"  # 4 words, max_tokens 6
    choice["finish_reason"] = "length"
    exchange = stream_exchange(case, payload) if stream else body_exchange(case, payload)
    findings = judge(AIHUBMIX, exchange)
    assert failed(findings) == {rid}
    assert "below max_tokens=6" in findings[rid].message


def test_length_below_max_tokens_measured_by_usage_of_one_choice() -> None:
    case = req(max_tokens=6)
    body = completion_for(case)
    body["choices"][0]["finish_reason"] = "length"
    assert failed(body_findings(case, body)) == {"FINISH-LENGTH"}


def test_fewer_alternatives_than_asked_is_a_should_not_a_must() -> None:
    # No document supports "at least logprobs entries" as a MUST: candidates that
    # detokenize alike share one key, and OpenAI documents that fewer may come back.
    case = req(logprobs=3)
    body = completion_for(case)
    body["choices"][0]["logprobs"]["top_logprobs"][2] = {"x": -0.5}
    findings = body_findings(case, body)
    assert failed(findings) == {"LOGPROBS-TOP-FULL"}
    assert must_failures(findings) == set()
    assert "asks for the 3 most likely" in findings["LOGPROBS-TOP-FULL"].message
    assert REGISTRY["LOGPROBS-TOP-FULL"].level is Level.SHOULD
    streamed = req(stream=True, logprobs=3)
    chunks = chunks_for(streamed)
    chunks[0]["choices"][0]["logprobs"]["top_logprobs"][1] = {"x": -0.5}
    stream_failed = failed(judge(AIHUBMIX, stream_exchange(streamed, chunks)))
    assert stream_failed == {"STREAM-LOGPROBS-TOP-FULL"}


@pytest.mark.parametrize(
    ("counts", "fails"),
    [
        ((2, 3, 3), False),  # one short at one position: two candidates may share a key
        ((3, 2, 2), False),  # one short here and there, not at every position
        ((2, 2, 2), True),  # one short at every position: no collision recurs at each
        ((3, 1, 3), True),  # two short: one collision costs one key
        ((3, 0, 3), True),  # an empty position is no collision
    ],
)
def test_a_shortfall_a_collision_can_explain_is_let_through(
    counts: tuple[int, ...], fails: bool
) -> None:
    case = req(logprobs=3, max_tokens=3)
    body = completion_for(case)
    tops = body["choices"][0]["logprobs"]["top_logprobs"]
    assert len(tops) == len(counts)
    for j, count in enumerate(counts):
        tops[j] = {f"t{i}": -1.0 - i for i in range(count)}
    findings = body_findings(case, body)
    assert failed(findings) == ({"LOGPROBS-TOP-FULL"} if fails else set())
    if fails:
        assert "asks for the 3 most likely" in findings["LOGPROBS-TOP-FULL"].message


def test_stream_logprobs_rules_are_one_requirement_each() -> None:
    # Formerly STREAM-LOGPROBS: five rules under one MUST. Each now has its own ID, level
    # and evidence, the same as its body twin's.
    rules = ("PRESENCE", "SHAPE", "VALUES", "TOP-COUNT", "TOP-FULL", "OFFSETS")
    assert "STREAM-LOGPROBS" not in REGISTRY
    for rule in rules:
        body, stream = REGISTRY[f"LOGPROBS-{rule}"], REGISTRY[f"STREAM-LOGPROBS-{rule}"]
        for spec in (AIHUBMIX, NSCALE):
            one, two = body.under(spec), stream.under(spec)
            assert (one.level, one.evidence) == (two.level, two.evidence), rule


def test_text_offset_rules_apply_to_streams() -> None:
    case = req(stream=True, logprobs=1)
    chunks = chunks_for(case)
    chunks[0]["choices"][0]["logprobs"]["text_offset"][2] = 0
    findings = judge(AIHUBMIX, stream_exchange(case, chunks))
    assert failed(findings) == {"STREAM-LOGPROBS-OFFSETS"}
    assert "decreases" in findings["STREAM-LOGPROBS-OFFSETS"].message


def test_with_echo_offsets_describe_the_returned_text() -> None:
    case = req(logprobs=1, echo=True)
    body = completion_for(case)
    body["choices"][0]["logprobs"]["text_offset"][-1] = 500
    findings = body_findings(case, body)
    assert failed(findings) == {"LOGPROBS-OFFSETS"}
    assert "past the end of the returned text" in findings["LOGPROBS-OFFSETS"].message


@pytest.mark.parametrize("echo", [False, True])
def test_max_tokens_zero_returns_nothing_generated(echo: bool) -> None:
    case = req(max_tokens=0, echo=echo)
    body = completion_for(case)
    assert failed(body_findings(case, body)) == set()
    assert body["choices"][0]["text"] == ("Say hi" if echo else "")


# -- one defect, one finding -------------------------------------------------------------


def _ignoring_max_tokens(case: Any) -> Any:
    """What a server that ignores max_tokens answers: 42 tokens, finish "length"."""
    words = [f" w{i}" for i in range(42)]
    unlimited = req(**{**case.body, "max_tokens": 100})
    if case.stream:
        return chunks_for(unlimited, words=words)
    return completion_for(unlimited, words=words)


@pytest.mark.parametrize("echo", [False, True])
@pytest.mark.parametrize("logprobs", [None, 1])
@pytest.mark.parametrize("reason", ["length", "stop"])
def test_ignored_max_tokens_zero_is_one_finding(
    echo: bool, logprobs: int | None, reason: str
) -> None:
    extra = {"logprobs": logprobs} if logprobs else {}
    case = req(max_tokens=0, echo=echo, **extra)
    body = _ignoring_max_tokens(case)
    for choice in body["choices"]:
        choice["finish_reason"] = reason
    findings = body_findings(case, body)
    assert failed(findings) == {"USAGE-MAX-TOKENS"}
    streamed = req(max_tokens=0, echo=echo, stream=True, **extra, **USAGE)
    chunks = _ignoring_max_tokens(streamed)
    assert failed(judge(AIHUBMIX, stream_exchange(streamed, chunks))) == {"STREAM-MAX-TOKENS"}


def test_a_500_on_malformed_json_is_one_finding() -> None:
    case = req(mode="invalid")
    html = b"<html><body>Internal Server Error</body></html>"
    exchange = body_exchange(case, None, status=500, raw=html)
    exchange.headers.items = [("content-type", "text/html")]
    for spec in (AIHUBMIX, NSCALE):
        assert must_failures(judge(spec, exchange)) == {"INVALID-REJECTED"}


def test_a_500_on_a_valid_request_is_one_finding() -> None:
    exchange = body_exchange(req(), None, status=500, raw=b"oops")
    exchange.headers.items = [("content-type", "text/plain")]
    for spec in (AIHUBMIX, NSCALE):
        assert must_failures(judge(spec, exchange)) == {"VALID-NO-5XX"}


def test_finish_outside_the_enum_is_not_also_a_wrong_length_finish() -> None:
    case = req(max_tokens=4)
    body = copy.deepcopy(completion_for(case))
    body["choices"][0]["finish_reason"] = "eos_token"
    # Nor a schema finding: the enum violation is FINISH-ENUM's alone (one defect, one finding).
    assert must_failures(body_findings(case, body)) == {"FINISH-ENUM"}


@pytest.mark.parametrize(
    ("kind", "rid"),
    [("prompt", "USAGE-PROMPT-TOKENS"), ("completion", "USAGE-COMPLETION-TOKENS")],
)
def test_usage_breakdown_cannot_exceed_its_total(kind: str, rid: str) -> None:
    body = completion_for(req())
    key = "cached_tokens" if kind == "prompt" else "reasoning_tokens"
    body["usage"][f"{kind}_tokens_details"] = {key: 0}
    assert failed(body_findings(req(), body)) == set()
    body["usage"][f"{kind}_tokens_details"] = {key: 1000}
    findings = body_findings(req(), body)
    assert failed(findings) == {rid}
    assert "cannot exceed its total" in findings[rid].message


# -- levels per (requirement, document) --------------------------------------------------

#: Spec-text requirements another branch owns (HTTP-STATUS-DECLARED's and MODEL-NOT-FOUND's
#: evidence is being reworked there), and one whose scope already asks the document.
TEXT_ELSEWHERE = {"REQUEST-ID-HEADER"}


def test_every_spec_text_requirement_says_where_the_document_states_it() -> None:
    loose = {
        rid
        for rid, r in REGISTRY.items()
        if r.evidence == "spec-text" and r.stated is None and rid not in TEXT_ELSEWHERE
    }
    assert loose == set()
    for rid, r in REGISTRY.items():
        if r.stated is not None:
            assert r.stated(AIHUBMIX), f"{rid}: the AIHubMix text it cites is not found"


def test_nscale_has_no_field_descriptions_so_nothing_rests_on_its_text() -> None:
    # The Nscale document describes no field: a requirement that applies there rests on
    # its schema, a client that breaks, or the OpenAI contract. That contract binds as a
    # MUST only for a field Nscale declares, and only under --contract openai-compatible.
    on_text = {
        rid
        for rid, r in REGISTRY.items()
        if r.under(NSCALE).evidence == "spec-text" and r.not_applicable(NSCALE) is None
    }
    assert on_text <= TEXT_ELSEWHERE
    bound = 0
    for rid, r in REGISTRY.items():
        judged, alone = r.under(NSCALE), r.under(NSCALE_ALONE)
        if alone.level is Level.MUST:
            assert alone.evidence in MUST_EVIDENCE, rid
        if alone.evidence in ("openai-contract", "server-habit"):
            assert alone.level is not Level.MUST, rid
        if judged.level is Level.MUST and judged.evidence not in MUST_EVIDENCE:
            assert judged.evidence == "openai-contract" and binds(NSCALE, r.field), rid
            assert "declares" in judged.why_level, rid
            bound += 1
        if judged.evidence == "server-habit":
            assert judged.level is not Level.MUST, rid
    assert bound >= 15  # max_tokens, stop, echo, usage, created, id, ... (issue 25)


@pytest.mark.parametrize(
    ("rid", "nscale", "alone"),
    [
        # Nscale declares the field under OpenAI's name: OpenAI's meaning binds.
        ("USAGE-TOTAL", ("MUST", "openai-contract"), "SHOULD"),
        ("FINISH-LENGTH", ("MUST", "openai-contract"), "SHOULD"),
        ("STOP-ABSENT", ("MUST", "openai-contract"), "SHOULD"),
        ("USAGE-MAX-TOKENS", ("MUST", "openai-contract"), "SHOULD"),
        ("ECHO-PREFIX", ("MUST", "openai-contract"), "SHOULD"),
        # Nscale types `object` as any string (no enum to cite); OpenAI's says which one.
        ("RESP-OBJECT", ("MUST", "openai-contract"), "SHOULD"),
        # A client breaks: the MUST stays, on that evidence, under either contract.
        ("LOGPROBS-PRESENCE", ("MUST", "client-visible"), "MUST"),
        ("STREAM-DONE", ("MUST", "client-visible"), "MUST"),
        ("CHOICES-COUNT", ("MUST", "client-visible"), "MUST"),
    ],
)
def test_level_follows_the_evidence_of_the_document_judged(
    rid: str, nscale: tuple[str, str], alone: str
) -> None:
    registered = REGISTRY[rid]
    assert registered.under(AIHUBMIX) == registered
    assert registered.level is Level.MUST
    judged = registered.under(NSCALE)
    assert (judged.level.value, judged.evidence) == nscale
    assert registered.under(NSCALE_ALONE).level.value == alone
    assert registered.under(NSCALE_ALONE).evidence == nscale[1]


def test_a_field_the_document_does_not_declare_binds_nothing() -> None:
    # The contract binds OpenAI's meaning of a field the document declares, with a type
    # OpenAI's value could take: without `echo`, or with `echo` typed as an object, the
    # echo requirements rest on the OpenAI contract alone (SHOULD).
    import copy as _copy

    from conformance.judging.document.spec import Spec

    def nscale_with(echo: dict[str, Any] | None) -> Spec:
        document = _copy.deepcopy(NSCALE.document)
        props = document["components"]["schemas"]["CompletionRequestBody"]["properties"]
        if echo is None:
            del props["echo"]
        else:
            props["echo"] = echo
        return Spec(name="nscale-variant", path=NSCALE.path, document=document)

    for variant in (nscale_with(None), nscale_with({"type": "object"})):
        judged = REGISTRY["ECHO-PREFIX"].under(variant)
        assert (judged.level, judged.evidence) == (Level.SHOULD, "openai-contract")
        assert "does not declare `echo`" in judged.why_level
    assert REGISTRY["ECHO-PREFIX"].under(nscale_with({"type": "boolean"})).level is Level.MUST


def test_a_stated_requirement_names_its_other_evidence() -> None:
    with pytest.raises(ValueError, match="go together"):
        requirement(
            "X-HALF",
            level=Level.MUST,
            area="schema",
            statement="s",
            source="s",
            evidence="spec-text",
            stated=lambda spec: True,
        )


def test_the_run_and_its_verdict_use_the_level_under_the_spec_judged() -> None:
    from conformance.judging.verdict.decision import coverage, decide
    from conformance.judging.verdict.results import Results
    from conformance.run.session import Settings, record_of

    def nscale_run(spec: Any) -> tuple[Any, Any]:
        results = Results.for_requirements([r.under(spec) for r in REGISTRY.values()])
        results.tallies["USAGE-TOTAL"].failed = results.tallies["USAGE-TOTAL"].checked = 1
        return results, record_of(spec, Settings())

    # By the document alone: untested SHOULDs under Nscale are not a coverage gap; a
    # failed one does not decide.
    results, record = nscale_run(NSCALE_ALONE)
    assert results.tallies["USAGE-TOTAL"].level == "SHOULD"
    assert results.tallies["USAGE-TOTAL"].evidence == "openai-contract"
    untested = {u.id for u in coverage(results, record).untested}
    assert "USAGE-TOTAL" not in untested and "STREAM-USAGE" not in untested
    assert "STREAM-DONE" in untested
    assert "USAGE-TOTAL" not in decide(results, record).reasons[0]
    assert record.contract == "document"
    # OpenAI-compatible (the default): Nscale declares usage, so the failure decides.
    results, record = nscale_run(NSCALE)
    assert results.tallies["USAGE-TOTAL"].level == "MUST"
    assert "declares `total_tokens`" in results.tallies["USAGE-TOTAL"].why_level
    assert "STREAM-USAGE" in {u.id for u in coverage(results, record).untested}
    assert decide(results, record).word == "failed"
    assert "USAGE-TOTAL" in decide(results, record).reasons[0]
    assert record.contract == "openai-compatible"


# -- declared defaults are promises ------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_applying_nscales_declared_logprobs_default_passes(stream: bool) -> None:
    # Nscale declares `logprobs: default: 0`: a request that omits logprobs may be served
    # with the sampled tokens' logprobs. AIHubMix declares `default: null`: there the same
    # answer returns logprobs nobody asked for.
    applied, omitted = req(logprobs=1, stream=stream), req(stream=stream)
    if stream:
        exchange = stream_exchange(omitted, chunks_for(applied))
    else:
        exchange = body_exchange(omitted, completion_for(applied))
    assert failed(judge(NSCALE, exchange)) == set()
    wrong = "STREAM-LOGPROBS-PRESENCE" if stream else "LOGPROBS-PRESENCE"
    assert failed(judge(AIHUBMIX, exchange)) == {wrong}


def test_the_declared_default_bounds_top_logprobs_when_applied() -> None:
    # Applied, the default 0 allows the sampled token alone at each position.
    body = completion_for(req(logprobs=3))
    findings = judge(NSCALE, body_exchange(req(), body))
    assert failed(findings) == {"LOGPROBS-TOP-COUNT"}
    assert "at most 1" in findings["LOGPROBS-TOP-COUNT"].message


# -- attribution: one defect, one finding ------------------------------------------------


@pytest.mark.parametrize("spec", [AIHUBMIX, NSCALE], ids=["aihubmix", "nscale"])
def test_a_wrong_object_in_stream_chunks_is_one_finding(spec: Any) -> None:
    # As in a body (RESP-OBJECT, not also RESP-SCHEMA): the chunk schema leaves `object`
    # to STREAM-CONSISTENT-IDS.
    case = req(stream=True)
    chunks = chunks_for(case)
    for chunk in chunks:
        chunk["object"] = "text_completion.chunk"
    findings = judge(spec, stream_exchange(case, chunks))
    assert failed(findings) == {"STREAM-CONSISTENT-IDS"}
    assert "text_completion.chunk" in findings["STREAM-CONSISTENT-IDS"].message


def test_tokens_rendered_as_u_fffd_fragments_spell_the_whole_character() -> None:
    # FastChat 0.2.36 (the real-targets tier): the two byte tokens of U+0350 are listed as
    # "\ufffd" each, the text shows the character; vLLM renders fragments the same way.
    case = req(logprobs=1, max_tokens=4)
    body = completion_for(case)
    choice = body["choices"][0]
    choice["text"] = "ab\u0350c"
    lp = choice["logprobs"]
    lp["tokens"] = ["ab", "\ufffd", "\ufffd", "c"]
    lp["token_logprobs"] = [-1.0] * 4
    lp["top_logprobs"] = [{t: -1.0} for t in lp["tokens"]]
    lp["text_offset"] = [0, 2, 2, 3]
    body["usage"]["completion_tokens"] = 4
    body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"] + 4
    body["choices"][0]["finish_reason"] = "length"
    assert "LOGPROBS-TOKENS-TEXT" not in failed(body_findings(case, body))
    choice["text"] = "ab\u0350d"  # the visible token does not match: still a finding
    assert "LOGPROBS-TOKENS-TEXT" in failed(body_findings(case, body))
