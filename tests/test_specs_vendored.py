"""Checks on the vendored OpenAPI documents in ``specs/``.

The documents are vendored as found (see ``specs/README.md``); these tests pin them to
their seeds and to the facts the rest of the suite relies on, so that an accidental edit
or a bad re-extraction is caught here rather than as odd conformance findings later.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECS = REPO_ROOT / "specs"
# The seeds live beside the checkout (../shared/seeds) or where CONFORMANCE_SEEDS says.
SEEDS = Path(
    os.environ.get("CONFORMANCE_SEEDS", Path(__file__).resolve().parents[2] / "shared" / "seeds")
)

AIHUBMIX_SEED = "004_0e0b943489f7c630.txt"
NSCALE_SEED = "000_c5623b650f680ea5.txt"


def _load(name: str) -> dict[str, Any]:
    with (SPECS / name).open(encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def aihubmix() -> dict[str, Any]:
    return _load("aihubmix.yaml")


@pytest.fixture(scope="module")
def nscale() -> dict[str, Any]:
    return _load("nscale.yaml")


def _seed_text(name: str) -> str:
    path = SEEDS / name
    if not SEEDS.is_dir() or not path.is_file():
        pytest.skip(f"seed {path} not available")
    return path.read_text(encoding="utf-8")


def _fenced_yaml(seed: str) -> str:
    """Return the text between the ````yaml fence line and the closing ````.

    Works for both a multi-line seed and one whose line breaks were collapsed: the fence
    "info string" (``/openapi.json post /v1/completions``) is dropped by starting at the
    ``openapi:`` key.
    """
    start = seed.index("````yaml") + len("````yaml")
    end = seed.rindex("````")
    assert end > start, "closing fence not found"
    body = seed[start:end]
    return body[body.index("openapi: ") :]


def _schemas(doc: dict[str, Any]) -> dict[str, Any]:
    schemas = doc["components"]["schemas"]
    assert isinstance(schemas, dict)
    return schemas


# --------------------------------------------------------------------------- AIHubMix


def test_aihubmix_has_a_single_known_validation_defect(
    aihubmix: dict[str, Any],
) -> None:
    # The source itself puts `default: null` in the object branch of
    # ChatCompletionStreamOptions (erratum `aihubmix-stream-options-default-null`).
    # Pin that it is the only thing openapi-spec-validator objects to.
    errors = list(OpenAPIV31SpecValidator(aihubmix).iter_errors())
    assert len(errors) == 1, [e.message for e in errors]
    assert errors[0].message == "None is not of type 'object'"
    branch = _schemas(aihubmix)["ChatCompletionStreamOptions"]["anyOf"][0]
    assert branch["type"] == "object"
    assert "default" in branch and branch["default"] is None
    assert "nullable" not in branch


def test_aihubmix_validates_as_openapi_31_once_erratum_applied(
    aihubmix: dict[str, Any],
) -> None:
    patched = copy.deepcopy(aihubmix)
    del _schemas(patched)["ChatCompletionStreamOptions"]["anyOf"][0]["default"]
    validate(patched)  # raises on any other problem


def test_aihubmix_round_trips_to_seed_tokens() -> None:
    seed_yaml = _fenced_yaml(_seed_text(AIHUBMIX_SEED))
    ours = (SPECS / "aihubmix.yaml").read_text(encoding="utf-8")
    assert ours.startswith("openapi: 3.1.0\n")
    seed_tokens = seed_yaml.split()
    our_tokens = ours.split()
    assert len(our_tokens) == len(seed_tokens)
    for index, (mine, theirs) in enumerate(zip(our_tokens, seed_tokens, strict=True)):
        assert mine == theirs, (index, seed_tokens[max(0, index - 8) : index + 8])
    assert " ".join(our_tokens) == " ".join(seed_tokens)


def test_aihubmix_is_multiline_two_space_yaml() -> None:
    text = (SPECS / "aihubmix.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) > 400
    assert "\t" not in text
    for line in lines:
        assert line == line.rstrip(), line
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0, line


def test_aihubmix_top_level(aihubmix: dict[str, Any]) -> None:
    assert aihubmix["openapi"] == "3.1.0"
    assert list(aihubmix) == [
        "openapi",
        "info",
        "servers",
        "security",
        "tags",
        "paths",
        "components",
    ]
    assert aihubmix["info"]["version"] == "2.1.1"
    assert aihubmix["security"] == [{"gatewayBearer": []}]
    assert [s["url"] for s in aihubmix["servers"]] == [
        "https://aihubmix.com",
        "https://api.inferera.com",
    ]
    upstream = aihubmix["info"]["x-upstream"]
    sources = upstream["vendorSpecs"]["sources"]
    assert sources["openai/official"]["version"] == "2026-05-31"
    assert sources["openai/official"]["hash"] == (
        "sha256:a203971a0bc0cd3b903b9488e3ac40eaa161a274dfaf172c1da73eee029147a8"
    )
    assert len(upstream["layers"]) == 9


def test_aihubmix_info_description_bullets(aihubmix: dict[str, Any]) -> None:
    lines = aihubmix["info"]["description"].splitlines()
    bullets = [line for line in lines if line.startswith("- ")]
    assert [b.split()[1] for b in bullets] == ["OpenAI", "Anthropic", "Gemini"]


def test_aihubmix_request_bounds(aihubmix: dict[str, Any]) -> None:
    props = _schemas(aihubmix)["CreateCompletionRequest"]["properties"]
    bounds = {
        "logprobs": (0, 5),
        "n": (1, 128),
        "best_of": (0, 20),
        "temperature": (0, 2),
        "top_p": (0, 1),
        "frequency_penalty": (-2, 2),
        "presence_penalty": (-2, 2),
    }
    for name, (low, high) in bounds.items():
        assert (props[name]["minimum"], props[name]["maximum"]) == (low, high), name
    assert props["max_tokens"]["minimum"] == 0
    assert "maximum" not in props["max_tokens"]
    # `n` is a quoted key in YAML: unquoted, YAML 1.1 loaders may read it as a boolean.
    assert "n" in props and False not in props


def test_aihubmix_request_required_and_prompt(aihubmix: dict[str, Any]) -> None:
    request = _schemas(aihubmix)["CreateCompletionRequest"]
    assert request["required"] == ["model", "prompt"]
    branches = request["properties"]["prompt"]["oneOf"]
    assert len(branches) == 4
    assert branches[0]["type"] == "string"
    assert branches[1]["type"] == "array"
    assert branches[1]["items"]["type"] == "string"
    assert branches[2]["type"] == "array"
    assert branches[2]["minItems"] == 1
    assert branches[2]["items"] == {"type": "integer"}
    assert branches[3]["type"] == "array"
    assert branches[3]["items"]["type"] == "array"
    assert branches[3]["items"]["items"] == {"type": "integer"}
    assert request["properties"]["stop"] == {"$ref": "#/components/schemas/StopConfiguration"}
    assert request["properties"]["stream_options"] == {
        "$ref": "#/components/schemas/ChatCompletionStreamOptions"
    }


def test_aihubmix_stop_configuration(aihubmix: dict[str, Any]) -> None:
    stop = _schemas(aihubmix)["StopConfiguration"]
    string_branch, array_branch = stop["oneOf"]
    assert string_branch["type"] == "string"
    # `example: |+` followed by an empty line: the one-newline string, as the array
    # branch's example '["\n"]' shows.
    assert string_branch["example"] == "\n"
    assert string_branch["nullable"] is True
    assert array_branch["type"] == "array"
    assert (array_branch["minItems"], array_branch["maxItems"]) == (1, 4)
    assert array_branch["items"]["example"] == '["\\n"]'


def test_aihubmix_response_schema(aihubmix: dict[str, Any]) -> None:
    response = _schemas(aihubmix)["CreateCompletionResponse"]
    assert response["required"] == ["id", "object", "created", "model", "choices"]
    assert response["properties"]["object"]["enum"] == ["text_completion"]
    choice = response["properties"]["choices"]["items"]
    assert choice["required"] == ["finish_reason", "index", "logprobs", "text"]
    assert choice["properties"]["finish_reason"]["enum"] == [
        "stop",
        "length",
        "content_filter",
    ]
    logprobs = choice["properties"]["logprobs"]["anyOf"]
    assert [b["type"] for b in logprobs] == ["object", "null"]
    assert response["properties"]["usage"] == {"$ref": "#/components/schemas/CompletionUsage"}


def test_aihubmix_gateway_error(aihubmix: dict[str, Any]) -> None:
    error_schema = _schemas(aihubmix)["GatewayError"]
    assert error_schema["required"] == ["error"]
    inner = error_schema["properties"]["error"]
    assert inner["required"] == ["message"]
    assert list(inner["properties"]) == ["message", "type", "param", "code"]
    assert inner["properties"]["code"] == {
        "nullable": True,
        "description": inner["properties"]["code"]["description"],
    }


def test_aihubmix_security_scheme(aihubmix: dict[str, Any]) -> None:
    scheme = aihubmix["components"]["securitySchemes"]["gatewayBearer"]
    assert scheme["type"] == "http"
    assert scheme["scheme"] == "bearer"


def test_aihubmix_responses(aihubmix: dict[str, Any]) -> None:
    post = aihubmix["paths"]["/v1/completions"]["post"]
    assert post["operationId"] == "createCompletion"
    assert post["requestBody"]["required"] is True
    responses = post["responses"]
    assert list(responses) == ["200", "400", "401", "403", "404", "429", "5XX"]
    assert list(responses["200"]["content"]) == ["application/json"]
    for code in ("400", "401", "403", "404", "429", "5XX"):
        schema = responses[code]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/GatewayError"}, code


def test_aihubmix_stream_options(aihubmix: dict[str, Any]) -> None:
    branches = _schemas(aihubmix)["ChatCompletionStreamOptions"]["anyOf"]
    assert len(branches) == 2
    assert branches[0]["type"] == "object"
    assert branches[0]["properties"]["include_usage"]["type"] == "boolean"
    assert branches[1] == {"type": "null"}


def test_aihubmix_usage(aihubmix: dict[str, Any]) -> None:
    usage = _schemas(aihubmix)["CompletionUsage"]
    assert usage["required"] == ["prompt_tokens", "completion_tokens", "total_tokens"]


def test_aihubmix_x_source(aihubmix: dict[str, Any]) -> None:
    expected = {
        "CreateCompletionRequest": "avs://openai/official",
        "CreateCompletionResponse": "avs://openai/official",
        "GatewayError": "gateway",
        "StopConfiguration": "avs://openai/official",
        "ChatCompletionStreamOptions": "avs://openai/official",
        "CompletionUsage": "avs://openai/official",
    }
    schemas = _schemas(aihubmix)
    assert set(schemas) == set(expected)
    for name, origin in expected.items():
        assert schemas[name]["x-source"]["from"] == origin, name
    bearer = aihubmix["components"]["securitySchemes"]["gatewayBearer"]
    assert bearer["x-source"] == {"from": "gateway", "authority": "gateway"}


# --------------------------------------------------------------------------- Nscale


def test_nscale_matches_seed(nscale: dict[str, Any]) -> None:
    seed_yaml = _fenced_yaml(_seed_text(NSCALE_SEED))
    # The fence line ends with the info string; the document starts on the next line.
    assert yaml.safe_load(seed_yaml) == nscale
    ours = (SPECS / "nscale.yaml").read_text(encoding="utf-8")
    assert ours.rstrip() == seed_yaml.rstrip()  # verbatim extraction


def test_nscale_validates_as_openapi_30(nscale: dict[str, Any]) -> None:
    assert nscale["openapi"] == "3.0.0"
    validate(nscale)


def test_nscale_error_envelope(nscale: dict[str, Any]) -> None:
    schemas = _schemas(nscale)
    assert schemas["ErrorResponse"]["required"] == ["error"]
    assert schemas["ErrorResponse"]["properties"]["error"] == {
        "$ref": "#/components/schemas/ApiError"
    }
    assert schemas["ApiError"]["required"] == ["code", "message", "error_type"]


def test_nscale_inference_id_header(nscale: dict[str, Any]) -> None:
    ok = nscale["paths"]["/v1/completions"]["post"]["responses"]["200"]
    assert ok["headers"]["INFERENCE-ID"]["required"] is True
    assert set(ok["content"]) == {
        "application/json; charset=utf-8",
        "text/event-stream",
    }


def test_nscale_anyof_type_object_defect_kept_verbatim(nscale: dict[str, Any]) -> None:
    # Erratum `nscale-anyof-type-object`: fixed in conformance/judging/document/spec.py, never here.
    schemas = _schemas(nscale)
    for name in ("PromptValue", "StopSequence"):
        assert schemas[name]["type"] == "object", name
        assert {b["type"] for b in schemas[name]["anyOf"]} == {"string", "array"}, name


# --------------------------------------------------------------------------- pins
# specs/pins.json holds what the seed tests check, so that they hold in a fresh clone
# without the seeds: each file's sha256, Nscale's extracted text and AIHubMix's token
# sequence (count and digest). Where the seeds are present, the pins are re-derived.

PINS = json.loads((SPECS / "pins.json").read_text(encoding="utf-8"))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("name", ["nscale.yaml", "aihubmix.yaml", "openai.yaml"])
def test_vendored_files_match_their_pins(name: str) -> None:
    assert _sha((SPECS / name).read_bytes()) == PINS[name]["sha256"]


def test_nscale_text_matches_the_pinned_seed_extract() -> None:
    ours = (SPECS / "nscale.yaml").read_text(encoding="utf-8")
    assert _sha(ours.rstrip().encode()) == PINS["nscale.yaml"]["seed_yaml_sha256"]


def test_aihubmix_tokens_match_the_pinned_seed_tokens() -> None:
    tokens = (SPECS / "aihubmix.yaml").read_text(encoding="utf-8").split()
    pin = PINS["aihubmix.yaml"]
    assert len(tokens) == pin["seed_token_count"]
    assert _sha(" ".join(tokens).encode()) == pin["seed_tokens_sha256"]


@pytest.mark.parametrize("name", ["nscale.yaml", "aihubmix.yaml"])
def test_pins_derive_from_the_seeds(name: str) -> None:
    pin = PINS[name]
    seed = _seed_text(pin["seed"])  # skips without ../shared
    assert _sha((SEEDS / pin["seed"]).read_bytes()) == pin["seed_sha256"]
    extract = _fenced_yaml(seed)
    assert _sha(extract.rstrip().encode()) == pin["seed_yaml_sha256"]
    assert len(extract.split()) == pin["seed_token_count"]
    assert _sha(" ".join(extract.split()).encode()) == pin["seed_tokens_sha256"]


def test_readme_names_the_pinned_seed_digests() -> None:
    readme = (SPECS / "README.md").read_text(encoding="utf-8")
    for pin in PINS.values():
        if "seed" in pin:
            assert pin["seed_sha256"] in readme and pin["seed"] in readme


# --------------------------------------------------------------------------- OpenAI


def test_openai_pin_names_its_commit_blob_and_licence() -> None:
    """Verbatim from github.com/openai/openai-openapi: the git blob id of our copy is the
    one at the pinned commit, and the README names commit, digest and MIT licence."""
    pin = PINS["openai.yaml"]
    data = (SPECS / "openai.yaml").read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert blob == pin["git_blob"]
    readme = (SPECS / "README.md").read_text(encoding="utf-8")
    for value in (pin["commit"], pin["sha256"], pin["git_blob"], "MIT"):
        assert value in readme
    assert pin["source"] == "https://github.com/openai/openai-openapi"


def test_openai_completions_operation_sits_under_its_server_path() -> None:
    from conformance.judging.document.spec import load_spec

    spec = load_spec("openai")
    assert (spec.server_path, spec.path_key, spec.operation_path) == (
        "/v1",
        "/completions",
        "/v1/completions",
    )
    assert spec.operation["operationId"] == "createCompletion"
    assert spec.declared_statuses == ("200", "429")
    assert spec.bearer_auth and spec.is_31
