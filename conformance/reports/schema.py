"""The JSON Schema of ``results.json`` (``reports/results.schema.json``) and its validation."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema


@cache
def results_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) that every ``results.json`` of schema_version 1 meets."""
    package = files(__package__ or "")  # conformance.reports, as installed: never ``reports``
    text = package.joinpath("results.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(data: Any) -> list[str]:
    """Why ``data`` is not a valid results document, most relevant first; empty when valid."""
    validator = jsonschema.Draft202012Validator(results_schema())
    errors = sorted(validator.iter_errors(data), key=jsonschema.exceptions.relevance, reverse=True)
    return [f"{e.message} (at /{'/'.join(str(p) for p in e.absolute_path)})" for e in errors]
