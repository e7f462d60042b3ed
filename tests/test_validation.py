"""openapi-core on the corrected document: requests and answers judged both ways."""

from __future__ import annotations

import json

import pytest

from conformance.judging.document.spec import BUILTIN_SPECS, load_spec
from conformance.judging.document.validation import (
    corrected_document,
    openapi_of,
    request_rules,
    response_verdict,
)

SPECS = {name: load_spec(name) for name in BUILTIN_SPECS}
per_spec = pytest.mark.parametrize("name", sorted(SPECS))
COMPLETION = {
    "id": "cmpl-1",
    "object": "text_completion",
    "created": 1_700_000_000,
    "model": "m",
    "choices": [{"index": 0, "text": "hi", "logprobs": None, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
HEADERS = {"INFERENCE-ID": "inf-1", "X-Request-Id": "req-1"}


@per_spec
def test_openapi_core_loads_both_corrected_documents(name: str) -> None:
    spec = SPECS[name]
    assert openapi_of(spec) is openapi_of(spec)  # built once per Spec
    doc = corrected_document(spec)
    assert doc["servers"] == [{"url": "/"}]
    assert list(doc["paths"]) == ["/v1/completions"]


@per_spec
def test_request_rules_both_ways(name: str) -> None:
    spec = SPECS[name]
    assert request_rules(spec, {"model": "m", "prompt": "hi", "max_tokens": 1}) == set()
    assert request_rules(spec, {"model": "m", "prompt": [1, 2]}) == set()
    assert request_rules(spec, {"prompt": "hi"}) == {"model:required"}
    assert request_rules(spec, {"model": "m", "prompt": "hi", "max_tokens": "x"}) == {
        "max_tokens:type"
    }
    assert request_rules(spec, None, raw=b"{not json") == {"body:not-json"}
    assert request_rules(spec, None, raw=b'[{"model": "m"}]') == {"body:type"}


def test_request_rules_follow_the_errata() -> None:
    body = {"model": "m", "prompt": "hello"}
    assert request_rules(SPECS["nscale"], body) == set()
    # Nscale as written (--strict-spec) admits no prompt: openapi-core agrees.
    assert request_rules(load_spec("nscale", strict=True), body) == {"prompt:type"}


@per_spec
def test_a_conformant_answer_passes(name: str) -> None:
    spec = SPECS[name]
    media = spec.json_media_types[0]
    verdict = response_verdict(spec, 200, media, json.dumps(COMPLETION).encode(), HEADERS)
    assert verdict.ok, verdict
    # Bare application/json where the document says `; charset=utf-8` (a policy).
    bare = response_verdict(spec, 200, "application/json", json.dumps(COMPLETION).encode(), HEADERS)
    assert bare.ok, bare
    assert response_verdict(spec, 200, "text/event-stream", b"data: {}\n\n", HEADERS).ok


@per_spec
def test_each_defect_is_named(name: str) -> None:
    spec = SPECS[name]
    media = spec.json_media_types[0]
    body = json.dumps(COMPLETION).encode()
    wrong = json.dumps({**COMPLETION, "created": "yesterday"}).encode()
    assert "created" in str(response_verdict(spec, 200, media, wrong, HEADERS).body)
    assert "418" in str(response_verdict(spec, 418, media, body, HEADERS).status)
    assert "text/html" in str(response_verdict(spec, 200, "text/html", b"<p>", HEADERS).media_type)
    missing = response_verdict(spec, 200, media, body, {})
    if spec.required_headers:
        assert "INFERENCE-ID" in str(missing.headers)
    else:
        assert missing.ok


def test_strict_spec_judges_the_media_type_as_written() -> None:
    strict = load_spec("nscale", strict=True)
    body = json.dumps(COMPLETION).encode()
    verdict = response_verdict(strict, 200, "application/json", body, HEADERS)
    assert verdict.media_type is not None
