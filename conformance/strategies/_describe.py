"""Tags and labels: what a request uses, for the capability table and for humans."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Fields every request carries: they name no optional feature.
_BASE_FIELDS = ("model", "prompt")


def prompt_form(prompt: Any) -> str | None:
    """``string``, ``strings``, ``tokens``, ``token-lists`` or ``null``; None if mixed."""
    if prompt is None:
        return "null"
    if isinstance(prompt, str):
        return "string"
    if not isinstance(prompt, list):
        return None
    if prompt and all(isinstance(p, list) for p in prompt):
        return "token-lists"
    if prompt and all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
        return "tokens"
    if all(isinstance(p, str) for p in prompt):
        return "strings"
    return None


def request_tags(body: Mapping[str, Any]) -> frozenset[str]:
    """``prompt:<form>``, ``param:<name>`` per optional field with a value, ``null:<name>``.

    An explicit null is tagged apart: a target that refuses ``temperature: null`` has not
    refused temperature.
    """
    tags = set()
    if "prompt" in body:
        form = prompt_form(body["prompt"])
        if form is not None:
            tags.add(f"prompt:{form}")
    for name, value in body.items():
        if name not in _BASE_FIELDS:
            tags.add(f"param:{name}" if value is not None else f"null:{name}")
    return frozenset(tags)


def _prompt_phrase(prompt: Any) -> str:
    form = prompt_form(prompt)
    if form == "string":
        return "empty prompt" if prompt == "" else "text prompt"
    if form == "strings":
        return f"text prompts x{len(prompt)}"
    if form == "tokens":
        return f"token prompt ({len(prompt)} ids)"
    if form == "token-lists":
        return f"token prompts x{len(prompt)}"
    if form == "null":
        return "null prompt"
    return "mixed prompt"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 16 else text[:15] + "…"


def _param_phrase(name: str, value: Any) -> str:
    if value is None:
        return f"{name}=null"
    if isinstance(value, bool):
        return name if value else f"{name}=false"
    if name == "stop":
        return f"stop x{len(value)}" if isinstance(value, list) else "stop str"
    if name == "stream_options" and isinstance(value, dict) and "include_usage" in value:
        return f"include_usage={_short(value['include_usage'])}"
    if name in ("logit_bias",) and isinstance(value, dict):
        return f"{name} x{len(value)}"
    if name in ("suffix", "user", "seed"):
        return name
    return f"{name}={_short(value)}"


def describe(body: Mapping[str, Any]) -> str:
    """A short label, e.g. ``token prompt (3 ids), n=2, logprobs=5, stop x4``."""
    parts = [_prompt_phrase(body.get("prompt")) if "prompt" in body else "no prompt"]
    parts += [_param_phrase(k, v) for k, v in body.items() if k not in _BASE_FIELDS]
    return ", ".join(parts)
