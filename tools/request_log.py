"""A logging target: the reference target behind a recorder that judges every request.

    python tools/request_log.py --spec PATH --log requests.jsonl \\
        [--flavor aihubmix] [--port 0] [--api-key K] [--model M ...]

It is the server-side witness for issue 13's promise ("every request the suite calls
valid is valid under the document it was given"), so it shares nothing with the suite's
request code: no ``strategies``, no ``conformance.judging.document.validation``, no ``conformance.judging.document.spec``.
It loads the OpenAPI document at PATH itself, applies the request-side errata the way
specs/README.md documents them (so that a copy of Nscale's document admits a prompt at
all), and validates each request with **openapi-core** directly: path, method, content
type, security and body of the operation. The cross-field rules the document states in
prose (``best_of`` greater than ``n``, not streamed; ``stream_options`` only with
``stream``) are judged here by their own predicates, each only when the document's text
says it.

Each request becomes one JSONL line: method, path, headers (``Authorization`` left out:
only whether one was sent), the body, what the suite meant by it (the
``X-Conformance-Case`` header, see conformance/judging/wire/case.py), openapi-core's verdict with the
failing instance and schema paths, the prose rules broken, and the status answered.

Answers: a body the document rejects (with acceptable credentials) gets a 400 in the
flavor's error envelope; everything else is answered by the reference target, so a run
against it proceeds as against the embedded target.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import secrets
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from openapi_core import Config, OpenAPI
from openapi_core.deserializing.media_types.exceptions import MediaTypeDeserializeError
from openapi_core.templating.media_types.exceptions import MediaTypeNotFound
from openapi_core.testing import MockRequest
from openapi_core.validation.request.exceptions import (
    MissingRequiredRequestBody,
    RequestBodyValidationError,
    SecurityValidationError,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conformance.reference.flavors import FLAVORS, ApiError, dumps, envelope
from conformance.reference.server import ReferenceServer, serve_until_signalled

CASE_HEADER = "x-conformance-case"
OPERATION = "/v1/completions"

# -- the document, with the request-side errata as specs/README.md documents them ----------


def _mappings(node: Any) -> Iterator[dict[str, Any]]:
    # conformance.judging.document.spec has the same walker; this module stays apart from the suite's
    # spec code on purpose (it is the independent side of the proof).
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _mappings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _mappings(value)


def _deref(document: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _nullable_to_null(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable_to_null(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable_to_null(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is not True:
        return out
    # The default belongs to the property, which may be null, not to its non-null branch.
    outer = {"default": out.pop("default")} if "default" in out else {}
    return {**outer, "anyOf": [{"type": "null"}, out]}


def with_errata(document: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``document`` with the documented request-side errata applied; their ids.

    1. object-type-beside-string-array-anyof: ``type: object`` beside an anyOf/oneOf whose
       branches are all strings or arrays is dropped (as written no value satisfies it).
    4. nullable-in-openapi-3.1: in a 3.1 document ``nullable: true`` means "null too".
    6. null-default-on-object-schema: ``default: null`` on an object-typed schema is
       dropped (openapi-spec-validator refuses the document for it).
    Also, not an erratum: the servers become ``/``, since this target is not the vendor's host.
    """
    doc = copy.deepcopy(document)
    applied: list[str] = []
    for node in list(_mappings(doc)):
        branches = node.get("anyOf") or node.get("oneOf") or []
        kinds = [(_deref(doc, b) or {}).get("type") for b in branches]
        if node.get("type") == "object" and kinds and set(kinds) <= {"string", "array"}:
            del node["type"]
            applied.append("object-type-beside-string-array-anyof")
        if node.get("type") == "object" and "default" in node and node["default"] is None:
            del node["default"]
            applied.append("null-default-on-object-schema")
    if str(doc.get("openapi", "")).startswith("3.1") and any(
        n.get("nullable") is True for n in _mappings(doc)
    ):
        doc = _nullable_to_null(doc)
        applied.append("nullable-in-openapi-3.1")
    doc["servers"] = [{"url": "/"}]
    return doc, sorted(set(applied))


# -- judging one request --------------------------------------------------------------------


def _leaves(error: Any) -> list[dict[str, Any]]:
    """The innermost keyword failures of a jsonschema error (inside anyOf/oneOf too)."""
    context = list(getattr(error, "context", None) or [])
    if not context:
        return [{"path": list(error.absolute_path), "keyword": str(error.validator)}]
    return [leaf for sub in context for leaf in _leaves(sub)]


def _schema_error(error: Any) -> dict[str, Any]:
    return {
        "path": list(error.absolute_path),
        "schema_path": "/".join(str(p) for p in error.absolute_schema_path),
        "keyword": str(error.validator),
        "missing": list(error.validator_value) if error.validator == "required" else None,
        "leaves": _leaves(error),
        "message": error.message[:200],
    }


def _kind(error: Exception) -> str:
    """security, body-missing, media-type, body-not-json, body (schema errors) or operation."""
    if isinstance(error, SecurityValidationError):
        return "security"
    if isinstance(error, MissingRequiredRequestBody):
        return "body-missing"
    if isinstance(error.__cause__, MediaTypeNotFound):
        return "media-type"
    if isinstance(error.__cause__, MediaTypeDeserializeError):
        return "body-not-json"
    if isinstance(error, RequestBodyValidationError):
        return "body" if _schema_errors(error) else "body-not-json"
    return "operation"


def _schema_errors(error: Exception) -> list[Any]:
    cause = error.__cause__
    return list(getattr(cause, "schema_errors", None) or getattr(error, "schema_errors", []) or [])


class Judge:
    """openapi-core's judgement of requests to ``POST /v1/completions`` under one document."""

    def __init__(self, path: Path) -> None:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        self.document, self.errata = with_errata(raw)
        # The document itself is not judged here (a tightened copy may leave a `default`
        # outside its new bounds); only requests are.
        self.api = OpenAPI.from_dict(self.document, config=Config(spec_validator_cls=None))
        content = self.document["paths"][OPERATION]["post"]["requestBody"]["content"]
        self.media_type: str = next(iter(content))
        self.text_rules = _stated_text_rules(self.document)

    def judge(self, method: str, path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        request = MockRequest(
            "http://target",
            method.lower(),
            path,
            headers=headers,
            data=body,
            content_type=headers.get("content-type", ""),
        )
        errors = [
            {
                "kind": _kind(error),
                "error": type(error).__name__,
                "schema_errors": [_schema_error(e) for e in _schema_errors(error)],
            }
            for error in self.api.iter_request_errors(request)
        ]
        broken = _text_rules_broken(self.text_rules, _json(body))
        return {"valid": not errors and not broken, "errors": errors, "text_rules": broken}


# The cross-field rules a document may state in prose: rule -> (field, words that state it).
TEXT_RULES: dict[str, tuple[str, re.Pattern[str]]] = {
    "best_of-greater-than-n": ("best_of", re.compile(r"greater than\s+`?n`?", re.I)),
    "best_of-not-streamed": ("best_of", re.compile(r"cannot be streamed", re.I)),
    "stream_options-only-with-stream": (
        "stream_options",
        re.compile(r"only set this when.*`?stream", re.I),
    ),
}


def _stated_text_rules(document: dict[str, Any]) -> list[str]:
    operation = document["paths"][OPERATION]["post"]
    content = operation["requestBody"]["content"]
    schema = _deref(document, next(iter(content.values()))["schema"])
    props = {k: _deref(document, v) for k, v in (schema.get("properties") or {}).items()}
    return [
        rule
        for rule, (field, words) in TEXT_RULES.items()
        if field in props and words.search(json.dumps(props[field]))
    ]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_rules_broken(stated: list[str], body: Any) -> list[str]:
    """The stated prose rules ``body`` breaks (fields of the wrong type are the schema's)."""
    if not isinstance(body, dict):
        return []
    best_of = _int(body.get("best_of"))
    n = 1 if body.get("n") is None else _int(body["n"])  # the documents' default n is 1
    streamed = body.get("stream") is True
    broken = {
        "best_of-greater-than-n": best_of is not None and n is not None and best_of <= n,
        "best_of-not-streamed": body.get("best_of") is not None and streamed,
        "stream_options-only-with-stream": body.get("stream_options") is not None and not streamed,
    }
    return [rule for rule in stated if broken[rule]]


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def meant(header: str | None) -> dict[str, Any]:
    """What the suite meant by a request, from its ``X-Conformance-Case`` header."""
    if not header:
        return {"mode": None, "breaks": None}
    mode, _, rest = header.partition(";")
    breaks = None
    for part in rest.split(";"):
        key, _, value = part.strip().partition("=")
        if key == "breaks":
            breaks = unquote(value)
    return {"mode": mode.strip(), "breaks": breaks}


# -- the recorder in front of the reference target ------------------------------------------


class RequestLog:
    """ASGI middleware: judge and record each request, then answer it (see the module doc)."""

    def __init__(self, app: ASGIApp, judge: Judge, log_path: Path, flavor: str) -> None:
        self.app = app
        self.judge = judge
        self.log_path = log_path
        self.flavor = FLAVORS[flavor]
        self.lock = threading.Lock()
        self.seq = 0
        log_path.write_text("", encoding="utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False) and message["type"] == "http.request"
        body = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        verdict = self.judge.judge(scope["method"], scope["path"], headers, body)
        entry = {
            "method": scope["method"],
            "path": scope["path"],
            "headers": {k: v for k, v in headers.items() if k != "authorization"},
            "auth": "sent" if "authorization" in headers else "none",
            "case": meant(headers.get(CASE_HEADER)),
            "body": _json(body) if _json(body) is not None else body.decode("utf-8", "replace"),
            **verdict,
        }
        kinds = {e["kind"] for e in verdict["errors"]}
        refuse = scope["path"] == OPERATION and "security" not in kinds and not verdict["valid"]

        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        async def recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._write({**entry, "status": message["status"]})
            await send(message)

        if refuse:
            await self._refuse(verdict, recorded)
        else:
            await self.app(scope, replay, recorded)

    async def _refuse(self, verdict: dict[str, Any], send: Send) -> None:
        fields = [
            str(e["path"][0]) if e["path"] else "body"
            for err in verdict["errors"]
            for e in err["schema_errors"]
        ] + [rule.split("-")[0] for rule in verdict["text_rules"]]
        error = ApiError(
            400,
            "The request does not match the API's schema.",
            code="invalid_request",
            origin="invalid",
            param=fields[0] if fields else None,
        )
        headers = [(b"content-type", self.flavor.json_type.encode())]
        if self.flavor.request_id_header:
            value = "req_" + secrets.token_hex(12)
            headers.append((self.flavor.request_id_header.lower().encode(), value.encode()))
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": dumps(envelope(self.flavor, error))})

    def _write(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.seq += 1
            line = json.dumps({"seq": self.seq, **entry}, ensure_ascii=False, default=str)
            with self.log_path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")


def logging_target(
    spec_path: Path,
    log_path: Path,
    *,
    flavor: str = "aihubmix",
    api_key: str | None = None,
    models: tuple[str, ...] = ("reference-model",),
    port: int = 0,
) -> ReferenceServer:
    """A ReferenceServer (not started) whose app is wrapped by :class:`RequestLog`."""
    server = ReferenceServer(flavor, api_key=api_key, models=models, port=port)
    server.app = RequestLog(server.app, Judge(spec_path), log_path, flavor)  # type: ignore[assignment]
    return server


def read_log(log_path: Path) -> list[dict[str, Any]]:
    """The entries of a request log, in the order they were answered."""
    # Split on newlines only: str.splitlines would also split at a U+2028 inside a prompt.
    lines = log_path.read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/request_log.py", description=__doc__)
    parser.add_argument("--spec", required=True, type=Path, help="the OpenAPI document to judge by")
    parser.add_argument("--log", required=True, type=Path, help="the JSONL file to write")
    parser.add_argument("--flavor", choices=sorted(FLAVORS), default="aihubmix")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key")
    parser.add_argument("--model", action="append")
    args = parser.parse_args(argv)
    try:
        server = logging_target(
            args.spec,
            args.log,
            flavor=args.flavor,
            api_key=args.api_key,
            models=tuple(args.model or ("reference-model",)),
            port=args.port,
        )
        url = server.start()
    except Exception as exc:  # one line, no traceback: bad input or a port in use
        print(f"ERROR: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 4
    serve_until_signalled(server, f"logging target at {url}/v1, log: {args.log} (Ctrl-C stops it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
