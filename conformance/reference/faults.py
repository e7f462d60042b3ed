"""The fault catalogue of the reference target.

Each fault, switched on alone, makes the otherwise conformant reference target break one
requirement (or, for the names in ``TOLERATED``, behave in a legal but unusual way that a
correct client and a correct suite must accept). The suite's own tests switch faults on
one at a time to prove that every check can fail, and that no check fails on a legal
variation.

"Non-streamed" faults change only ``stream: false`` responses, "streamed" ones only event
streams; "both modes" ones change what is generated, so both kinds of response show them.
The hooks that implement them live in ``app.py``, each marked with its fault name.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CAPABILITY", "FAULTS", "TOLERATED", "check_faults"]

FAULTS: dict[str, str] = {
    # --- non-streamed bodies and statuses -------------------------------------------
    "status-201": "Successful completions are answered with status 201 instead of 200 (both modes).",
    "json-content-type-text": "A 200 JSON completion is served as text/plain (non-streamed).",
    "schema-choices-not-array": "`choices` is an object keyed by index instead of an array (non-streamed).",
    "missing-request-id-header": "The flavor's request-id header (X-Request-Id / INFERENCE-ID) is never sent.",
    "object-chunk": '`object` is "text_completion.chunk" instead of "text_completion" (non-streamed).',
    "created-millis": "`created` is in milliseconds instead of seconds (non-streamed).",
    "empty-id": "`id` is the empty string (non-streamed).",
    "null-fields": "Non-nullable fields are sent as null (Nscale: `logprobs: null`) (non-streamed).",
    "choice-text-null": "The first choice has `text: null` (non-streamed).",
    "choices-ignore-n": "One choice per prompt whatever `n` asks for (both modes).",
    "duplicate-index": "Every choice has `index: 0` (non-streamed).",
    "usage-arithmetic": "`usage.total_tokens` is prompt + completion + 1 (both modes' usage objects).",
    "usage-missing": "The non-streamed body has no `usage` object (required by Nscale's schema only).",
    "exceed-max-tokens": "Generates max_tokens + 3 tokens, never stopping naturally (both modes).",
    "finish-not-length": '`finish_reason` is "stop" when max_tokens was hit (both modes).',
    "finish-enum": '`finish_reason` is "eos_token", outside the enum (both modes).',
    "echo-ignored": "`echo: true` is ignored: the prompt is not returned (both modes).",
    "logprobs-ignored": "`logprobs` is null although it was requested (both modes: every streamed chunk).",
    "logprobs-unrequested": "A logprobs object is returned although none was requested (non-streamed).",
    "logprobs-length-mismatch": "The last `text_offset` entry is dropped (both modes: every streamed chunk).",
    "logprobs-positive": "One token logprob is 0.5, above 0 (both modes: one per streamed chunk).",
    "top-logprobs-extra": "Each `top_logprobs` entry has logprobs + 2 items (both modes).",
    "text-offset-decreasing": "`text_offset` runs backwards (non-streamed).",
    "tokens-mismatch-text": "`logprobs.tokens` do not join to the choice text (non-streamed).",
    "logprobs-chat-shape": "logprobs come in the chat shape `{content: [...]}` (non-streamed).",
    "stop-in-text": "The stop sequence is kept at the end of the text (both modes).",
    "stop-ignored": "`stop` is ignored entirely (both modes).",
    "capability-500": "Requests carrying best_of, echo or suffix are answered 500 instead of 4xx.",
    "accepts-invalid": "Requests that must be rejected with 400 are answered 200.",
    "reject-token-prompts": "Token-array prompts are rejected with a proper 400 envelope (a capability gap).",
    # --- event streams -----------------------------------------------------------------
    "stream-no-done": "The stream ends without `data: [DONE]`.",
    "stream-data-after-done": "A data event follows `data: [DONE]`.",
    "stream-single-newline": 'Events are separated by "\\n" only, so they merge into one.',
    "stream-content-type-json": "The event stream is served as application/json.",
    "stream-usage-missing": "include_usage is requested but no usage chunk is sent.",
    "stream-usage-misplaced": "The usage chunk comes before the last content chunk.",
    "stream-usage-every-chunk": "Every content chunk carries the usage object.",
    "stream-usage-empty-object": "Content chunks carry `usage: {}` instead of null or nothing.",
    "stream-usage-unrequested": "A usage chunk is sent although include_usage was not requested.",
    "stream-id-changes": "Each chunk has a different `id`.",
    "stream-not-json": "One data payload is not JSON.",
    "stream-no-finish-reason": "No chunk carries a finish_reason.",
    "stream-finish-empty-string": 'Non-final chunks carry `finish_reason: ""`.',
    "stream-double-finish": "Two chunks carry a finish_reason for the same index.",
    "stream-text-after-finish": "A chunk with text follows the finish chunk of index 0.",
    "stream-index-zero": "Every chunk's choice has `index: 0`.",
    "stream-stall": "The stream sends its first event, then stalls for an hour.",
    "stream-error-event": "An error event arrives mid-stream.",
    "stream-text-differs": "The streamed text differs from the non-streamed text at temperature 0.",
    # --- errors, auth, rate limits -------------------------------------------------------
    "errors-fastapi": 'Error bodies are `{"detail": "..."}` (FastAPI default).',
    "errors-string": 'Error bodies are `{"error": "message"}`.',
    "errors-text-plain": "Error bodies are served as text/plain.",
    "errors-422": "Request validation errors are answered 422 instead of 400.",
    "auth-ignored": "Credentials are not checked.",
    "auth-missing-400": "Missing credentials are answered 400 instead of 401.",
    "unknown-model-200": "Any model name is served instead of 404.",
    "rate-limit-every-third": "Every third completion request is answered 429 with Retry-After: 0 (legal).",
    "rate-limit-always": "Every completion request is answered 429 with Retry-After: 1.",
    "server-error-500": "Every fifth completion request is answered 500.",
    # --- legal variations a correct client must tolerate ---------------------------------
    "sse-comments": 'Comment lines (": keep-alive") come between events.',
    "sse-crlf": "Event stream lines end with CRLF.",
    "sse-no-space": '"data:" is written without the space.',
    "sse-tiny-writes": "Each event is written in pieces of 1 to 3 bytes.",
    "sse-retry-lines": '"retry: 1000" lines come with the events.',
    "finish-on-empty-chunk": "finish_reason comes on an extra chunk with empty text.",
    "vendor-fields": "Bodies, choices and chunks carry an extra `x_vendor` field.",
}

#: Faults that are legal behaviour: a conformant suite passes with any one of them on.
TOLERATED: frozenset[str] = frozenset(
    {
        "rate-limit-every-third",
        "reject-token-prompts",
        "sse-comments",
        "sse-crlf",
        "sse-no-space",
        "sse-tiny-writes",
        "sse-retry-lines",
        "finish-on-empty-chunk",
        "vendor-fields",
    }
)

#: Tolerated faults that should still show up as a CAPABILITY finding.
CAPABILITY: frozenset[str] = frozenset({"reject-token-prompts"})


def check_faults(names: Iterable[str]) -> frozenset[str]:
    """Return the names as a frozenset, or raise ValueError naming the valid ones."""
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        valid = ", ".join(sorted(FAULTS))
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; valid faults: {valid}")
    return chosen
