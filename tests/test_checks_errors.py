"""The error, auth and request-id requirements proven both ways against the reference target.

Each row names a fault, the probes that exercise it and the requirements that must fail
with it on: exactly those (no unrelated MUST failure), while the same probes on the
conformant target of both flavors fail nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support import API_KEY, MODEL, Targets, case, failed, judge, meta_of
from synthetic import body_exchange, req

from conformance.judging.checks import load_checks
from conformance.judging.checks.errors import (
    AUTH_PROBES,
    auth_probes,
    bad_request_probes,
    unknown_model_probe,
)
from conformance.judging.document.spec import Spec, load_spec
from conformance.judging.requirements import REGISTRY, Level
from conformance.judging.verdict.results import Results
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.run.client import Client, Limits, RetryPolicy
from conformance.run.engine import Run, status_summary
from conformance.run.session import Settings

FLAVORS = ("aihubmix", "nscale")
ROOT = Path(__file__).resolve().parents[1]
Probes = Callable[[Spec], list[Case]]


def errors(spec: Spec) -> list[Case]:
    """Every cheap error probe: 400s, 401s, the 404."""
    return [*bad_request_probes(spec, MODEL), unknown_model_probe(), *auth_probes(MODEL)]


def bad_requests(spec: Spec) -> list[Case]:
    return bad_request_probes(spec, MODEL)


def auth(spec: Spec) -> list[Case]:
    return auth_probes(MODEL)


def no_credentials(spec: Spec) -> list[Case]:
    return [c for c in auth_probes(MODEL) if c.auth == "none"]


def unknown_model(spec: Spec) -> list[Case]:
    return [unknown_model_probe()]


def valid(spec: Spec) -> list[Case]:
    return [case()]


# (fault, probes, requirements failing on every probe, flavors)
ROWS: list[tuple[str, Probes, set[str], tuple[str, ...]]] = [
    ("errors-422", bad_requests, {"HTTP-4XX-DECLARED"}, FLAVORS),
    ("errors-fastapi", errors, {"ERROR-ENVELOPE"}, FLAVORS),
    ("errors-string", errors, {"ERROR-ENVELOPE"}, FLAVORS),
    # LiteLLM's str(None): "param": "None" where the envelope's param is nullable (issue 25).
    ("errors-stringified-nulls", auth, {"ERROR-ENVELOPE"}, FLAVORS),
    ("errors-text-plain", errors, {"ERROR-CONTENT-TYPE"}, FLAVORS),
    ("auth-ignored", auth, {"AUTH-REQUIRED"}, FLAVORS),
    ("auth-missing-400", no_credentials, {"AUTH-REQUIRED"}, FLAVORS),
    # One defect, one finding: INVALID-REJECTED leaves the unknown model to MODEL-NOT-FOUND.
    ("unknown-model-200", unknown_model, {"MODEL-NOT-FOUND"}, FLAVORS),
    ("missing-request-id-header", errors, {"REQUEST-ID-HEADER"}, ("aihubmix",)),
    ("missing-request-id-header", valid, {"REQUEST-ID-HEADER"}, ("aihubmix",)),
    ("missing-request-id-header", valid, {"RESP-HEADERS-REQUIRED"}, ("nscale",)),
]

# Words each requirement's message must use, so that it names the problem.
MESSAGES = {
    "HTTP-4XX-DECLARED": "status 422 is not among the spec's declared 4xx",
    "ERROR-ENVELOPE": "error envelope",
    "ERROR-CONTENT-TYPE": "text/plain",
    "AUTH-REQUIRED": "expected 401",
    "MODEL-NOT-FOUND": "was served",
    "INVALID-REJECTED": "answered 200",
    "REQUEST-ID-HEADER": "no X-Request-Id header",
    "RESP-HEADERS-REQUIRED": "INFERENCE-ID",
}


@pytest.mark.parametrize(
    ("fault", "probes", "expected", "flavor"),
    [(f, p, e, fl) for f, p, e, fls in ROWS for fl in fls],
    ids=[f"{f}-{p.__name__}-{fl}" for f, p, _, fls in ROWS for fl in fls],
)
def test_requirement_fails_on_its_fault_only(
    targets: Targets, fault: str, probes: Probes, expected: set[str], flavor: str
) -> None:
    good, bad = targets.get(flavor), targets.get(flavor, fault)
    for probe in probes(good.spec):
        assert failed(good.judge(probe)) == set(), f"conformant target fails {probe.label}"
        findings = bad.judge(probe)
        assert failed(findings) == expected, probe.label
        for rid in expected:
            assert MESSAGES[rid] in findings[rid].message, findings[rid].message


@pytest.mark.parametrize("flavor", FLAVORS)
def test_error_probes_get_their_documented_status(targets: Targets, flavor: str) -> None:
    target = targets.get(flavor)
    statuses = {probe.label: target.send(probe).status for probe in errors(target.spec)}
    assert statuses == {
        "400 probe: body is not JSON": 400,
        "400 probe: max_tokens is a string": 400,
        "unknown model": 404,
        **{f"auth probe: {words}": 401 for words in AUTH_PROBES.values()},
    }


@pytest.mark.parametrize("flavor", FLAVORS)
def test_auth_probes_are_not_judged_as_valid_or_invalid_requests(
    targets: Targets, flavor: str
) -> None:
    """The request-aware requirements judge requests sent with the run's credentials only."""
    for probe in auth_probes(MODEL):
        findings = targets.get(flavor, "auth-ignored").judge(probe)
        assert {"INVALID-REJECTED", "VALID-ACCEPTED", "VALID-NO-5XX"}.isdisjoint(findings)
        assert findings["AUTH-REQUIRED"].message.startswith(f"a request {AUTH_PROBES[probe.auth]}")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_server_error_fails_and_is_never_retried(targets: Targets, flavor: str) -> None:
    """Every fifth request answers 500: it fails VALID-NO-5XX and only that, unretried."""
    target = targets.get(flavor, "server-error-500")
    before = target.client.retries
    exchanges = [target.send(case(max_tokens=1)) for _ in range(5)]
    errors_500 = [ex for ex in exchanges if ex.status == 500]
    assert len(errors_500) == 1
    assert [ex.retries for ex in exchanges] == [0] * 5 and target.client.retries == before
    findings = judge(target.spec, errors_500[0])
    assert failed(findings) == {"VALID-NO-5XX"}
    assert "answered 500" in findings["VALID-NO-5XX"].message


def test_rate_limit_retries_are_counted_in_results(targets: Targets) -> None:
    """429 + Retry-After: 0 on every third request is waited out and every retry counted."""
    target = targets.get("aihubmix", "rate-limit-every-third")
    run = Run(Settings(), target.spec, target.client)
    item = run.item()
    before = target.client.retries
    exchanges = item.send_all([case(max_tokens=1) for _ in range(6)])
    assert [ex.status for ex in exchanges] == [200] * 6
    retries = target.client.retries - before
    assert retries >= 2
    assert item.results.spent.retries == retries == sum(ex.retries for ex in exchanges)
    assert item.results.spent.requests == 6 + retries
    # Every 429 waited out is counted among the statuses answered (and judged as a 429).
    assert not run.rate_limited and meta_of(item.results)["observed_statuses"] == {
        "200": 6,
        "429": retries,
    }


def test_always_rate_limited_stops_sending_and_reaches_no_verdict(targets: Targets) -> None:
    """A 429 after the retries ends the item without a verdict and stops further requests."""
    target = targets.get("aihubmix", "rate-limit-always")
    retry = RetryPolicy(max_retries=1, max_wait=5)
    client = Client(target.server.url, api_key=API_KEY, limits=Limits(ttfb=5), retry=retry)
    run = Run(Settings(), target.spec, client)
    item = run.item()
    try:
        sent = item.send_all([case(max_tokens=1) for _ in range(3)])
    finally:
        client.close()
    assert [ex.status for ex in sent] == [429]
    assert run.rate_limited and "429" in (item.results.run_record.no_verdict or "")
    # Judged only as a 429: a rate-limited exchange says nothing about the case it carried.
    judged = {rid for rid, t in item.results.tallies.items() if t.checked}
    assert judged <= {"RATE-LIMIT-ENVELOPE", "RETRY-AFTER-FORMAT"}
    assert item.results.spent.to_json() == {"requests": 2, "tokens": 0, "retries": 1}
    from conformance.front.plugin import raise_outcome

    with pytest.raises(pytest.skip.Exception, match="no verdict reached"):
        raise_outcome(item.outcome())


def test_observed_statuses_merge_and_summarise() -> None:
    spec = load_spec("aihubmix")
    merged, a, b = Results(), Results(), Results()
    a.info.observed_statuses = {"200": 3, "400": 1}
    b.info.observed_statuses = {"200": 2, "422": 1}
    for part in (a, b):
        merged.merge(part)
    assert meta_of(merged)["observed_statuses"] == {"200": 5, "400": 1, "422": 1}
    assert status_summary(merged, spec) == (
        "statuses observed: 200 x5, 400 x1, 422 x1; "
        "declared but not observed: 401, 403, 404, 429, 5XX; undeclared: 422"
    )


# -- the checks on hand-made exchanges: what the reference target never sends -------------


def exchange(status: int, body: bytes, content_type: str = "application/json") -> Exchange:
    return Exchange(
        case=case(),
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=b"{}",
        status=status,
        headers=Headers([("content-type", content_type), ("x-request-id", "req_1")]),
        body=body,
    )


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"", "empty body"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"<html>Bad Gateway</html>", "not JSON"),
        (b'{"error": {"message": 5}}', "error envelope"),
    ],
)
def test_error_envelope_names_the_problem(body: bytes, words: str) -> None:
    findings = judge(load_spec("aihubmix"), exchange(400, body))
    assert failed(findings) == {"ERROR-ENVELOPE"}
    assert words in findings["ERROR-ENVELOPE"].message


def test_error_envelope_without_an_error_schema_is_openais() -> None:
    spec = load_spec("aihubmix")
    spec.error_schema = None
    spec.__dict__.pop("validators", None)
    assert "ERROR-ENVELOPE" not in failed(
        judge(spec, exchange(400, b'{"error": {"message": "x"}}'))
    )
    findings = judge(spec, exchange(400, b'{"detail": "x"}'))
    assert "FastAPI" in findings["ERROR-ENVELOPE"].message


def test_cut_off_error_body_is_left_to_http_complete() -> None:
    cut = exchange(500, b'{"error": {"mess')
    cut.bound, cut.stream_error = "max-bytes", "bound hit: body larger than 16 bytes"
    findings = judge(load_spec("nscale"), cut)
    assert "ERROR-ENVELOPE" not in findings and "HTTP-COMPLETE" in failed(findings)


def test_auth_required_only_where_the_spec_declares_bearer_auth() -> None:
    spec = load_spec("nscale")
    spec.bearer_auth = False
    served = exchange(200, b"{}")
    served.case = auth_probes(MODEL)[0]
    assert "AUTH-REQUIRED" not in judge(spec, served)


def test_levels_and_areas() -> None:
    load_checks()
    got = {rid: (REGISTRY[rid].level, REGISTRY[rid].area) for rid in MESSAGES}
    assert got == {
        "HTTP-4XX-DECLARED": (Level.SHOULD, "errors"),
        "ERROR-ENVELOPE": (Level.MUST, "errors"),
        "ERROR-CONTENT-TYPE": (Level.MUST, "errors"),
        "AUTH-REQUIRED": (Level.MUST, "auth"),
        "MODEL-NOT-FOUND": (Level.MUST, "errors"),
        "INVALID-REJECTED": (Level.MUST, "errors"),
        "REQUEST-ID-HEADER": (Level.SHOULD, "transport"),
        "RESP-HEADERS-REQUIRED": (Level.MUST, "schema"),
    }


#: LiteLLM's error envelope (tests/transcripts/litellm/unknown-model-400.json): its
#: ProxyException spells every missing field with str(None).
LITELLM_ERROR = {
    "message": "400: Invalid model name",
    "type": "None",
    "param": "None",
    "code": "400",
}
FASTAPI_DOCUMENT = "tests/fixtures/fastapi_completions_openapi.json"


@pytest.mark.parametrize(
    ("spec_name", "flagged"),
    [
        ("aihubmix", "error.type = 'None', error.param = 'None'"),  # both nullable there
        ("openai", "error.param = 'None'"),  # OpenAI's `type` is a string that cannot be null
        (FASTAPI_DOCUMENT, "error.param = 'None'"),  # no error schema: OpenAI's param, code
    ],
)
def test_stringified_nulls_in_an_error_envelope_are_a_finding(spec_name: str, flagged: str) -> None:
    spec = load_spec(str(ROOT / spec_name) if spec_name == FASTAPI_DOCUMENT else spec_name)
    findings = judge(spec, body_exchange(req(), {"error": LITELLM_ERROR}, status=400))
    assert "ERROR-ENVELOPE" in failed(findings)
    assert f"spells null as a string: {flagged} (" in findings["ERROR-ENVELOPE"].message
    # Null said as null, and "None" as a message, are no finding.
    said = {**LITELLM_ERROR, "message": "None", "type": "invalid_request_error", "param": None}
    legal = judge(spec, body_exchange(req(), {"error": said}, status=400))
    assert legal["ERROR-ENVELOPE"].outcome == "passed"
