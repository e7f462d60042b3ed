"""The reference target: an OpenAI-compatible ``POST /v1/completions`` server.

It behaves the way a careful provider would, in one of two flavors that follow the two
vendored specs (``aihubmix``: OpenAI's shapes; ``nscale``: its own error envelope, media
types and ``INFERENCE-ID`` header, and optional fields omitted rather than null). This
module is routing and middleware; the work is done by one module per job:

- ``validation``: the request against the flavor's spec (schema, cross-field rules, limits);
- ``shaping``: generate with the fake ``model``, shape the JSON body or stream payloads;
- ``framing``: SSE events and their pacing;
- ``faults`` (``registry``, ``faults_serving``, ``faults_content``, ``faults_stream``,
  ``faults_request``): named misbehaviours, transformers folded in at fixed stages; with
  no fault switched on they change nothing.

A completion request flows: auth → admit (rate-limit faults) → validate → model → request
faults → latency → body or stream → response head.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conformance.reference.faults import activate
from conformance.reference.flavors import (
    FLAVORS,
    ApiError,
    ErrorReply,
    Flavor,
    Head,
    dumps,
    envelope,
)
from conformance.reference.framing import Framing, Pacing, emit, frame
from conformance.reference.registry import ActiveFaults
from conformance.reference.shaping import completion_body, stream_items
from conformance.reference.validation import (
    CONTEXT_LENGTH,
    CompletionRequest,
    parse_request,
    spec_for,
)

__all__ = [
    "CONTEXT_LENGTH",
    "FLAVORS",
    "ApiError",
    "CompletionRequest",
    "create_app",
    "parse_request",
]


class _Target:
    """One app's settings, plus the request counter the rate-limit faults use."""

    def __init__(
        self,
        flavor: Flavor,
        api_key: str | None,
        models: tuple[str, ...],
        faults: ActiveFaults,
        pacing: Pacing,
    ) -> None:
        self.flavor = flavor
        self.api_key = api_key
        self.models = models
        self.faults = faults
        self.pacing = faults.fold("pacing", pacing)
        self.framing = faults.fold("framing", Framing())
        self.completion_requests = 0
        self.started = int(time.time())

    def refused(self, error: ApiError) -> None:
        """Raise the refusal, as the faults' ``refusal`` stage leaves it (None: go on)."""
        answer = self.faults.fold("refusal", error)
        if answer is not None:
            raise answer


def _target(request: Request) -> _Target:
    target: _Target = request.app.state.target
    return target


def _error_response(target: _Target, error: ApiError) -> Response:
    """Render an ``ApiError`` in the flavor's envelope (as the ``error-reply`` faults leave it)."""
    reply = ErrorReply(
        error.status, envelope(target.flavor, error), target.flavor.json_type, error.message
    )
    reply = target.faults.fold("error-reply", reply)
    return Response(
        dumps(reply.payload),
        status_code=reply.status,
        media_type=reply.media_type,
        headers=error.headers,
    )


def _auth_error(api_key: str | None, header: str | None) -> ApiError | None:
    """Bearer auth when an API key is configured: the refusal, or None."""
    if api_key is None:
        return None
    challenge = {"WWW-Authenticate": "Bearer"}
    if header is None:
        return ApiError(
            401,
            "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
            code="missing_api_key",
            origin="auth",
            type_="authentication_error",
            headers=challenge,
        )
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return ApiError(
            401,
            "Malformed Authorization header: expected 'Bearer <key>'.",
            code="invalid_authorization_header",
            origin="auth",
            type_="authentication_error",
            headers=challenge,
        )
    if not secrets.compare_digest(token.encode(), api_key.encode()):
        return ApiError(
            401,
            "Incorrect API key provided.",
            code="invalid_api_key",
            origin="auth",
            type_="authentication_error",
            headers=challenge,
        )
    return None


def _check_auth(target: _Target, request: Request) -> None:
    error = _auth_error(target.api_key, request.headers.get("authorization"))
    if error is not None:
        target.refused(error)


def _check_model(target: _Target, request: CompletionRequest) -> None:
    if request.model not in target.models:
        target.refused(
            ApiError(
                404,
                f"The model '{request.model}' does not exist or you do not have access to it.",
                code="model_not_found",
                origin="model",
                param="model",
            )
        )


def _json_response(target: _Target, request: CompletionRequest) -> Response:
    """A non-streamed completion."""
    body = completion_body(target.flavor, request, target.faults)
    head = target.faults.fold("head", Head(200, target.flavor.json_type, streamed=False))
    return Response(
        dumps(body), status_code=head.status, media_type=head.media_type, headers=dict(head.headers)
    )


def _stream_response(target: _Target, request: CompletionRequest) -> Response:
    """A streamed completion."""
    events = frame(target.framing, stream_items(target.flavor, request, target.faults))
    head = target.faults.fold("head", Head(200, target.flavor.sse_type, streamed=True))
    # Set content-type as a header: media_type= would make Starlette add a charset.
    headers = {
        "content-type": head.media_type,
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
    }
    return StreamingResponse(emit(target.pacing, events), status_code=head.status, headers=headers)


async def _completions(request: Request) -> Response:
    """``POST /v1/completions``."""
    target = _target(request)
    try:
        _check_auth(target, request)
        target.completion_requests += 1
        limited = target.faults.first("admit", target.completion_requests)
        if limited is not None:
            raise limited
        parsed = parse_request(
            await request.body(),
            target.flavor.name,
            default_model=target.models[0],
            refuse=lambda error: target.faults.fold("refusal", error),
        )
        _check_model(target, parsed)
        declined = target.faults.first("request", parsed) or target.faults.first(
            "remembered", parsed, target.faults.memory
        )
        if declined is not None:
            raise declined
        parsed = target.faults.fold("parsed", parsed)
    except ApiError as error:
        return _error_response(target, error)
    if target.pacing.first_byte:
        await asyncio.sleep(target.pacing.first_byte)
    if parsed.stream:
        return _stream_response(target, parsed)
    return _json_response(target, parsed)


def _model_card(target: _Target, name: str) -> dict[str, Any]:
    """A model object; ``max_model_len`` advertises the context window, as vLLM does."""
    card = {
        "id": name,
        "object": "model",
        "created": target.started,
        "owned_by": "reference",
        "max_model_len": CONTEXT_LENGTH,
    }
    return target.faults.fold("model-card", card)


def _json(target: _Target, body: Any) -> Response:
    return Response(dumps(body), media_type=target.flavor.json_type)


async def _list_models(request: Request) -> Response:
    """``GET /v1/models``."""
    target = _target(request)
    try:
        _check_auth(target, request)
    except ApiError as error:
        return _error_response(target, error)
    return _json(
        target, {"object": "list", "data": [_model_card(target, m) for m in target.models]}
    )


async def _document(request: Request) -> Response:
    """``GET /openapi.json``: the document this target follows, as FastAPI servers publish
    theirs (no credentials needed; a large one in the slimmed form the suite reads)."""
    import json

    document = spec_for(_target(request).flavor.name).document
    body = json.dumps(document, default=str, ensure_ascii=False).encode()
    return Response(body, media_type="application/json")


async def _get_model(request: Request) -> Response:
    """``GET /v1/models/{model}``."""
    target = _target(request)
    name = request.path_params["model"]
    try:
        _check_auth(target, request)
        if name not in target.models:
            raise ApiError(
                404,
                f"The model '{name}' does not exist.",
                code="model_not_found",
                origin="route",
                param="model",
            )
    except ApiError as error:
        return _error_response(target, error)
    return _json(target, _model_card(target, name))


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths and wrong methods, in the flavor's envelope."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    error = ApiError(
        exc.status_code, str(exc.detail), code=code, origin="route", headers=exc.headers
    )
    return _error_response(_target(request), error)


async def _server_error(request: Request, exc: Exception) -> Response:
    """A bug in the target: still answer with an envelope and the request-id header."""
    target = _target(request)
    response = _error_response(
        target,
        ApiError(
            500,
            "The server had an error while processing your request.",
            code="internal_error",
            origin="server",
            type_="server_error",
        ),
    )
    header = target.faults.fold("request-id", target.flavor.request_id_header)
    if header is not None:
        # This handler runs outside the middleware stack, so add the header here.
        response.headers[header] = "req_" + secrets.token_hex(12)
    return response


class _RequestIdMiddleware:
    """Adds the flavor's request-id header to every response."""

    def __init__(self, app: ASGIApp, header: str | None) -> None:
        self.app = app
        self.header = header.lower().encode() if header else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.header is None:
            await self.app(scope, receive, send)
            return
        value = ("req_" + secrets.token_hex(12)).encode()
        header = self.header

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (header, value)]}
            await send(message)

        await self.app(scope, receive, send_with_id)


def create_app(
    flavor: str = "aihubmix",
    *,
    api_key: str | None = None,
    models: tuple[str, ...] = ("reference-model",),
    faults: frozenset[str] = frozenset(),
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> Starlette:
    """Build the reference target as a Starlette app.

    ``flavor`` is ``"aihubmix"``, ``"openai"`` or ``"nscale"``; ``api_key`` switches bearer auth on;
    ``faults`` names entries of ``faults.FAULTS`` (ValueError for unknown ones). ``delay``
    is the latency, in seconds, before the first byte of each answered completion, and
    ``chunk_delay`` the gap between stream events.
    """
    if flavor not in FLAVORS:
        raise ValueError(f"unknown flavor {flavor!r}; valid flavors: {', '.join(sorted(FLAVORS))}")
    if not models:
        raise ValueError("at least one model name is required")
    for name, value in (("delay", delay), ("chunk_delay", chunk_delay)):
        if not 0 <= value < 3600:
            raise ValueError(f"{name} must be between 0 and 3600 seconds, not {value!r}")
    active = activate(faults)
    _ = spec_for(flavor).validators  # load and compile the spec now, not on a request
    wire = FLAVORS[flavor]
    header = active.fold("request-id", wire.request_id_header)
    app = Starlette(
        routes=[
            Route("/v1/completions", _completions, methods=["POST"]),
            Route("/v1/models", _list_models, methods=["GET"]),
            Route("/openapi.json", _document, methods=["GET"]),
            Route("/v1/models/{model:path}", _get_model, methods=["GET"]),
        ],
        middleware=[Middleware(_RequestIdMiddleware, header=header)],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    pacing = Pacing(first_byte=float(delay), between=float(chunk_delay))
    app.state.target = _Target(wire, api_key, tuple(models), active, pacing)
    return app
