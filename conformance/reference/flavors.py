"""What differs between the vendor specs the reference target follows, and its refusals.

A flavor names a vendored spec (``conformance.judging.document.spec.load_spec(flavor)`` loads it: the
request validation comes from there) plus the wire habits the spec states that a schema
cannot carry: media types, the request-id header, the error envelope, and whether
optional response fields are omitted or sent as null. ``Head`` and ``ErrorReply`` are the
values faults transform on the way out (stages ``head`` and ``error-reply``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from conformance.judging.exceptions import ConformanceError

__all__ = ["FLAVORS", "ApiError", "ErrorReply", "Flavor", "Head", "Origin", "dumps", "envelope"]


@dataclass(frozen=True, slots=True)
class Flavor:
    """One vendor spec's wire habits."""

    name: str
    json_type: str
    sse_type: str
    request_id_header: str
    #: Omit logprobs / finish_reason / usage instead of sending null (Nscale's schema
    #: declares them non-nullable; omitting them is conformant).
    omit_nulls: bool


FLAVORS: Mapping[str, Flavor] = {
    "aihubmix": Flavor(
        name="aihubmix",
        json_type="application/json",
        sse_type="text/event-stream; charset=utf-8",
        request_id_header="X-Request-Id",
        omit_nulls=False,
    ),
    # OpenAI's own document: OpenAI's wire habits, as AIHubMix (a gateway in front of it).
    "openai": Flavor(
        name="openai",
        json_type="application/json",
        sse_type="text/event-stream; charset=utf-8",
        request_id_header="X-Request-Id",
        omit_nulls=False,
    ),
    "nscale": Flavor(
        name="nscale",
        json_type="application/json; charset=utf-8",
        sse_type="text/event-stream",
        request_id_header="INFERENCE-ID",
        omit_nulls=True,
    ),
}

#: Why a request was refused; faults that wave refusals through pick theirs by origin.
Origin = Literal["auth", "invalid", "model", "capability", "rate", "server", "route"]


class ApiError(ConformanceError):
    """A refusal, carrying what the error envelope and status line need."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        origin: Origin,
        param: str | None = None,
        type_: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.origin: Origin = origin
        self.param = param
        self.type = type_
        self.headers = dict(headers or {})


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, refusing NaN and infinities (they are not JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def envelope(flavor: Flavor, error: ApiError) -> dict[str, Any]:
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


@dataclass(frozen=True, slots=True)
class Head:
    """Status line and media type of a successful completion."""

    status: int
    media_type: str
    streamed: bool
    #: Headers a fault adds to the answer (name, value).
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An error response before it is serialized."""

    status: int
    payload: Any
    media_type: str
    message: str
