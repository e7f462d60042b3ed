"""Faults of serving: refusals, rate limits, status lines, media types, headers, framing.

Each is declared with ``registry.fault`` next to its transformer; see ``registry`` for the
stages. Faults of what is generated and how bodies and streams are shaped live in
``faults_content``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.reference.flavors import ApiError, ErrorReply, Head
from conformance.reference.framing import Framing, Pacing
from conformance.reference.registry import also, fault
from conformance.reference.validation import CompletionRequest

_TEXT = "text/plain; charset=utf-8"
_LIMITED = "Rate limit reached for requests. Retry after the time in Retry-After."
_OVER_WINDOW = "context_length_exceeded"
_LIMITED_UNSAID = "Rate limit reached for requests. Please try again later."

# --- status lines and media types ------------------------------------------------------


@fault(
    "status-201",
    "Successful completions are answered with status 201 instead of 200 (both modes).",
    "head",
)
def _status_201(head: Head) -> Head:
    return replace(head, status=201)


@fault(
    "stream-status-201",
    "Streamed completions are answered with status 201 instead of 200 (non-streamed ones "
    "keep 200, so the preflight passes and the run reaches the streams).",
    "head",
)
def _stream_status_201(head: Head) -> Head:
    return replace(head, status=201) if head.streamed else head


@fault(
    "json-content-type-text",
    "A 200 JSON completion is served as text/plain (non-streamed).",
    "head",
)
def _json_as_text(head: Head) -> Head:
    return head if head.streamed else replace(head, media_type=_TEXT)


@fault(
    "missing-request-id-header",
    "The flavor's request-id header (X-Request-Id / INFERENCE-ID) is never sent.",
    "request-id",
)
def _no_request_id(header: str | None) -> None:
    return None


# --- refusals waved through or changed -------------------------------------------------


@fault(
    "capability-500",
    "Requests carrying best_of, echo or suffix are answered 500 instead of 4xx.",
    "request",
)
def _capability_500(request: CompletionRequest) -> ApiError | None:
    if request.present & {"best_of", "echo", "suffix"}:
        return ApiError(
            500,
            "Internal server error.",
            code="internal_error",
            origin="server",
            type_="server_error",
        )
    return None


@fault(
    "accepts-invalid",
    "Requests that must be rejected with 400 are answered 200 (a prompt over the context "
    "window aside: context-window-ignored).",
    "refusal",
)
def _accepts_invalid(error: ApiError) -> ApiError | None:
    return None if error.origin == "invalid" and error.code != _OVER_WINDOW else error


@fault(
    "context-window-ignored",
    "A prompt over the model's context window (the max_model_len /v1/models advertises) is "
    'answered 200 with empty text and finish_reason "length" (vLLM, Ollama), not refused.',
    "refusal",
)
def _context_window_ignored(error: ApiError) -> ApiError | None:
    return None if error.code == _OVER_WINDOW else error


# --- errors, auth, rate limits -----------------------------------------------------------


@fault("errors-fastapi", 'Error bodies are `{"detail": "..."}` (FastAPI default).', "error-reply")
def _errors_fastapi(reply: ErrorReply) -> ErrorReply:
    return replace(reply, payload={"detail": reply.message})


@fault("errors-string", 'Error bodies are `{"error": "message"}`.', "error-reply")
def _errors_string(reply: ErrorReply) -> ErrorReply:
    return replace(reply, payload={"error": reply.message})


@fault(
    "errors-stringified-nulls",
    'Null error fields are spelled "None" (LiteLLM\'s str(None)), `param` always sent.',
    "error-reply",
)
def _errors_stringified_nulls(reply: ErrorReply) -> ErrorReply:
    error = reply.payload.get("error") if isinstance(reply.payload, dict) else None
    if not isinstance(error, dict):
        return reply
    spelled = {k: "None" if v is None else v for k, v in {"param": None, **error}.items()}
    return replace(reply, payload={**reply.payload, "error": spelled})


@fault("errors-text-plain", "Error bodies are served as text/plain.", "error-reply")
def _errors_text_plain(reply: ErrorReply) -> ErrorReply:
    return replace(reply, media_type=_TEXT)


@fault("errors-422", "Request validation errors are answered 422 instead of 400.", "error-reply")
def _errors_422(reply: ErrorReply) -> ErrorReply:
    return replace(reply, status=422) if reply.status == 400 else reply


@fault("auth-ignored", "Credentials are not checked.", "refusal")
def _auth_ignored(error: ApiError) -> ApiError | None:
    return None if error.origin == "auth" else error


@fault("auth-missing-400", "Missing credentials are answered 400 instead of 401.", "refusal")
def _auth_missing_400(error: ApiError) -> ApiError:
    if error.origin == "auth" and error.code == "missing_api_key":
        return ApiError(400, "Missing Authorization header.", code="missing_api_key", origin="auth")
    return error


@fault("unknown-model-200", "Any model name is served instead of 404.", "refusal")
def _unknown_model_200(error: ApiError) -> ApiError | None:
    return None if error.origin == "model" else error


@fault(
    "unknown-model-400",
    "An unknown model is refused 400 (flavor's error envelope) instead of 404 (legal, a SHOULD).",
    "refusal",
)
def _unknown_model_400(error: ApiError) -> ApiError:
    if error.origin != "model":
        return error
    return ApiError(
        400,
        error.message,
        code=error.code,
        origin=error.origin,
        param=error.param,
        type_=error.type,
    )


def _rate_limited(retry_after: str | None) -> ApiError:
    return ApiError(
        429,
        _LIMITED if retry_after is not None else _LIMITED_UNSAID,
        code="rate_limit_exceeded",
        origin="rate",
        type_="rate_limit_error",
        headers={} if retry_after is None else {"Retry-After": retry_after},
    )


@fault(
    "rate-limit-every-third",
    "Every third completion request is answered 429 with Retry-After: 0 (legal).",
    "admit",
    tolerated=True,
)
def _every_third(count: int) -> ApiError | None:
    return _rate_limited("0") if count % 3 == 0 else None


@fault(
    "rate-limit-every-third-no-retry-after",
    "Every third completion request is answered 429 without Retry-After (LiteLLM's router; "
    "legal: a client backs off on its own, as the openai SDK does).",
    "admit",
    tolerated=True,
)
def _every_third_unsaid(count: int) -> ApiError | None:
    return _rate_limited(None) if count % 3 == 0 else None


@fault(
    "rate-limit-always",
    "Every completion request is answered 429 with Retry-After: 1.",
    "admit",
)
def _always_limited(count: int) -> ApiError:
    return _rate_limited("1")


@fault("server-error-500", "Every fifth completion request is answered 500.", "admit")
def _every_fifth_500(count: int) -> ApiError | None:
    if count % 5:
        return None
    return ApiError(
        500,
        "The server had an error while processing your request.",
        code="internal_error",
        origin="server",
        type_="server_error",
    )


# --- event stream framing and pacing -----------------------------------------------------


@fault(
    "stream-single-newline",
    'Events are separated by "\\n" only, so they merge into one.',
    "framing",
)
def _single_newline(framing: Framing) -> Framing:
    return replace(framing, end="")


@fault(
    "stream-event-type",
    'Every event carries a type line ("event: completion"): not data-only.',
    "framing",
)
def _event_type(framing: Framing) -> Framing:
    return replace(framing, before=(*framing.before, "event: completion"))


@fault("stream-content-type-json", "The event stream is served as application/json.", "head")
def _stream_as_json(head: Head) -> Head:
    return replace(head, media_type="application/json") if head.streamed else head


@fault("stream-stall", "The stream sends its first event, then stalls for an hour.", "pacing")
def _stall(pacing: Pacing) -> Pacing:
    return replace(pacing, stall_after_first=3600.0)


@fault(
    "sse-comments",
    'Comment lines (": keep-alive") come between events.',
    "framing",
    tolerated=True,
)
def _comments(framing: Framing) -> Framing:
    return replace(framing, comment=": keep-alive")


@fault("sse-crlf", "Event stream lines end with CRLF.", "framing", tolerated=True)
def _crlf(framing: Framing) -> Framing:
    return replace(framing, newline="\r\n")


@fault("sse-no-space", '"data:" is written without the space.', "framing", tolerated=True)
def _no_space(framing: Framing) -> Framing:
    return replace(framing, field="data:")


@fault(
    "sse-tiny-writes", "Each event is written in pieces of 1 to 3 bytes.", "pacing", tolerated=True
)
def _tiny_writes(pacing: Pacing) -> Pacing:
    return replace(pacing, pieces=(1, 2, 3))


@fault("sse-retry-lines", '"retry: 1000" lines come with the events.', "framing", tolerated=True)
def _retry_lines(framing: Framing) -> Framing:
    return replace(framing, before=(*framing.before, "retry: 1000"))


# --- rate-limit answers judged (issue 20: 429s are judged, not only retried) -------------


@fault(
    "rate-limit-bare-body",
    'Every third completion request is answered 429 (Retry-After: 0) with a bare {"message"} body.',
    "admit",
)
def _limited_bare(count: int) -> ApiError | None:
    return _rate_limited("0") if count % 3 == 0 else None


@also("rate-limit-bare-body", "error-reply")
def _bare_429_body(reply: ErrorReply) -> ErrorReply:
    if reply.status != 429:
        return reply
    return replace(reply, payload={"message": reply.message})


@fault(
    "rate-limit-retry-after-negative",
    "Every third completion request is answered 429 with Retry-After: -1 (not delay-seconds).",
    "admit",
)
def _limited_negative(count: int) -> ApiError | None:
    return _rate_limited("-1") if count % 3 == 0 else None


# --- a valid request that kills the target (mlx-lm: a one-item prompt list) --------------


@fault(
    "dies-on-one-item-prompt-list",
    "A prompt list of one string kills generation: it and every later request get 404 (mlx-lm).",
    "remembered",
)
def _dies_on_one_item_list(
    request: CompletionRequest, memory: dict[str, object]
) -> ApiError | None:
    if request.prompt_list and len(request.prompts) == 1 and not request.token_prompt:
        memory["dead"] = True
    if not memory.get("dead"):
        return None
    return ApiError(404, "Not Found", code="not_found", origin="route")


@fault(
    "intermittent-500-streamed-logprobs",
    "The second send of the same streamed request with logprobs is answered 500 (vLLM 0.32: "
    "KeyError in _create_completion_logprobs, 1 stream in 9).",
    "remembered",
)
def _intermittent_500(request: CompletionRequest, memory: dict[str, object]) -> ApiError | None:
    if not (request.stream and request.logprobs is not None):
        return None
    key = f"sent:{request!r}"
    memory[key] = sends = int(memory.get(key, 0)) + 1  # type: ignore[call-overload]
    if sends != 2:
        return None
    return ApiError(500, "52", code="internal_error", origin="server", type_="server_error")


# --- a false Content-Encoding ------------------------------------------------------------


@fault(
    "content-encoding-false-gzip",
    "Non-streamed completions say `Content-Encoding: gzip` but the body is plain JSON.",
    "head",
)
def _false_gzip(head: Head) -> Head:
    if head.streamed:
        return head
    return replace(head, headers=(*head.headers, ("Content-Encoding", "gzip")))


# --- token ids outside the vocabulary ----------------------------------------------------


@fault(
    "token-id-out-of-vocab-500",
    "A token id outside the vocabulary is answered 500 instead of 400 (vLLM before its fix).",
    "refusal",
)
def _oov_500(error: ApiError) -> ApiError:
    if error.param != "prompt" or "Invalid token id" not in error.message:
        return error
    return ApiError(
        500,
        "index out of range in self",
        code="internal_error",
        origin="server",
        type_="server_error",
    )


# --- the model list (issue 25: the advertised context window) ----------------------------


@fault(
    "models-no-window",
    "GET /v1/models advertises no context window (no max_model_len: Ollama, LiteLLM); the "
    "window is still enforced.",
    "model-card",
    tolerated=True,
)
def _models_no_window(card: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in card.items() if k != "max_model_len"}
