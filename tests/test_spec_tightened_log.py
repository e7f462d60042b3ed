"""Issue 13's proof, counted by the server: with a tightened copy of either vendored spec
passed as ``--spec PATH``, every request the suite sends as valid, edge or probe validates
against that copy, every prompt form the copy allows is sent, and every invalid request
breaks the rule it names.

The witness is tools/request_log.py: the reference target behind a recorder that judges
each request with openapi-core directly against the copy (its own reading of the
documented errata; none of the suite's request code) and writes one JSONL line per
request. The suite tells it what each request is meant to be with its
``X-Conformance-Case`` header. The assertions read that log only.
"""

from __future__ import annotations

import copy
import functools
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.assembly import Setup, run_suite
from conformance.engine import Settings
from conformance.spec import BUILTIN_SPECS, specs_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import request_log  # noqa: E402

MODEL = "reference-model"
API_KEY = "sk-tightened-" + "0" * 16
FORMS = ("string", "strings", "tokens", "token-lists")

# -- the tightened copies -------------------------------------------------------------------


def _deref(doc: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _leaves(doc: dict[str, Any], node: Any) -> list[dict[str, Any]]:
    """The typed branches of a raw schema, through $ref, anyOf and oneOf (mutable)."""
    node = _deref(doc, node)
    if not isinstance(node, dict):
        return []
    branches = (node.get("anyOf") or []) + (node.get("oneOf") or [])
    found = [leaf for b in branches for leaf in _leaves(doc, b)]
    typed = node.get("type") in ("string", "array", "integer", "number", "object", "boolean")
    return found + ([node] if typed and not branches else [])


def _form(doc: dict[str, Any], leaf: dict[str, Any]) -> str:
    if leaf.get("type") == "string":
        return "string"
    items = _deref(doc, leaf.get("items") or {})
    return {"string": "strings", "integer": "tokens", "array": "token-lists"}[items.get("type")]


def tighten(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of a vendored document with every request bound it has tightened.

    Prompt: string maxLength 5; string array maxItems 1 of strings maxLength 5; token ids
    minimum 100, at most 2; at most 2 token arrays of at most 2 ids. max_tokens minimum 1
    (so ``max_tokens: 0`` is invalid), stop at most 2 strings of at most 3 characters,
    logprobs maximum 2, n maximum 2, best_of maximum 3, temperature maximum 1, top_p
    maximum 0.5, penalties within [-1, 1], suffix and user short, seed within [0, 1000],
    logit_bias at most 2 entries within [-50, 50].
    """
    doc = copy.deepcopy(doc)
    operation = doc["paths"]["/v1/completions"]["post"]
    schema = _deref(doc, next(iter(operation["requestBody"]["content"].values()))["schema"])
    props = schema["properties"]
    for leaf in _leaves(doc, props["prompt"]):
        form = _form(doc, leaf)
        items = _deref(doc, leaf.get("items") or {})
        if form == "string":
            leaf["maxLength"] = 5
        elif form == "strings":
            leaf["maxItems"] = 1
            items["maxLength"] = 5
        elif form == "tokens":
            leaf["maxItems"] = 2
            items["minimum"] = 100
        else:
            leaf["maxItems"] = 2
            items["maxItems"] = 2
            _deref(doc, items["items"])["minimum"] = 100
    for leaf in _leaves(doc, props["stop"]):
        if leaf["type"] == "string":
            leaf["maxLength"] = 3
        else:
            leaf["maxItems"] = 2
            _deref(doc, leaf["items"])["maxLength"] = 3
    bounds = {
        "max_tokens": {"minimum": 1},
        "logprobs": {"maximum": 2},
        "n": {"maximum": 2},
        "best_of": {"maximum": 3},
        "temperature": {"maximum": 1},
        "top_p": {"maximum": 0.5},
        "frequency_penalty": {"minimum": -1, "maximum": 1},
        "presence_penalty": {"minimum": -1, "maximum": 1},
        "suffix": {"maxLength": 4},
        "user": {"maxLength": 8},
        "seed": {"minimum": 0, "maximum": 1000},
        "logit_bias": {"maxProperties": 2},
    }
    for field, keywords in bounds.items():
        for leaf in _leaves(doc, props.get(field)):
            leaf.update(keywords)
            if field == "logit_bias":
                _deref(doc, leaf["additionalProperties"]).update(minimum=-50, maximum=50)
    return doc


def write_copy(name: str, directory: Path) -> Path:
    raw = yaml.safe_load((specs_dir() / f"{name}.yaml").read_text(encoding="utf-8"))
    path = directory / f"{name}-tightened.yaml"
    path.write_text(yaml.safe_dump(tighten(raw), allow_unicode=True), encoding="utf-8")
    return path


# -- one run against the logging target, per spec ----------------------------------------


@functools.cache
def logged_run(name: str, directory: Path) -> tuple[list[dict[str, Any]], Any]:
    spec_path = write_copy(name, directory)
    log_path = directory / f"{name}-requests.jsonl"
    server = request_log.logging_target(
        spec_path, log_path, flavor=name, api_key=API_KEY, models=(MODEL,)
    )
    url = server.start()
    try:
        setup = Setup(
            settings=Settings(model=MODEL, max_examples=8, concurrency=4),
            spec=str(spec_path),
            target_url=url,
            api_key=API_KEY,
        )
        outcome = run_suite(setup)
    finally:
        server.stop()
    return request_log.read_log(log_path), outcome


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("tightened")
    return {name: logged_run(name, directory) for name in sorted(BUILTIN_SPECS)}
