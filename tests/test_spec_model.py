"""The Spec model: loading, $ref resolution, errata applied (and switched off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.judging.document.spec import SpecError, load_spec, resolve_refs

NSCALE_ERRATA = {
    "object-type-beside-string-array-anyof",
    "event-stream-schema-is-array",
    "stream-chunk-nulls-forbidden",
    "echo-first-logprob-not-nullable",
}
AIHUBMIX_ERRATA = {
    "event-stream-media-type-undeclared",
    "null-default-on-object-schema",
    "nullable-in-openapi-3.1",
    "stream-chunk-nulls-forbidden",
    "echo-first-logprob-not-nullable",
}
CHUNK = {
    "id": "cmpl-1",
    "object": "text_completion",
    "created": 1_700_000_000,
    "model": "m",
    "choices": [{"index": 0, "text": "hi", "logprobs": None, "finish_reason": None}],
}


@pytest.mark.parametrize(
    ("name", "errata"), [("nscale", NSCALE_ERRATA), ("aihubmix", AIHUBMIX_ERRATA)]
)
def test_errata_detected_from_the_documents(name: str, errata: set[str]) -> None:
    assert {e.id for e in load_spec(name).errata} == errata
    assert load_spec(name, strict=True).errata == []


def test_errata_apply_only_where_the_defect_is(tmp_path: Path) -> None:
    """A 3.0 document that already allows the nulls gets neither erratum nor policy."""
    import yaml

    doc = yaml.safe_load(load_spec("nscale").path.read_text())
    for node in _mappings(doc):
        props = node.get("properties")
        if isinstance(props, dict):
            for field in ("logprobs", "finish_reason", "usage", "param"):
                if isinstance(props.get(field), dict):
                    props[field]["nullable"] = True
    path = tmp_path / "fixed.yaml"
    path.write_text(yaml.safe_dump(doc))
    spec = load_spec(str(path))
    assert not spec.uses("null-response-fields")
    assert "stream-chunk-nulls-forbidden" not in {e.id for e in spec.errata}
    assert load_spec("nscale").uses("null-response-fields")
    assert not load_spec("aihubmix").uses("null-response-fields")  # it says null elsewhere


def test_policies_listed_with_errata_and_off_when_strict() -> None:
    from conformance.judging.document.policies import POLICIES
    from conformance.judging.document.spec_notes import header_lines, registry

    spec = load_spec("aihubmix")
    entries = registry(spec)
    assert {e["id"] for e in entries if e["kind"] == "erratum"} == AIHUBMIX_ERRATA
    assert {e["id"] for e in entries if e["kind"] == "policy"} == {
        p.id for p in POLICIES if p.id != "null-response-fields"
    }
    assert all(e["detail"] and e["switch"] == "--strict-spec" for e in entries)
    strict = load_spec("aihubmix", strict=True)
    assert registry(strict) == [] and strict.request_id_header is None
    assert header_lines(strict)[2] == "conformance: policies: none (--strict-spec)"


def _mappings(node: object) -> list[dict]:  # type: ignore[type-arg]
    if isinstance(node, dict):
        return [node, *(m for v in node.values() for m in _mappings(v))]
    if isinstance(node, list):
        return [m for v in node for m in _mappings(v)]
    return []


def test_nscale_prompt_is_satisfiable_only_with_errata() -> None:
    body = {"model": "m", "prompt": "hello", "stop": ["a"]}
    assert load_spec("nscale").validate("request", body) is None
    problem = load_spec("nscale", strict=True).validate("request", body)
    assert problem is not None and "object" in problem


def test_nscale_stream_chunk_is_one_item_of_the_array() -> None:
    spec = load_spec("nscale")
    assert spec.validate("chunk", CHUNK) is None
    assert "array" in str(load_spec("nscale", strict=True).validate("chunk", CHUNK))


def test_aihubmix_stream_shares_the_response_shape() -> None:
    spec = load_spec("aihubmix")
    assert spec.stream_media_type == "text/event-stream"
    assert spec.validate("chunk", CHUNK) is None
    assert spec.validate("chunk", {**CHUNK, "object": "text_completion.chunk"}) is not None
    assert load_spec("aihubmix", strict=True).stream_media_type is None


def test_aihubmix_nullable_means_null_allowed() -> None:
    body = {"model": "m", "prompt": None, "logprobs": None, "n": None}
    assert load_spec("aihubmix").validate("request", body) is None
    assert load_spec("aihubmix", strict=True).validate("request", body) is not None


def test_non_final_chunk_nulls_allowed_but_not_in_responses() -> None:
    spec = load_spec("aihubmix")
    body = {**CHUNK, "usage": None}
    assert spec.validate("chunk", body) is None
    assert "finish_reason" in str(spec.validate("response", CHUNK))


def test_nscale_null_fields_tolerated_by_schema() -> None:
    spec = load_spec("nscale")
    body = {**CHUNK, "usage": None}
    assert spec.validate("response", body) is None
    assert load_spec("nscale", strict=True).validate("response", body) is not None


def test_declared_statuses_headers_and_security() -> None:
    nscale, aihubmix = load_spec("nscale"), load_spec("aihubmix")
    assert nscale.required_headers == ("INFERENCE-ID",)
    assert nscale.request_media_type == "application/json; charset=utf-8"
    assert nscale.is_declared(503) and not nscale.is_declared(422) and not nscale.is_declared(504)
    assert aihubmix.is_declared(504) and aihubmix.is_declared(403)
    assert not aihubmix.is_declared(422)
    assert nscale.bearer_auth and aihubmix.bearer_auth
    assert aihubmix.request_id_header == "X-Request-Id"
    assert nscale.request_id_header is None


def test_error_schemas() -> None:
    nscale, aihubmix = load_spec("nscale"), load_spec("aihubmix")
    assert (
        nscale.validate("error", {"error": {"code": "x", "message": "m", "error_type": "t"}})
        is None
    )
    assert nscale.validate("error", {"error": {"message": "m"}}) is not None
    assert aihubmix.validate("error", {"error": {"message": "m", "code": 400}}) is None
    assert aihubmix.validate("error", {"detail": "nope"}) is not None


def test_bad_spec_inputs_raise_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown spec 'gpt'"):
        load_spec("gpt")
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("openapi: 3.0.0\npaths: {}\n")
    with pytest.raises(SpecError, match="no POST /v1/completions"):
        load_spec(str(bad))
    bad.write_text("{ not yaml")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(str(bad))


def test_resolve_refs_inlines_and_refuses_cycles() -> None:
    doc = {"a": {"$ref": "#/b"}, "b": {"type": "string"}}
    assert resolve_refs(doc)["a"] == {"type": "string"}
    with pytest.raises(SpecError, match="cycle"):
        resolve_refs({"a": {"$ref": "#/a"}})
    with pytest.raises(SpecError, match="points nowhere"):
        resolve_refs({"a": {"$ref": "#/zzz"}})


def test_spec_by_path_gets_the_same_errata(tmp_path: Path) -> None:
    copy = tmp_path / "vendor.yaml"
    copy.write_text(load_spec("nscale").path.read_text())
    assert {e.id for e in load_spec(str(copy)).errata} == NSCALE_ERRATA


# -- OpenAPI server URLs: a path key is resolved against the server URL's path -----------

MINIMAL_OP = {
    "requestBody": {
        "content": {"application/json": {"schema": {"type": "object", "properties": {}}}}
    },
    "responses": {"200": {"description": "OK"}},
}


def _doc(version: str, servers: object, path: str) -> dict[str, object]:
    doc: dict[str, object] = {
        "openapi": version,
        "info": {"title": "t", "version": "1"},
        "paths": {path: {"post": MINIMAL_OP}},
    }
    if servers is not None:
        doc["servers"] = servers
    return doc


@pytest.mark.parametrize("version", ["3.0.3", "3.1.0"])
@pytest.mark.parametrize(
    ("servers", "path", "server_path"),
    [
        ([{"url": "https://api.example.com/v1"}], "/completions", "/v1"),
        ([{"url": "https://api.example.com/v1/"}], "/completions", "/v1"),
        ([{"url": "/v1"}], "/completions", "/v1"),  # relative: to where the doc is served
        ([{"url": "v1"}], "/completions", "/v1"),
        (None, "/v1/completions", ""),  # no servers: "/"
        ([{"url": "https://api.example.com"}], "/v1/completions", ""),
        (
            [
                {
                    "url": "{scheme}://{host}/{base}",
                    "variables": {
                        "scheme": {"default": "https", "enum": ["https", "http"]},
                        "host": {"default": "api.example.com"},
                        "base": {"default": "v1", "enum": ["v1", "v2"]},
                    },
                }
            ],
            "/completions",
            "/v1",
        ),
        # The first server that puts the operation at /v1/completions is the one used.
        (
            [{"url": "https://a.example/api"}, {"url": "https://b.example/v1"}],
            "/completions",
            "/v1",
        ),
    ],
)
def test_paths_resolve_against_the_servers(
    tmp_path: Path, version: str, servers: object, path: str, server_path: str
) -> None:
    import json

    file = tmp_path / "doc.json"
    file.write_text(json.dumps(_doc(version, servers, path)))
    spec = load_spec(str(file))
    assert (spec.server_path, spec.path_key) == (server_path, path)
    assert spec.operation_path == "/v1/completions"
    assert spec.path_prefix == "/v1"


def test_a_server_path_other_than_v1_is_kept(tmp_path: Path) -> None:
    """``/api`` + ``/completions``: the target is asked at /api/completions, and the
    header names the server path used."""
    import json

    from conformance.judging.document.spec_notes import operation_line

    file = tmp_path / "doc.json"
    file.write_text(json.dumps(_doc("3.1.0", [{"url": "http://h/api"}], "/completions")))
    spec = load_spec(str(file))
    assert spec.operation_path == "/api/completions" and spec.path_prefix == "/api"
    assert operation_line(spec) == "POST /api/completions (server path /api + path /completions)"
    assert operation_line(load_spec("nscale")) == "POST /v1/completions"


def test_relative_server_urls_resolve_against_the_documents_url() -> None:
    from conformance.judging.document.spec import server_paths

    doc = {"servers": [{"url": "v1"}, {"url": "../x"}, {"url": "/abs"}]}
    assert server_paths(doc, "http://h/api/openapi.json") == ["/api/v1", "/x", "/abs"]
    assert server_paths({}, None) == [""]


def test_base_url_accepts_the_server_path_prefix() -> None:
    from conformance.run.preflight import base_url

    assert base_url("http://h:1/v1", "/v1/completions", "/v1")[0] == "http://h:1"
    assert base_url("http://h:1/v1/completions/", "/v1/completions", "/v1")[0] == "http://h:1"
    assert base_url("http://h:1", "/v1/completions", "/v1") == ("http://h:1", None)
    base, note = base_url("http://h:1/api", "/api/completions", "/api")
    assert base == "http://h:1" and note is not None and "/api" in note
