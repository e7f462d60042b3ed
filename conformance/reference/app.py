"""The reference target: an OpenAI-compatible ``POST /v1/completions`` server.

It behaves the way a careful provider would, in one of two flavors that follow the two
vendored specs (``aihubmix``: OpenAI's shapes; ``nscale``: its own error envelope, media
types and ``INFERENCE-ID`` header, and optional fields omitted rather than null). The
fake model in ``model.py`` does the generating; this module validates requests, shapes
responses and frames event streams.

A request flows one way: auth → rate-limit faults → parse and validate → model and
capability checks → generate (``_generate``) → shape (``_completion_body`` or
``_stream_items``) → fault hooks → serialize. Every fault of ``faults.FAULTS`` is a small
hook at one of these points, marked ``# fault:`` or registered in ``_BODY_FAULTS`` /
``_STREAM_FAULTS``; with no faults the hooks are inert.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import math
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conformance.reference import model
from conformance.reference.faults import check_faults
from conformance.reference.model import Completion, Prompt, Token

__all__ = [
    "CONTEXT_LENGTH",
    "FLAVORS",
    "ApiError",
    "CompletionRequest",
    "create_app",
    "parse_request",
]

#: Prompt tokens plus max_tokens may not exceed this, as on OpenAI.
CONTEXT_LENGTH: Final = 8192
#: Most completions (prompts x candidates) one request may ask for.
MAX_COMPLETIONS: Final = 2560
DEFAULT_MAX_TOKENS: Final = 16
SYSTEM_FINGERPRINT: Final = "fp_reference"
DONE: Final = "[DONE]"
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class Flavor:
    """What differs between the vendor specs the target can follow."""

    name: str
    json_type: str
    sse_type: str
    request_id_header: str
    #: Optional request fields may be null, meaning "the default" (AIHubMix's nullable).
    nullable: bool
    #: Enforce the numeric bounds the AIHubMix schema declares.
    schema_bounds: bool
    #: ``stream_options`` must carry ``include_usage`` (Nscale's schema requires it).
    include_usage_required: bool
    #: Omit logprobs / finish_reason / usage / param instead of sending null (Nscale's
    #: schema declares them non-nullable; omitting them is conformant).
    omit_nulls: bool


FLAVORS: Mapping[str, Flavor] = {
    "aihubmix": Flavor(
        name="aihubmix",
        json_type="application/json",
        sse_type="text/event-stream; charset=utf-8",
        request_id_header="X-Request-Id",
        nullable=True,
        schema_bounds=True,
        include_usage_required=False,
        omit_nulls=False,
    ),
    "nscale": Flavor(
        name="nscale",
        json_type="application/json; charset=utf-8",
        sse_type="text/event-stream",
        request_id_header="INFERENCE-ID",
        nullable=False,
        schema_bounds=False,
        include_usage_required=True,
        omit_nulls=True,
    ),
}


class ApiError(Exception):
    """A refusal, carrying what the error envelope and status line need."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        param: str | None = None,
        type_: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type_
        self.headers = dict(headers or {})


# --------------------------------------------------------------------------------------
# Request parsing and validation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """A validated completion request with every default filled in."""

    model: str
    prompts: tuple[Prompt, ...]
    token_prompt: bool
    max_tokens: int
    temperature: float
    top_p: float
    n: int
    best_of: int | None
    stream: bool
    include_usage: bool
    logprobs: int | None
    echo: bool
    stop: tuple[str, ...]
    seed: int | None
    suffix: str | None
    #: Fields the client sent with a non-null value.
    present: frozenset[str]


_MISSING: Final = object()


def _kind(value: Any) -> str:
    """The JSON type of a value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is_int(value: Any) -> bool:
    # bool is a subclass of int in Python, never in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def _type_error(name: str, expected: str, value: Any) -> ApiError:
    return ApiError(
        400,
        f"Invalid type for '{name}': expected {expected}, but got {_kind(value)}.",
        code="invalid_type",
        param=name,
    )


def _range_error(name: str, value: Any, lo: float | None, hi: float | None) -> ApiError:
    if lo is not None and hi is not None:
        bound = f"between {lo} and {hi}"
    elif lo is not None:
        bound = f"at least {lo}"
    else:
        bound = f"at most {hi}"
    return ApiError(
        400,
        f"Invalid value for '{name}': {value!r} is out of range; it must be {bound}.",
        code="invalid_value",
        param=name,
    )


class _Reader:
    """Reads one field at a time from a request body and validates it.

    In lenient mode (the ``accepts-invalid`` fault) a bad field falls back to its
    default instead of raising, so the request goes on to be answered 200.
    """

    def __init__(self, body: Mapping[str, Any], flavor: Flavor, *, lenient: bool) -> None:
        self.body = body
        self.flavor = flavor
        self.lenient = lenient

    def reject(self, error: ApiError) -> None:
        """Raise the error, unless the reader is lenient."""
        if not self.lenient:
            raise error

    def raw(self, name: str) -> Any:
        """The field's value, or ``_MISSING`` when absent or null-meaning-default."""
        value = self.body.get(name, _MISSING)
        if value is None:
            if not self.flavor.nullable:
                self.reject(_type_error(name, "a value (null is not allowed)", None))
            return _MISSING
        return value

    def integer(
        self, name: str, default: int | None, lo: int | None = None, hi: int | None = None
    ) -> int | None:
        """An integer field (JSON numbers with a fraction or booleans are refused)."""
        value = self.raw(name)
        if value is _MISSING:
            return default
        if not _is_int(value):
            self.reject(_type_error(name, "an integer", value))
            return default
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.reject(_range_error(name, value, lo, hi))
            return default
        return int(value)

    def number(
        self, name: str, default: float, lo: float | None = None, hi: float | None = None
    ) -> float:
        """A finite number field."""
        value = self.raw(name)
        if value is _MISSING:
            return default
        if not isinstance(value, int | float) or isinstance(value, bool):
            self.reject(_type_error(name, "a number", value))
            return default
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if (
            not math.isfinite(number)
            or (lo is not None and number < lo)
            or (hi is not None and number > hi)
        ):
            self.reject(_range_error(name, value, lo, hi))
            return default
        return number

    def boolean(self, name: str, default: bool) -> bool:
        """A boolean field."""
        value = self.raw(name)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.reject(_type_error(name, "a boolean", value))
            return default
        return value

    def string(self, name: str) -> str | None:
        """A string field."""
        value = self.raw(name)
        if value is _MISSING:
            return None
        if not isinstance(value, str):
            self.reject(_type_error(name, "a string", value))
            return None
        return value


def _parse_json(raw: bytes) -> Any:
    """Parse the body as strict JSON (no NaN or Infinity)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not valid JSON")

    try:
        return json.loads(raw, parse_constant=refuse)
    except (ValueError, RecursionError) as exc:
        raise ApiError(
            400,
            f"We could not parse the JSON body of your request ({exc}).",
            code="invalid_json",
        ) from exc


def _token_ids(reader: _Reader, ids: list[Any]) -> list[int]:
    """Validate one token-id prompt: integers in ``[0, VOCAB_SIZE)``."""
    out: list[int] = []
    for token in ids:
        if not _is_int(token):
            reader.reject(_type_error("prompt", "an array of integer token ids", token))
            continue
        if not 0 <= token < model.VOCAB_SIZE:
            reader.reject(
                ApiError(
                    400,
                    f"Invalid token id {token} in 'prompt': token ids must be in "
                    f"[0, {model.VOCAB_SIZE}).",
                    code="invalid_value",
                    param="prompt",
                )
            )
            token %= model.VOCAB_SIZE
        out.append(token)
    return out


def _prompts(reader: _Reader) -> tuple[tuple[Prompt, ...], bool]:
    """Parse ``prompt``: the prompts, and whether they were given as token ids."""
    fallback = (Prompt.from_text(""),), False
    value = reader.body.get("prompt", _MISSING)
    if value is _MISSING:
        reader.reject(
            ApiError(
                400,
                "You must provide a 'prompt' parameter.",
                code="missing_required_parameter",
                param="prompt",
            )
        )
        return fallback
    if value is None:
        if reader.flavor.nullable:
            return (Prompt.from_text(model.DEFAULT_PROMPT),), False
        reader.reject(_type_error("prompt", "a string or an array", None))
        return fallback
    if isinstance(value, str):
        return (Prompt.from_text(value),), False
    if not isinstance(value, list):
        reader.reject(_type_error("prompt", "a string or an array", value))
        return fallback
    if not value:
        reader.reject(
            ApiError(
                400, "'prompt' must not be an empty array.", code="invalid_value", param="prompt"
            )
        )
        return fallback
    if all(isinstance(p, str) for p in value):
        return tuple(Prompt.from_text(p) for p in value), False
    if all(_is_int(p) for p in value):
        return (Prompt.from_ids(_token_ids(reader, value)),), True
    if all(isinstance(p, list) for p in value):
        prompts = []
        for ids in value:
            if not ids:
                reader.reject(
                    ApiError(
                        400,
                        "Token-id prompts in 'prompt' must not be empty.",
                        code="invalid_value",
                        param="prompt",
                    )
                )
            prompts.append(Prompt.from_ids(_token_ids(reader, ids)))
        return tuple(prompts), True
    reader.reject(
        _type_error(
            "prompt", "a string, an array of strings, of token ids or of token-id arrays", value
        )
    )
    return fallback


def _stop(reader: _Reader) -> tuple[str, ...]:
    """Parse ``stop``: a string or an array of strings (1 to 4 under the AIHubMix schema)."""
    value = reader.raw("stop")
    if value is _MISSING:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        reader.reject(_type_error("stop", "a string or an array of strings", value))
        return ()
    if reader.flavor.schema_bounds and not 1 <= len(value) <= 4:
        reader.reject(
            ApiError(
                400,
                "'stop' must hold between 1 and 4 sequences.",
                code="invalid_value",
                param="stop",
            )
        )
        return tuple(value[:4])
    return tuple(value)


def _include_usage(reader: _Reader) -> bool:
    """Parse ``stream_options`` and return its ``include_usage``."""
    value = reader.raw("stream_options")
    if value is _MISSING:
        return False
    if not isinstance(value, dict):
        reader.reject(_type_error("stream_options", "an object", value))
        return False
    options = _Reader(value, reader.flavor, lenient=reader.lenient)
    if "include_usage" not in value and reader.flavor.include_usage_required:
        reader.reject(
            ApiError(
                400,
                "Missing required parameter: 'stream_options.include_usage'.",
                code="missing_required_parameter",
                param="stream_options.include_usage",
            )
        )
    try:
        include = options.boolean("include_usage", False)
        options.boolean("include_obfuscation", True)
    except ApiError as exc:
        exc.param = f"stream_options.{exc.param}"
        raise
    return include


def _logit_bias(reader: _Reader) -> None:
    """Validate ``logit_bias`` (accepted, and ignored by the fake model)."""
    value = reader.raw("logit_bias")
    if value is _MISSING:
        return
    if not isinstance(value, dict):
        reader.reject(_type_error("logit_bias", "an object", value))
        return
    # AIHubMix declares integer biases, Nscale numbers.
    integral = reader.flavor.schema_bounds
    for bias in value.values():
        numeric = _is_int(bias) or (
            not integral and isinstance(bias, float) and math.isfinite(bias)
        )
        if not numeric:
            reader.reject(
                _type_error(
                    "logit_bias",
                    "an object of integer biases" if integral else "an object of numbers",
                    bias,
                )
            )
            return


def _body_object(raw: bytes, *, lenient: bool) -> dict[str, Any]:
    """The request body, which must be a JSON object."""
    try:
        body = _parse_json(raw)
    except ApiError:
        if not lenient:
            raise
        return {}
    if not isinstance(body, dict):
        if not lenient:
            raise ApiError(
                400,
                f"The request body must be a JSON object, not {_kind(body)}.",
                code="invalid_type",
            )
        return {}
    return body


def _model_name(reader: _Reader, default: str) -> str:
    """The required ``model`` string."""
    value = reader.body.get("model", _MISSING)
    if isinstance(value, str):
        return value
    if value is _MISSING:
        reader.reject(
            ApiError(
                400,
                "You must provide a 'model' parameter.",
                code="missing_required_parameter",
                param="model",
            )
        )
    else:
        reader.reject(_type_error("model", "a string", value))
    return default


def _read_fields(reader: _Reader, default_model: str) -> CompletionRequest:
    """Read and type-check every field on its own, in a fixed order."""
    bounded = reader.flavor.schema_bounds
    model_name = _model_name(reader, default_model)
    prompts, token_prompt = _prompts(reader)
    max_tokens = reader.integer("max_tokens", DEFAULT_MAX_TOKENS, lo=0)
    # Temperature below 0 and top_p outside [0, 1] mean nothing in any flavor.
    temperature = reader.number("temperature", 1.0, lo=0.0, hi=2.0 if bounded else None)
    top_p = reader.number("top_p", 1.0, lo=0.0, hi=1.0)
    for penalty in ("frequency_penalty", "presence_penalty"):
        reader.number(penalty, 0.0, lo=-2.0 if bounded else None, hi=2.0 if bounded else None)
    n = reader.integer("n", 1, lo=1, hi=128)
    # Above 5, logprobs is a capability limit in both flavors (the AIHubMix maximum).
    logprobs = reader.integer("logprobs", None, lo=0, hi=5)
    best_of = reader.integer("best_of", None, lo=0, hi=20)
    seed = reader.integer("seed", None, lo=_INT64[0], hi=_INT64[1])
    stream = reader.boolean("stream", False)
    echo = reader.boolean("echo", False)
    suffix = reader.string("suffix")
    if bounded:
        reader.string("user")  # Nscale does not declare it: there it is an unknown field
    stop = _stop(reader)
    _logit_bias(reader)
    include_usage = _include_usage(reader)
    assert max_tokens is not None and n is not None  # they have non-None defaults
    return CompletionRequest(
        model=model_name,
        prompts=prompts,
        token_prompt=token_prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        n=n,
        best_of=best_of,
        stream=stream,
        include_usage=include_usage,
        logprobs=logprobs,
        echo=echo,
        stop=stop,
        seed=seed,
        suffix=suffix,
        present=frozenset(k for k, v in reader.body.items() if v is not None),
    )


def _check_cross_fields(reader: _Reader, request: CompletionRequest) -> CompletionRequest:
    """The rules the spec text states across fields (lenient mode repairs instead)."""
    best_of, n = request.best_of, request.n
    if best_of is not None and best_of < n:
        reader.reject(
            ApiError(
                400,
                f"'best_of' ({best_of}) must be at least 'n' ({n}).",
                code="invalid_value",
                param="best_of",
            )
        )
        request = replace(request, best_of=n)
    if request.stream and request.best_of is not None and request.best_of > 1:
        reader.reject(
            ApiError(
                400,
                "'best_of' greater than 1 cannot be used with 'stream'.",
                code="invalid_value",
                param="best_of",
            )
        )
        request = replace(request, best_of=None)
    if reader.body.get("stream_options") is not None and not request.stream:
        reader.reject(
            ApiError(
                400,
                "'stream_options' is only allowed when 'stream' is true.",
                code="invalid_value",
                param="stream_options",
            )
        )
        request = replace(request, include_usage=False)
    return request


def _check_limits(reader: _Reader, request: CompletionRequest) -> CompletionRequest:
    """The model's context length and the most completions one request may ask for."""
    longest = max(len(p.tokens) for p in request.prompts)
    if longest + request.max_tokens > CONTEXT_LENGTH:
        reader.reject(
            ApiError(
                400,
                f"This model's maximum context length is {CONTEXT_LENGTH} tokens, but you requested "
                f"{longest + request.max_tokens} ({longest} in the prompt, {request.max_tokens} "
                "for the completion).",
                code="context_length_exceeded",
                param="max_tokens" if "max_tokens" in reader.body else "prompt",
            )
        )
        request = replace(request, max_tokens=max(0, CONTEXT_LENGTH - longest))
    if len(request.prompts) * max(request.n, request.best_of or 1) > MAX_COMPLETIONS:
        reader.reject(
            ApiError(
                400,
                f"Too many completions requested: at most {MAX_COMPLETIONS} "
                "(prompts x max(n, best_of)).",
                code="invalid_value",
                param="n",
            )
        )
    return request


def parse_request(
    raw: bytes, flavor: Flavor, *, lenient: bool = False, default_model: str = ""
) -> CompletionRequest:
    """Parse and validate a request body, raising ``ApiError`` (400) on the first problem.

    ``lenient`` (the ``accepts-invalid`` fault) never raises: bad fields fall back to
    their defaults and broken cross-field rules are repaired.
    """
    body = _body_object(raw, lenient=lenient)
    reader = _Reader(body, flavor, lenient=lenient)
    request = _read_fields(reader, default_model)
    request = _check_cross_fields(reader, request)
    return _check_limits(reader, request)


# --------------------------------------------------------------------------------------
# Per-app state, auth, errors
# --------------------------------------------------------------------------------------


class _Target:
    """One app's settings, plus the request counter the rate-limit faults use."""

    def __init__(
        self, flavor: Flavor, api_key: str | None, models: tuple[str, ...], faults: frozenset[str]
    ) -> None:
        self.flavor = flavor
        self.api_key = api_key
        self.models = models
        self.faults = faults
        self.completion_requests = 0
        self.started = int(time.time())

    def has(self, fault: str) -> bool:
        """Whether a fault is switched on."""
        return fault in self.faults


def _target(request: Request) -> _Target:
    target: _Target = request.app.state.target
    return target


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _envelope(flavor: Flavor, error: ApiError) -> dict[str, Any]:
    """The flavor's error body."""
    if flavor.name == "nscale":
        inner: dict[str, Any] = {
            "code": error.code,
            "message": error.message,
            "error_type": error.type,
        }
        if error.param is not None:
            inner["param"] = error.param
        return {"error": inner}
    return {
        "error": {
            "message": error.message,
            "type": error.type,
            "param": error.param,
            "code": error.code,
        }
    }


def _error_response(target: _Target, error: ApiError) -> Response:
    """Render an ``ApiError`` in the flavor's envelope (or as an errors-* fault says)."""
    status = error.status
    payload: Any = _envelope(target.flavor, error)
    media_type = target.flavor.json_type
    if status == 400 and target.has("errors-422"):  # fault: errors-422
        status = 422
    if target.has("errors-fastapi"):  # fault: errors-fastapi
        payload = {"detail": error.message}
    if target.has("errors-string"):  # fault: errors-string
        payload = {"error": error.message}
    if target.has("errors-text-plain"):  # fault: errors-text-plain
        media_type = "text/plain; charset=utf-8"
    return Response(
        _dumps(payload), status_code=status, media_type=media_type, headers=error.headers
    )


def _check_auth(target: _Target, request: Request) -> None:
    """Bearer auth when an API key is configured."""
    if target.api_key is None or target.has("auth-ignored"):  # fault: auth-ignored
        return
    challenge = {"WWW-Authenticate": "Bearer"}
    header = request.headers.get("authorization")
    if header is None:
        if target.has("auth-missing-400"):  # fault: auth-missing-400
            raise ApiError(400, "Missing Authorization header.", code="missing_api_key")
        raise ApiError(
            401,
            "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
            code="missing_api_key",
            type_="authentication_error",
            headers=challenge,
        )
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise ApiError(
            401,
            "Malformed Authorization header: expected 'Bearer <key>'.",
            code="invalid_authorization_header",
            type_="authentication_error",
            headers=challenge,
        )
    if not secrets.compare_digest(token.encode(), target.api_key.encode()):
        raise ApiError(
            401,
            "Incorrect API key provided.",
            code="invalid_api_key",
            type_="authentication_error",
            headers=challenge,
        )


def _check_rate(target: _Target) -> None:
    """Count completion requests; the rate-limit and server-error faults hook in here."""
    target.completion_requests += 1
    count = target.completion_requests
    limited = "Rate limit reached for requests. Retry after the time in Retry-After."
    if target.has("rate-limit-always"):  # fault: rate-limit-always
        raise ApiError(
            429,
            limited,
            code="rate_limit_exceeded",
            type_="rate_limit_error",
            headers={"Retry-After": "1"},
        )
    if target.has("rate-limit-every-third") and count % 3 == 0:  # fault: rate-limit-every-third
        raise ApiError(
            429,
            limited,
            code="rate_limit_exceeded",
            type_="rate_limit_error",
            headers={"Retry-After": "0"},
        )
    if target.has("server-error-500") and count % 5 == 0:  # fault: server-error-500
        raise ApiError(
            500,
            "The server had an error while processing your request.",
            code="internal_error",
            type_="server_error",
        )


def _check_model(target: _Target, request: CompletionRequest) -> None:
    if request.model in target.models or target.has(
        "unknown-model-200"
    ):  # fault: unknown-model-200
        return
    raise ApiError(
        404,
        f"The model '{request.model}' does not exist or you do not have access to it.",
        code="model_not_found",
        param="model",
    )


def _check_capabilities(target: _Target, request: CompletionRequest) -> None:
    """Capability refusals; a careful provider has none, two faults add them."""
    if target.has("capability-500") and request.present & {
        "best_of",
        "echo",
        "suffix",
    }:  # fault: capability-500
        raise ApiError(500, "Internal server error.", code="internal_error", type_="server_error")
    if target.has("reject-token-prompts") and request.token_prompt:  # fault: reject-token-prompts
        raise ApiError(
            400,
            "Token-id prompts are not supported by this model.",
            code="unsupported_value",
            param="prompt",
        )


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Choice:
    """One returned choice: its index, the echoed prompt tokens and the completion."""

    index: int
    echo: tuple[Token, ...]
    completion: Completion
    finish_reason: str

    @property
    def tokens(self) -> tuple[Token, ...]:
        return self.echo + self.completion.tokens

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.tokens)


def _finish_reason(target: _Target, completion: Completion) -> str:
    reason = completion.finish_reason
    if reason == "length" and target.has("finish-not-length"):  # fault: finish-not-length
        reason = "stop"
    if target.has("finish-enum"):  # fault: finish-enum
        reason = "eos_token"
    return reason


def _generate(target: _Target, request: CompletionRequest, *, streamed: bool) -> list[_Choice]:
    """Generate every choice: for prompt i and completion j, index ``i * n + j``."""
    n = 1 if target.has("choices-ignore-n") else request.n  # fault: choices-ignore-n
    candidates = max(n, request.best_of or 1)
    top_k = request.logprobs
    if (
        top_k is None and not streamed and target.has("logprobs-unrequested")
    ):  # fault: logprobs-unrequested
        top_k = 0
    exceed = target.has("exceed-max-tokens")  # fault: exceed-max-tokens
    stop = () if target.has("stop-ignored") else request.stop  # fault: stop-ignored
    variant = (
        "stream" if streamed and target.has("stream-text-differs") else ""
    )  # fault: stream-text-differs
    echo = request.echo and not target.has("echo-ignored")  # fault: echo-ignored
    choices: list[_Choice] = []
    for i, prompt in enumerate(request.prompts):
        completions = [
            model.generate(
                prompt,
                max_tokens=request.max_tokens + 3 if exceed else request.max_tokens,
                rng=model.sampler_rng(
                    prompt,
                    index=c,
                    seed=request.seed,
                    temperature=request.temperature,
                    top_p=request.top_p,
                ),
                temperature=request.temperature,
                top_p=request.top_p,
                stop=stop,
                top_k=top_k,
                include_stop=target.has("stop-in-text"),  # fault: stop-in-text
                natural_stop=not exceed,
                variant=variant,
            )
            for c in range(candidates)
        ]
        if candidates > n:
            # best_of: keep the n candidates with the highest mean logprob per token.
            completions = sorted(completions, key=lambda comp: -comp.mean_logprob)[:n]
        echoed = model.score_prompt(prompt, top_k=top_k) if echo else ()
        for j, completion in enumerate(completions):
            choices.append(
                _Choice(i * n + j, echoed, completion, _finish_reason(target, completion))
            )
    return choices


def _usage(
    target: _Target, request: CompletionRequest, choices: Sequence[_Choice]
) -> dict[str, int]:
    """Token usage: prompts counted once each, completions over all returned choices."""
    prompt_tokens = sum(len(p.tokens) for p in request.prompts)
    completion_tokens = sum(len(c.completion.tokens) for c in choices)
    total = prompt_tokens + completion_tokens
    if target.has("usage-arithmetic"):  # fault: usage-arithmetic
        total += 1
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total,
    }


def _logprobs(tokens: Sequence[Token], offset: int = 0) -> dict[str, Any]:
    """The OpenAI logprobs object for tokens whose text starts at ``offset``."""
    offsets: list[int] = []
    for token in tokens:
        offsets.append(offset)
        offset += len(token.text)
    return {
        "tokens": [t.text for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [t.top_logprobs for t in tokens],
        "text_offset": offsets,
    }


def _new_id() -> str:
    return "cmpl-" + secrets.token_hex(12)


def _drop_nulls(flavor: Flavor, value: Any) -> Any:
    """Under Nscale, omit the optional fields its schema declares non-nullable."""
    if not flavor.omit_nulls or not isinstance(value, dict):
        return value
    out = {
        k: v
        for k, v in value.items()
        if not (v is None and k in ("logprobs", "finish_reason", "usage"))
    }
    if isinstance(out.get("choices"), list):
        out["choices"] = [_drop_nulls(flavor, c) for c in out["choices"]]
    return out


# --------------------------------------------------------------------------------------
# Non-streamed responses
# --------------------------------------------------------------------------------------


def _completion_body(
    target: _Target, request: CompletionRequest, choices: Sequence[_Choice]
) -> dict[str, Any]:
    """The conformant JSON body of a non-streamed completion."""
    wants_logprobs = request.logprobs is not None or target.has("logprobs-unrequested")
    return {
        "id": _new_id(),
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {
                "text": c.text,
                "index": c.index,
                "logprobs": _logprobs(c.tokens) if wants_logprobs else None,
                "finish_reason": c.finish_reason,
            }
            for c in choices
        ],
        "usage": _usage(target, request, choices),
    }


def _each_logprobs(body: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for choice in body["choices"]:
        if isinstance(choice.get("logprobs"), dict):
            yield choice["logprobs"]


def _fault_logprobs_positive(body: dict[str, Any], request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        for i, value in enumerate(lp["token_logprobs"]):
            if value is not None:
                lp["token_logprobs"][i] = 0.5
                return


def _fault_top_logprobs_extra(body: dict[str, Any], request: CompletionRequest) -> None:
    want = (request.logprobs or 0) + 2
    for lp in _each_logprobs(body):
        for top in lp["top_logprobs"]:
            if top is None:
                continue
            filler = (w for w in model.VOCAB[1:] if w not in top)
            floor = min(top.values(), default=0.0)
            while len(top) < want:
                floor -= 1.0
                top[next(filler)] = floor


def _fault_tokens_mismatch(body: dict[str, Any], request: CompletionRequest) -> None:
    for lp in _each_logprobs(body):
        if lp["tokens"]:  # same token count: only the join differs from the text
            lp["tokens"][0] += "~"


def _fault_chat_logprobs(body: dict[str, Any], request: CompletionRequest) -> None:
    for choice in body["choices"]:
        lp = choice.get("logprobs")
        if isinstance(lp, dict):
            choice["logprobs"] = {
                "content": [
                    {
                        "token": token,
                        "logprob": logprob,
                        "top_logprobs": [
                            {"token": k, "logprob": v} for k, v in (top or {}).items()
                        ],
                    }
                    for token, logprob, top in zip(
                        lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True
                    )
                ]
            }


def _set_all(key: str, value: Any) -> Callable[[dict[str, Any], CompletionRequest], None]:
    def hook(body: dict[str, Any], request: CompletionRequest) -> None:
        for choice in body["choices"]:
            choice[key] = value

    return hook


def _each_lp(
    update: Callable[[dict[str, Any]], None],
) -> Callable[[dict[str, Any], CompletionRequest], None]:
    def hook(body: dict[str, Any], request: CompletionRequest) -> None:
        for lp in _each_logprobs(body):
            update(lp)

    return hook


def _first_text_null(body: dict[str, Any], request: CompletionRequest) -> None:
    if body["choices"]:
        body["choices"][0]["text"] = None


def _vendor_fields(body: dict[str, Any], request: CompletionRequest) -> None:
    body["x_vendor"] = {"region": "ref-1", "queue_ms": 0}
    for choice in body.get("choices") or []:
        choice["x_vendor"] = {"moderated": False}


def _choices_object(body: dict[str, Any], request: CompletionRequest) -> None:
    body["choices"] = {str(i): c for i, c in enumerate(body["choices"])}


#: Non-streamed body faults, applied in this order (``choices`` must stay a list until last).
_BODY_FAULTS: dict[str, Callable[[dict[str, Any], CompletionRequest], None]] = {
    "object-chunk": lambda b, r: b.update(object="text_completion.chunk"),
    "created-millis": lambda b, r: b.update(created=b["created"] * 1000 + 123),
    "empty-id": lambda b, r: b.update(id=""),
    "usage-missing": lambda b, r: b.pop("usage"),
    "choice-text-null": _first_text_null,
    "duplicate-index": _set_all("index", 0),
    "logprobs-ignored": _set_all("logprobs", None),
    "logprobs-length-mismatch": _each_lp(lambda lp: lp.update(text_offset=lp["text_offset"][:-1])),
    "logprobs-positive": _fault_logprobs_positive,
    "top-logprobs-extra": _fault_top_logprobs_extra,
    "text-offset-decreasing": _each_lp(lambda lp: lp.update(text_offset=lp["text_offset"][::-1])),
    "tokens-mismatch-text": _fault_tokens_mismatch,
    "logprobs-chat-shape": _fault_chat_logprobs,
    "vendor-fields": _vendor_fields,
    "schema-choices-not-array": _choices_object,
}


#: Body faults on logprobs that streams show too: applied to every content chunk, whose
#: ``choices`` are shaped like a body's.
_LOGPROBS_FAULTS = (
    "logprobs-ignored",
    "logprobs-length-mismatch",
    "logprobs-positive",
    "top-logprobs-extra",
)


def _json_response(target: _Target, request: CompletionRequest) -> Response:
    """A non-streamed completion."""
    choices = _generate(target, request, streamed=False)
    body = _completion_body(target, request, choices)
    for name, hook in _BODY_FAULTS.items():
        if target.has(name):  # fault: see _BODY_FAULTS
            hook(body, request)
    status = 201 if target.has("status-201") else 200  # fault: status-201
    media_type = target.flavor.json_type
    if target.has("json-content-type-text"):  # fault: json-content-type-text
        media_type = "text/plain; charset=utf-8"
    if not target.has("null-fields"):  # fault: null-fields keeps the nulls Nscale omits
        body = _drop_nulls(target.flavor, body)
    return Response(_dumps(body), status_code=status, media_type=media_type)


# --------------------------------------------------------------------------------------
# Event streams
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _StreamContext:
    """What the stream fault hooks may need besides the items themselves."""

    target: _Target
    request: CompletionRequest
    usage: dict[str, int]
    usage_chunk: dict[str, Any]


def _choice_chunks(choice: _Choice, with_logprobs: bool) -> list[dict[str, Any]]:
    """The ``choices`` entries streamed for one choice: the echo, then one per token."""
    pieces: list[tuple[Token, ...]] = []
    if choice.echo:
        pieces.append(choice.echo)  # echo: the first chunk carries the whole prompt
    pieces.extend((t,) for t in choice.completion.tokens)
    if not pieces:
        pieces.append(())  # nothing to send but the finish_reason
    out: list[dict[str, Any]] = []
    offset = 0
    for tokens in pieces:
        text = "".join(t.text for t in tokens)
        out.append(
            {
                "text": text,
                "index": choice.index,
                "logprobs": _logprobs(tokens, offset) if with_logprobs else None,
                "finish_reason": None,
            }
        )
        offset += len(text)
    out[-1]["finish_reason"] = choice.finish_reason
    return out


def _stream_items(target: _Target, request: CompletionRequest) -> list[Any]:
    """The conformant data payloads of a stream (dicts, then ``DONE``), faults applied."""
    choices = _generate(target, request, streamed=True)
    usage = _usage(target, request, choices)
    head: dict[str, Any] = {
        "id": _new_id(),
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    per_choice = [_choice_chunks(c, request.logprobs is not None) for c in choices]
    items: list[Any] = []
    # Round-robin over the choices, the way real servers interleave them.
    for group in itertools.zip_longest(*per_choice):
        for entry in group:
            if entry is not None:
                chunk = {**head, "choices": [entry]}
                if request.include_usage:
                    chunk["usage"] = None
                items.append(chunk)
    usage_chunk = {**head, "choices": [], "usage": usage}
    if request.include_usage:
        items.append(usage_chunk)
    items.append(DONE)
    context = _StreamContext(target, request, usage, usage_chunk)
    for name in _LOGPROBS_FAULTS:
        if target.has(name):  # fault: see _LOGPROBS_FAULTS
            for item in filter(_is_content, items):
                _BODY_FAULTS[name](item, request)
    for name, hook in _STREAM_FAULTS.items():
        if target.has(name):  # fault: see _STREAM_FAULTS
            items = hook(items, context)
    return [_drop_nulls(target.flavor, item) for item in items]


def _is_content(item: Any) -> bool:
    return isinstance(item, dict) and bool(item.get("choices"))


def _is_usage(item: Any) -> bool:
    return isinstance(item, dict) and item.get("choices") == [] and "usage" in item


def _finish_positions(items: list[Any]) -> list[int]:
    return [
        i
        for i, it in enumerate(items)
        if _is_content(it) and it["choices"][0]["finish_reason"] is not None
    ]


def _empty_copy(chunk: dict[str, Any], text: str = "") -> dict[str, Any]:
    """A copy of a content chunk with new text (and logprobs to match, if any)."""
    clone = copy.deepcopy(chunk)
    choice = clone["choices"][0]
    choice["text"] = text
    if choice.get("logprobs") is not None:
        choice["logprobs"] = _logprobs((Token(text, -1.0, {text: -1.0}),) if text else ())
    return clone


def _s_usage_unrequested(items: list[Any], ctx: _StreamContext) -> list[Any]:
    if ctx.request.include_usage:
        return items
    return [*items[:-1], ctx.usage_chunk, items[-1]]


def _s_usage_misplaced(items: list[Any], ctx: _StreamContext) -> list[Any]:
    rest = [it for it in items if not _is_usage(it)]
    if not ctx.request.include_usage:
        return rest
    last = max(i for i, it in enumerate(rest) if _is_content(it))
    return [*rest[:last], ctx.usage_chunk, *rest[last:]]


def _s_usage_on_content(
    value: Callable[[_StreamContext], Any],
) -> Callable[[list[Any], _StreamContext], list[Any]]:
    def hook(items: list[Any], ctx: _StreamContext) -> list[Any]:
        for it in items:
            if _is_content(it):
                it["usage"] = value(ctx)
        return items

    return hook


def _s_id_changes(items: list[Any], ctx: _StreamContext) -> list[Any]:
    return [{**it, "id": _new_id()} if isinstance(it, dict) else it for it in items]


def _s_not_json(items: list[Any], ctx: _StreamContext) -> list[Any]:
    position = 1 if _is_content(items[1]) else 0
    text = _dumps(items[position]).decode()
    return [*items[:position], text[: len(text) // 2], *items[position + 1 :]]


def _s_each_choice(
    update: Callable[[dict[str, Any]], None],
) -> Callable[[list[Any], _StreamContext], list[Any]]:
    def hook(items: list[Any], ctx: _StreamContext) -> list[Any]:
        for it in items:
            if _is_content(it):
                update(it["choices"][0])
        return items

    return hook


def _s_finish_empty_string(choice: dict[str, Any]) -> None:
    if choice["finish_reason"] is None:
        choice["finish_reason"] = ""


def _s_double_finish(items: list[Any], ctx: _StreamContext) -> list[Any]:
    out = list(items)
    for i in reversed(_finish_positions(items)):
        out.insert(i + 1, _empty_copy(items[i]))
    return out


def _s_text_after_finish(items: list[Any], ctx: _StreamContext) -> list[Any]:
    first = next(i for i in _finish_positions(items) if items[i]["choices"][0]["index"] == 0)
    extra = _empty_copy(items[first], " extra")
    extra["choices"][0]["finish_reason"] = None
    return [*items[: first + 1], extra, *items[first + 1 :]]


def _s_finish_on_empty_chunk(items: list[Any], ctx: _StreamContext) -> list[Any]:
    out = list(items)
    for i in reversed(_finish_positions(items)):
        final = _empty_copy(items[i])
        items[i]["choices"][0]["finish_reason"] = None
        out.insert(i + 1, final)
    return out


def _s_error_event(items: list[Any], ctx: _StreamContext) -> list[Any]:
    error = ApiError(500, "upstream failed", code="upstream_error", type_="server_error")
    middle = max(1, (len(items) - 1) // 2)
    return [*items[:middle], _envelope(ctx.target.flavor, error), *items[middle:]]


def _s_vendor_fields(items: list[Any], ctx: _StreamContext) -> list[Any]:
    for it in items:
        if isinstance(it, dict):
            _vendor_fields(it, ctx.request)
    return items


#: Stream faults, applied in this order to the list of payloads (dicts, raw strings, DONE).
_STREAM_FAULTS: dict[str, Callable[[list[Any], _StreamContext], list[Any]]] = {
    "stream-usage-unrequested": _s_usage_unrequested,
    "stream-usage-missing": lambda items, ctx: [it for it in items if not _is_usage(it)],
    "stream-usage-misplaced": _s_usage_misplaced,
    "stream-usage-every-chunk": _s_usage_on_content(lambda ctx: dict(ctx.usage)),
    "stream-usage-empty-object": _s_usage_on_content(lambda ctx: {}),
    "stream-id-changes": _s_id_changes,
    "stream-no-finish-reason": _s_each_choice(lambda c: c.update(finish_reason=None)),
    "stream-finish-empty-string": _s_each_choice(_s_finish_empty_string),
    "stream-double-finish": _s_double_finish,
    "stream-text-after-finish": _s_text_after_finish,
    "stream-index-zero": _s_each_choice(lambda c: c.update(index=0)),
    "finish-on-empty-chunk": _s_finish_on_empty_chunk,
    "vendor-fields": _s_vendor_fields,
    "stream-error-event": _s_error_event,
    "stream-data-after-done": lambda items, ctx: [*items, copy.deepcopy(items[0])],
    "stream-no-done": lambda items, ctx: [it for it in items if it != DONE],
    "stream-not-json": _s_not_json,
}


def _frame(target: _Target, payloads: Sequence[Any]) -> list[bytes]:
    """Frame payloads as SSE events (``data: <payload>`` and a blank line)."""
    newline = "\r\n" if target.has("sse-crlf") else "\n"  # fault: sse-crlf
    field = "data:" if target.has("sse-no-space") else "data: "  # fault: sse-no-space
    end = "" if target.has("stream-single-newline") else newline  # fault: stream-single-newline
    events: list[bytes] = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else _dumps(payload).decode()
        lines = []
        if target.has("sse-retry-lines"):  # fault: sse-retry-lines
            lines.append("retry: 1000")
        lines.append(field + data)
        event = newline.join(lines) + newline + end
        if target.has("sse-comments"):  # fault: sse-comments
            # A comment block of its own, the way proxies send keep-alives.
            event = ": keep-alive" + newline + newline + event
        events.append(event.encode())
    return events


def _tiny_pieces(data: bytes) -> list[bytes]:
    """Split bytes into pieces of 1, 2, 3, 1, 2, 3... bytes."""
    pieces: list[bytes] = []
    sizes = itertools.cycle((1, 2, 3))
    position = 0
    while position < len(data):
        size = next(sizes)
        pieces.append(data[position : position + size])
        position += size
    return pieces


async def _emit(target: _Target, events: list[bytes]) -> AsyncIterator[bytes]:
    """Write the events, yielding to the loop between them like a real token stream."""
    for number, event in enumerate(events):
        if target.has("sse-tiny-writes"):  # fault: sse-tiny-writes
            for piece in _tiny_pieces(event):
                yield piece
        else:
            yield event
        if number == 0 and target.has("stream-stall"):  # fault: stream-stall
            # Starlette cancels this when the client disconnects; uvicorn when it stops.
            await asyncio.sleep(3600)
        await asyncio.sleep(0)


def _stream_response(target: _Target, request: CompletionRequest) -> Response:
    """A streamed completion."""
    events = _frame(target, _stream_items(target, request))
    media_type = target.flavor.sse_type
    if target.has("stream-content-type-json"):  # fault: stream-content-type-json
        media_type = "application/json"
    status = 201 if target.has("status-201") else 200  # fault: status-201
    # Set content-type as a header: media_type= would make Starlette add a charset.
    headers = {"content-type": media_type, "cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(_emit(target, events), status_code=status, headers=headers)


# --------------------------------------------------------------------------------------
# Routes and app
# --------------------------------------------------------------------------------------


async def _completions(request: Request) -> Response:
    """``POST /v1/completions``."""
    target = _target(request)
    try:
        _check_auth(target, request)
        _check_rate(target)
        parsed = parse_request(
            await request.body(),
            target.flavor,
            lenient=target.has("accepts-invalid"),  # fault: accepts-invalid
            default_model=target.models[0],
        )
        _check_model(target, parsed)
        _check_capabilities(target, parsed)
    except ApiError as error:
        return _error_response(target, error)
    if parsed.stream:
        return _stream_response(target, parsed)
    return _json_response(target, parsed)


def _model_card(target: _Target, name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": target.started, "owned_by": "reference"}


def _json(target: _Target, body: Any) -> Response:
    return Response(_dumps(body), media_type=target.flavor.json_type)


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


async def _get_model(request: Request) -> Response:
    """``GET /v1/models/{model}``."""
    target = _target(request)
    name = request.path_params["model"]
    try:
        _check_auth(target, request)
        if name not in target.models:
            raise ApiError(
                404, f"The model '{name}' does not exist.", code="model_not_found", param="model"
            )
    except ApiError as error:
        return _error_response(target, error)
    return _json(target, _model_card(target, name))


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths and wrong methods, in the flavor's envelope."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    error = ApiError(exc.status_code, str(exc.detail), code=code, headers=exc.headers)
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
            type_="server_error",
        ),
    )
    if not target.has("missing-request-id-header"):
        # This handler runs outside the middleware stack, so add the header here.
        response.headers[target.flavor.request_id_header] = "req_" + secrets.token_hex(12)
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
) -> Starlette:
    """Build the reference target as a Starlette app.

    ``flavor`` is ``"aihubmix"`` or ``"nscale"``; ``api_key`` switches bearer auth on;
    ``faults`` names entries of ``faults.FAULTS`` (ValueError for unknown ones).
    """
    if flavor not in FLAVORS:
        raise ValueError(f"unknown flavor {flavor!r}; valid flavors: {', '.join(sorted(FLAVORS))}")
    if not models:
        raise ValueError("at least one model name is required")
    chosen = check_faults(faults)
    spec = FLAVORS[flavor]
    header = (
        None if "missing-request-id-header" in chosen else spec.request_id_header
    )  # fault: missing-request-id-header
    app = Starlette(
        routes=[
            Route("/v1/completions", _completions, methods=["POST"]),
            Route("/v1/models", _list_models, methods=["GET"]),
            Route("/v1/models/{model:path}", _get_model, methods=["GET"]),
        ],
        middleware=[Middleware(_RequestIdMiddleware, header=header)],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.target = _Target(spec, api_key, tuple(models), chosen)
    return app
