"""Conventions of real documents, each proven both ways, and the 4xx rules by OpenAPI's reading.

Documents: OpenAI's own (``--spec openai``: only 200 and 429 declared), a FastAPI document
of llama-cpp-python's shape (tests/fastapi_document.py says how it was made: not the
package's real document), and the two vendor documents (which list their 4xx).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from fastapi_document import FIXTURE, build, load
from support import Targets, case, failed, judge, meta_of

from conformance.judging.checks import load_checks
from conformance.judging.checks.errors import unknown_model_probe
from conformance.judging.document.spec import Spec, load_spec
from conformance.judging.document.spec_notes import header_lines, registry
from conformance.judging.requirements import REGISTRY, Level
from conformance.judging.wire.exchange import Exchange, Headers

STREAM_STRING = "event-stream-schema-is-string"
FASTAPI_422 = "fastapi-validation-422"
NO_4XX = "no-client-errors-declared"
#: OpenAI's ErrorResponse (the schema of its declared 429, the document's one error schema).
OPENAI_ERROR = (
    b'{"error": {"message": "x", "type": "invalid_request_error", "param": null, "code": null}}'
)
VALIDATION_BODY = (
    b'{"detail": [{"loc": ["body", "max_tokens"], "msg": "Input should be a valid integer", '
    b'"type": "int_parsing"}]}'
)


@pytest.fixture(scope="module")
def fastapi() -> Spec:
    return load_spec(str(FIXTURE))


def _ids(spec: Spec) -> set[str]:
    return {c.id for c in spec.conventions}


def exchange(status: int, body: bytes, *, model: str | None = None) -> Exchange:
    sent = unknown_model_probe() if model else case()
    return Exchange(
        case=sent,
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=b"{}",
        status=status,
        headers=Headers([("content-type", "application/json"), ("x-request-id", "req_1")]),
        body=body,
    )


def test_the_fastapi_fixture_is_what_fastapi_generates() -> None:
    pytest.importorskip("fastapi")
    assert build() == load()


def test_conventions_are_detected_per_document(fastapi: Spec) -> None:
    assert _ids(fastapi) == {STREAM_STRING, FASTAPI_422, NO_4XX}
    assert _ids(load_spec("openai")) == {NO_4XX}
    assert _ids(load_spec("aihubmix")) == set() and _ids(load_spec("nscale")) == set()
    # They correct nothing, so --strict-spec keeps them (errata and policies go).
    strict = load_spec(str(FIXTURE), strict=True)
    assert _ids(strict) == _ids(fastapi) and strict.errata == []


def test_conventions_are_listed_in_the_header_and_the_registry(fastapi: Spec) -> None:
    lines = header_lines(fastapi)
    assert (
        f"conformance: conventions of the document: {STREAM_STRING}, {FASTAPI_422}, {NO_4XX}"
        in (lines)
    )
    assert any(line.startswith(f"conformance: document {FIXTURE}, sha256 ") for line in lines)
    kinds = {e["id"]: e["kind"] for e in registry(fastapi)}
    assert kinds[STREAM_STRING] == kinds[NO_4XX] == "convention"
    assert "conformance: conventions of the document: none" in header_lines(load_spec("nscale"))


# -- event-stream-schema-is-string: the raw stream; events judged by the 200 JSON schema --


def test_string_stream_schema_judges_events_by_the_json_schema(fastapi: Spec) -> None:
    raw = load()["paths"]["/v1/completions"]["post"]["responses"]["200"]["content"]
    assert raw["text/event-stream"]["schema"]["type"] == "string"
    # Read literally (the bug: 21 of 21 streams failed), a chunk object is not a string.
    chunk = {"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": []}
    assert fastapi.validate("chunk", chunk) is None
    assert fastapi.validate("chunk", {**chunk, "choices": "x"}) is not None


def test_string_stream_schema_both_ways_on_the_reference_target(
    targets: Targets, fastapi: Spec
) -> None:
    conformant = targets.get("aihubmix").send(case(stream=True, n=2, logprobs=1))
    assert "STREAM-CHUNK-SCHEMA" not in failed(judge(fastapi, conformant))
    usage = case(stream=True, stream_options={"include_usage": True})
    assert "STREAM-CHUNK-SCHEMA" not in failed(judge(fastapi, targets.get("aihubmix").send(usage)))
    broken = targets.get("aihubmix", "stream-usage-empty-object").send(usage)
    findings = judge(fastapi, broken)
    assert "STREAM-CHUNK-SCHEMA" in failed(findings)
    assert findings["STREAM-CHUNK-SCHEMA"].path == "event[0]"  # `usage: {}` on the first chunk


def test_an_object_stream_schema_is_not_the_convention() -> None:
    spec = load_spec("nscale")  # its event-stream schema is an array of chunk objects
    assert STREAM_STRING not in _ids(spec) and spec.stream_chunk_schema is not None
    assert spec.stream_chunk_schema.get("type") != "string"


# -- fastapi-validation-422 -------------------------------------------------------------


def test_fastapi_422_body_is_accepted_where_declared(fastapi: Spec) -> None:
    assert "ERROR-ENVELOPE" not in failed(judge(fastapi, exchange(422, VALIDATION_BODY)))
    # The API's own envelope is accepted on a 422 too; anything else is not.
    ok = b'{"error": {"message": "bad max_tokens"}}'
    assert "ERROR-ENVELOPE" not in failed(judge(fastapi, exchange(422, ok)))
    findings = judge(fastapi, exchange(422, b'{"detail": "bad"}'))
    assert "ERROR-ENVELOPE" in failed(findings)
    # The 422 schema is not the envelope of other statuses: a 400 in FastAPI's shape fails.
    assert "ERROR-ENVELOPE" in failed(judge(fastapi, exchange(400, VALIDATION_BODY)))


def test_fastapi_422_body_fails_where_not_declared() -> None:
    findings = judge(load_spec("aihubmix"), exchange(422, VALIDATION_BODY))
    assert "ERROR-ENVELOPE" in failed(findings)
    assert "FastAPI" in findings["ERROR-ENVELOPE"].message


def test_a_declared_422_of_another_shape_is_no_convention(tmp_path: Path) -> None:
    import json

    doc = copy.deepcopy(load())
    doc["components"]["schemas"]["HTTPValidationError"] = {
        "type": "object",
        "properties": {"error": {"type": "object"}},
    }
    path = tmp_path / "own422.json"
    path.write_text(json.dumps(doc))
    spec = load_spec(str(path))
    assert FASTAPI_422 not in _ids(spec) and spec.client_error_statuses == ("422",)


# -- no-client-errors-declared and the recalibrated status rules ------------------------


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_undeclared_4xx_is_not_judged_where_no_4xx_is_declared(status: int) -> None:
    findings = judge(load_spec("openai"), exchange(status, OPENAI_ERROR))
    assert {"HTTP-STATUS-DECLARED", "HTTP-4XX-DECLARED"} & set(findings) == set()
    assert not failed(findings)


def test_undeclared_4xx_is_a_should_where_some_4xx_are_declared() -> None:
    findings = judge(load_spec("aihubmix"), exchange(422, b'{"error": {"message": "x"}}'))
    assert failed(findings) == {"HTTP-4XX-DECLARED"}
    assert findings["HTTP-4XX-DECLARED"].message == (
        "status 422 is not among the spec's declared 4xx (400, 401, 403, 404)"
    )
    load_checks()
    assert REGISTRY["HTTP-4XX-DECLARED"].level is Level.SHOULD
    assert "HTTP-4XX-DECLARED" not in failed(
        judge(load_spec("aihubmix"), exchange(404, b'{"error": {"message": "x"}}'))
    )


def test_undeclared_success_status_is_still_a_must() -> None:
    findings = judge(load_spec("openai"), exchange(201, b"{}"))
    assert "HTTP-STATUS-DECLARED" in failed(findings)
    assert findings["HTTP-STATUS-DECLARED"].message == (
        "status 201 is not declared (declared: 200, 429)"
    )


def test_model_not_found_message_no_longer_contradicts_itself() -> None:
    spec = load_spec("openai")
    refused = judge(spec, exchange(404, OPENAI_ERROR, model="x"))
    assert not failed(refused)  # was: "answered 404, expected a
    # declared 4xx ([404])"
    broken = judge(spec, exchange(500, b'{"error": {"message": "boom"}}', model="x"))
    assert broken["MODEL-NOT-FOUND"].message == (
        "the unknown model 'conformance-no-such-model' was answered 500, expected a 4xx"
    )
    served = judge(spec, exchange(200, b"{}", model="x"))
    assert "was served (200)" in served["MODEL-NOT-FOUND"].message


def test_a_document_with_default_or_4xx_range_declares_client_errors(tmp_path: Path) -> None:
    import json

    for key in ("4XX", "default"):
        doc = copy.deepcopy(load())
        doc["paths"]["/v1/completions"]["post"]["responses"][key] = {"description": "error"}
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(doc))
        spec = load_spec(str(path))
        assert NO_4XX not in _ids(spec) and spec.declares_client_errors
        assert "HTTP-4XX-DECLARED" not in failed(judge(spec, exchange(400, b"{}")))


def test_a_whole_run_under_the_fastapi_document_passes_on_a_conformant_target() -> None:
    """The issue's case: 21 of 21 streams failed STREAM-CHUNK-SCHEMA under FastAPI's
    `type: string` stream schema; now the conformant embedded target passes."""
    from conformance.front.runner import run_suite
    from conformance.run.session import Settings, Setup

    outcome = run_suite(Setup(settings=Settings(max_examples=2), spec=str(FIXTURE)))
    assert outcome.verdict.word == "passed", outcome.verdict.reasons
    assert outcome.results.tallies["STREAM-CHUNK-SCHEMA"].checked > 0
    conventions = [c["id"] for c in meta_of(outcome.results)["conventions"]]
    assert conventions == [STREAM_STRING, FASTAPI_422, NO_4XX]


# -- llama-cpp-python 0.3.36's own document, as its server publishes it ------------------
# Recorded, not modelled: GET /openapi.json from llama-cpp-python[server] 0.3.36 (installed
# from PyPI, built from its sdist) serving the tiny random GGUF model on 127.0.0.1, started
# by `python tools/real_targets/run.py --targets llama-cpp-python --serve 900`, on
# 2026-12-01 (the same bytes with and without the API key). 34,162 bytes, saved unchanged.
LLAMA_DOC = Path(__file__).resolve().parent / "fixtures" / "llama_cpp_python_0.3.36_openapi.json"


def test_llama_cpp_pythons_real_document_has_the_modelled_conventions() -> None:
    spec = load_spec(str(LLAMA_DOC))
    assert _ids(spec) == {STREAM_STRING, FASTAPI_422, NO_4XX}
    assert spec.operation_path == "/v1/completions"


def test_llama_cpp_pythons_real_document_judges_conformant_streams_by_the_json_schema(
    targets: Targets,
) -> None:
    spec = load_spec(str(LLAMA_DOC))
    conformant = targets.get("aihubmix").send(case(stream=True, n=2, logprobs=1))
    assert "STREAM-CHUNK-SCHEMA" not in failed(judge(spec, conformant))
    usage = case(stream=True, stream_options={"include_usage": True})
    broken = targets.get("aihubmix", "stream-usage-empty-object").send(usage)
    assert "STREAM-CHUNK-SCHEMA" in failed(judge(spec, broken))


def test_the_error_envelope_is_a_must_only_where_the_document_gives_its_schema() -> None:
    """llama-cpp-python's own document declares no error schema (only FastAPI's 422): its
    `{"detail": "Invalid API key"}` 401 fails the OpenAI envelope as a SHOULD there, and
    the same body fails a MUST under a document whose schema defines the envelope."""
    body = b'{"detail": "Invalid API key"}'
    for doc, level in ((str(LLAMA_DOC), Level.SHOULD), ("aihubmix", Level.MUST)):
        spec = load_spec(doc)
        assert "ERROR-ENVELOPE" in failed(judge(spec, exchange(401, body)))
        assert REGISTRY["ERROR-ENVELOPE"].under(spec).level is level
