"""The contract: one OpenAPI document, loaded, resolved and corrected by errata.

A :class:`Spec` is built once per run from a vendored document, a path or a URL
(conformance/judging/document/spec_source.py reads and caches it; a URL's bytes are
fetched by conformance/run/fetch.py, the core speaks no HTTP). It finds the completions operation
where OpenAPI puts it, a server URL's path followed by a path key (``/v1`` +
``/completions`` in OpenAI's document), inlines the ``$ref`` of that operation only, and
exposes what the strategies and checks need: the request schema, the JSON and
event-stream response schemas, the error schema, declared status codes, required
response headers and the security scheme. Validators are compiled once here, never per
response.

The vendored documents have real defects (see specs/README.md). Each erratum is named
after its defect (conformance/judging/document/errata.py), detected in the document itself (so a
spec given by path gets them too) and applied only where the defect is present, as a
schema transformation (conformance/judging/document/spec_errata.py); it is recorded in
``Spec.errata``. The suite's own interpretations are policies
(conformance/judging/document/policies.py, ``Spec.policies``). ``strict=True`` (``--strict-spec``) switches
both off: the document as written. Conventions (``Spec.conventions``: FastAPI's raw
stream schema, its automatic 422, a document listing no 4xx) are how a document's
tooling says things; they correct nothing and stay on.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from jsonschema.exceptions import ValidationError, best_match

from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.document.errata import (
    EVENT_STREAM_SCHEMA_IS_STRING,
    FASTAPI_VALIDATION_422,
    NO_CLIENT_ERRORS_DECLARED,
    Convention,
    Erratum,
)
from conformance.judging.document.policies import REQUEST_ID_HEADER, Policy, active_policies
from conformance.judging.document.quick_schema import compile_validator
from conformance.judging.document.spec_errata import apply_errata
from conformance.judging.document.spec_source import (
    Source,
    SourceError,
    file_source,
    is_url,
    parse,
)
from conformance.judging.exceptions import ConformanceError

OPERATION_PATH = "/v1/completions"
BUILTIN_SPECS = ("nscale", "aihubmix", "openai")
#: ``--spec target``: the document the target publishes (run/fetch.py's TARGET_DOCUMENT_PATHS).
TARGET_SPEC = "target"

Schema = dict[str, Any]


class SpecError(ConformanceError):
    """The spec cannot be loaded or does not describe ``POST /v1/completions``."""


def specs_dir() -> Path:
    """Where the vendored specs live: inside the installed package, else the checkout."""
    packaged = Path(str(resources.files("conformance"))) / "_specs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "specs"


def read_source(name_or_path: str) -> Source:
    """The document's bytes: a vendored name or a path (the core speaks no HTTP: a URL or
    ``target`` is fetched by conformance/run/fetch.py, whose ``load_spec`` is the public one)."""
    try:
        if name_or_path in BUILTIN_SPECS:
            return file_source(specs_dir() / f"{name_or_path}.yaml", name_or_path)
        if name_or_path == TARGET_SPEC or is_url(name_or_path):
            raise SpecError(
                f"spec {name_or_path!r} is fetched over HTTP: load it with conformance.load_spec "
                "(conformance.run.fetch), not with the judge core's"
            )
        path = Path(name_or_path)
        if path.suffix not in (".yaml", ".yml", ".json") and not path.exists():
            raise SpecError(
                f"unknown spec {name_or_path!r}: use one of {', '.join(BUILTIN_SPECS)}, "
                f"{TARGET_SPEC}, a URL or the path of an OpenAPI document"
            )
        return file_source(path, path.stem)
    except SourceError as exc:
        raise SpecError(str(exc)) from None


def load_spec(
    name_or_path: str, *, strict: bool = False, contract: Contract = DEFAULT_CONTRACT
) -> Spec:
    """Load a vendored spec by name (``nscale``, ``aihubmix``, ``openai``) or any document
    by path, to be judged under ``contract`` (conformance/judging/document/contract.py).
    A URL or ``target``: ``conformance.load_spec`` (conformance/run/fetch.py)."""
    return spec_of(read_source(name_or_path), strict=strict, contract=contract)


def spec_of(source: Source, *, strict: bool = False, contract: Contract = DEFAULT_CONTRACT) -> Spec:
    """The Spec of a document's bytes, read from a file here or fetched (run/fetch.py)."""
    try:
        document = parse(source, slim_document)
    except SourceError as exc:
        raise SpecError(str(exc)) from None
    return Spec(
        name=source.name,
        path=source.path,
        document=document,
        strict=strict,
        contract=contract,
        origin=source.origin,
        sha256=source.sha256,
        base_url=source.url,
    )


def server_paths(document: Schema, base_url: str | None = None) -> list[str]:
    """The path of each server URL, in order (OpenAPI 3.0/3.1 Server Object).

    Variables take their defaults; a relative URL is relative to where the document was
    served (``base_url``), else to the host's root; no ``servers`` means ``/``. Paths are
    returned without a trailing slash (the root is ``""``), ready to prefix a path key.
    """
    servers = document.get("servers") or [{"url": "/"}]
    paths: list[str] = []
    for server in servers:
        if not isinstance(server, dict):
            continue
        url = str(server.get("url") or "/")
        for name, variable in (server.get("variables") or {}).items():
            default = (variable or {}).get("default", "") if isinstance(variable, dict) else ""
            url = url.replace("{" + str(name) + "}", str(default))
        path = urlsplit(urljoin(base_url or "http://host/", url)).path
        path = path.rstrip("/")
        if path not in paths:
            paths.append(path)
    return paths or [""]


def locate_operation(document: Schema, base_url: str | None = None) -> tuple[str, str]:
    """``(server path, path key)`` of the completions operation, or SpecError.

    The operation sits where a server path plus a path key make ``/v1/completions``
    (``/v1`` + ``/completions`` in OpenAI's document); failing that, the first POST path
    ending in ``/completions`` other than chat's, under the first server.
    """
    paths = document.get("paths") or {}
    posts = [str(k) for k, v in paths.items() if isinstance(v, dict) and "post" in v]
    servers = server_paths(document, base_url)
    for server in servers:
        for key in posts:
            if server + key == OPERATION_PATH:
                return server, key
    for key in posts:
        if key.endswith("/completions") and not key.endswith("/chat/completions"):
            return servers[0], key
    raise SpecError(f"the document has no POST {OPERATION_PATH} operation")


def slim_document(document: Schema) -> Schema:
    """What the suite reads of a large document: its completions operation with every
    ``$ref`` inlined, servers, security, the security schemes (cached by digest)."""
    server, key = locate_operation(document)
    del server  # the slim form keeps every server: the path is located again on load
    components = document.get("components") or {}
    return {
        "openapi": document.get("openapi"),
        "info": document.get("info") or {},
        "servers": document.get("servers") or [],
        **({"security": document["security"]} if "security" in document else {}),
        "paths": {key: {"post": resolve_refs(document["paths"][key]["post"], document)}},
        "components": {
            "securitySchemes": resolve_refs(components.get("securitySchemes") or {}, document)
        },
    }


def resolve_refs(node: Any, root: Any = None) -> Any:
    """Return a copy of ``node`` with every local ``$ref`` (into ``root``, by default the
    node itself) inlined; cycles refused."""
    document = node if root is None else root

    def lookup(ref: str) -> Any:
        if not ref.startswith("#/"):
            raise SpecError(f"only local $refs are supported, found {ref!r}")
        target: Any = document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise SpecError(f"$ref {ref!r} points nowhere")
            target = target[part]
        return target

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                ref = node["$ref"]
                if ref in seen:
                    raise SpecError(f"$ref cycle through {ref!r}")
                target = walk(lookup(ref), (*seen, ref))
                siblings = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
                return {**target, **siblings} if siblings else target
            return {k: walk(v, seen) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    return walk(node, ())


def _first_schema(response: Any) -> Schema | None:
    """The schema of a response's first media type that has one."""
    for media in (response or {}).get("content") or {}:
        schema = (response["content"][media] or {}).get("schema")
        if isinstance(schema, dict) and schema:
            return schema
    return None


def _is_fastapi_validation_error(schema: Schema) -> bool:
    """FastAPI's HTTPValidationError: ``{"detail": [{"loc", "msg", "type"}, ...]}``."""
    detail = (schema.get("properties") or {}).get("detail") or {}
    items = detail.get("items") or {}
    fields = set(items.get("required") or ()) | set(items.get("properties") or ())
    return schema.get("title") == "HTTPValidationError" or {"loc", "msg", "type"} <= fields


class Spec:
    """One OpenAPI document as the contract for ``POST /v1/completions``."""

    def __init__(
        self,
        *,
        name: str,
        path: Path,
        document: Schema,
        strict: bool = False,
        contract: Contract = DEFAULT_CONTRACT,
        origin: str = "",
        sha256: str = "",
        base_url: str | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.document = document
        self.strict = strict
        #: How the document binds the target (conformance/judging/document/contract.py): it sets the level
        #: of every requirement resting on OpenAI's documented meaning of a field.
        self.contract = Contract(contract)
        self.origin = origin or str(path)
        self.sha256 = sha256
        version = str(document.get("openapi", ""))
        if not re.match(r"3\.[01]\.", version):
            raise SpecError(
                f"spec {self.origin!r} is not OpenAPI 3.0 or 3.1 (openapi: {version!r})"
            )
        self.openapi_version = version
        self.is_31 = version.startswith("3.1")
        info = document.get("info") or {}
        self.title = str(info.get("title", name))
        self.version = str(info.get("version", ""))
        try:
            self.server_path, self.path_key = locate_operation(document, base_url)
        except SpecError:
            raise SpecError(
                f"spec {self.origin!r} has no POST {OPERATION_PATH} operation"
            ) from None
        #: Where the operation is on the target: the server's path, then the path key.
        self.operation_path = self.server_path + self.path_key
        #: The operation path without its last segment ("/v1"): a --target-url ending in
        #: it is accepted as the base URL.
        self.path_prefix = self.operation_path.rsplit("/", 1)[0]
        operation = resolve_refs(document["paths"][self.path_key]["post"], document)
        if not isinstance(operation, dict):
            raise SpecError(f"spec {self.origin!r} has no POST {OPERATION_PATH} operation")
        self.operation: Schema = operation
        resolved = {
            "components": {
                "securitySchemes": resolve_refs(
                    (document.get("components") or {}).get("securitySchemes") or {}, document
                )
            }
        }
        self.errata: list[Erratum] = []
        self.policies: tuple[Policy, ...] = active_policies(strict=strict)
        self._build(resolved)

    # -- construction -----------------------------------------------------------------

    def _build(self, resolved: Schema) -> None:
        op = self.operation
        content = (op.get("requestBody") or {}).get("content") or {}
        self.request_media_type = next(iter(content), "application/json")
        self.request_schema: Schema = copy.deepcopy(
            (content.get(self.request_media_type) or {}).get("schema") or {}
        )
        responses: dict[str, Any] = {str(k): v for k, v in (op.get("responses") or {}).items()}
        self.declared_statuses = tuple(responses)
        ok = responses.get("200") or {}
        ok_content = ok.get("content") or {}
        self.json_media_types = tuple(m for m in ok_content if "json" in m)
        json_media = self.json_media_types[0] if self.json_media_types else None
        self.response_schema: Schema | None = copy.deepcopy(
            (ok_content.get(json_media) or {}).get("schema") if json_media else None
        )
        stream_media = next((m for m in ok_content if m.startswith("text/event-stream")), None)
        self.stream_media_type: str | None = stream_media
        stream_schema = (ok_content.get(stream_media) or {}).get("schema") if stream_media else None
        self.stream_chunk_schema: Schema | None = copy.deepcopy(stream_schema)
        #: How this document says things (conformance/judging/document/errata.py CONVENTIONS); kept under
        #: --strict-spec, since none of them corrects the document.
        self.conventions: list[Convention] = []
        if isinstance(stream_schema, dict) and stream_schema.get("type") == "string":
            # FastAPI's raw stream: each event is judged by the 200 JSON schema.
            self.stream_chunk_schema = copy.deepcopy(self.response_schema)
            self.conventions.append(EVENT_STREAM_SCHEMA_IS_STRING)
        self.required_headers = tuple(
            name for name, h in (ok.get("headers") or {}).items() if (h or {}).get("required")
        )
        self.validation_error_schema: Schema | None = None
        schema_422 = _first_schema(responses.get("422"))
        if schema_422 is not None and _is_fastapi_validation_error(schema_422):
            self.validation_error_schema = copy.deepcopy(schema_422)
            self.conventions.append(FASTAPI_VALIDATION_422)
        self.error_schema: Schema | None = None
        self.error_media_types: dict[str, tuple[str, ...]] = {}
        for status, response in responses.items():
            self.error_media_types[status] = tuple((response or {}).get("content") or {})
            if status == "422" and self.validation_error_schema is not None:
                continue  # FastAPI's own answer, not the API's error envelope
            if status != "200" and self.error_schema is None:
                schema = _first_schema(response)
                if schema is not None:
                    self.error_schema = copy.deepcopy(schema)
        #: The 4xx statuses the document lists as its client errors: not 429 (rate
        #: limiting) nor FastAPI's automatic 422. ``default`` covers every status.
        self.client_error_statuses = tuple(
            s
            for s in self.declared_statuses
            if (s == "default" or s[0] == "4")
            and s != "429"
            and not (s == "422" and self.validation_error_schema is not None)
        )
        if not self.client_error_statuses:
            self.conventions.append(NO_CLIENT_ERRORS_DECLARED)
        self.security_schemes: dict[str, Any] = (resolved.get("components") or {}).get(
            "securitySchemes"
        ) or {}
        self.bearer_auth = any(
            s.get("type") == "http" and str(s.get("scheme", "")).lower() == "bearer"
            for s in self.security_schemes.values()
        )
        self.request_id_header = self._find_request_id_header()
        apply_errata(self)

    def _find_request_id_header(self) -> str | None:
        """A request-id header named in the spec text (AIHubMix names ``X-Request-Id``).

        Policy ``request-id-header-from-text``: a sentence, not a schema, names it.
        """
        if not self.uses(REQUEST_ID_HEADER.id):
            return None
        text = json.dumps(self.error_schema or {})
        match = re.search(r"`(X-Request-Id|[A-Za-z-]*Request-Id)` response header", text, re.I)
        return match.group(1) if match else None

    def uses(self, rule_id: str) -> bool:
        """Whether the erratum or policy ``rule_id`` is in force for this spec."""
        return any(e.id == rule_id for e in self.errata) or any(
            p.id == rule_id for p in self.policies
        )

    # -- queries ------------------------------------------------------------------------

    @property
    def request_properties(self) -> dict[str, Schema]:
        props: dict[str, Schema] = self.request_schema.get("properties") or {}
        return props

    @property
    def declares_client_errors(self) -> bool:
        """Whether the document lists any 4xx of its own (convention no-client-errors-declared)."""
        return bool(self.client_error_statuses)

    def is_declared(self, status: int) -> bool:
        """Whether ``status`` is declared for the operation (``5XX`` ranges and default too)."""
        code = str(status)
        return (
            code in self.declared_statuses
            or f"{code[0]}XX" in self.declared_statuses
            or "default" in self.declared_statuses
        )

    def media_types_for(self, status: int) -> tuple[str, ...]:
        code = str(status)
        for key in (code, f"{code[0]}XX", "default"):
            if key in self.error_media_types:
                return self.error_media_types[key]
        return ()

    def _validator(self, schema: Schema | None) -> Any:
        return None if schema is None else compile_validator(schema, self.is_31)

    @cached_property
    def validators(self) -> dict[str, Any]:
        """Compiled validators by kind: request, response, chunk, error."""
        return {
            "request": self._validator(self.request_schema),
            "response": self._validator(self.response_schema),
            "chunk": self._validator(self.stream_chunk_schema),
            "error": self._validator(self.error_schema),
            "validation-error": self._validator(self.validation_error_schema),
        }

    def validate(self, kind: str, instance: Any) -> str | None:
        """Validate against the ``kind`` schema; return the most relevant problem or None."""
        validator = self.validators[kind]
        if validator is None:
            return None
        error = best_match(validator.iter_errors(instance))
        return None if error is None else describe(error)


def describe(error: ValidationError) -> str:
    """One line naming where a validation error is and what it says."""
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    return f"at body{where}: {message}"
