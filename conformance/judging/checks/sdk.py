"""SDK compatibility: the official openai client reads the target's answers as sent."""

from __future__ import annotations

from typing import Any

from conformance.judging.checks.common import choices_of, is_int
from conformance.judging.requirements import Context, Level, Unsupported, Violation, requirement

SOURCE = "users' code: the official openai Python SDK (completions.create)"


def _via_sdk(stream: bool) -> Any:
    def applies(ctx: Context) -> bool:
        # 5xx and transport failures are judged by VALID-NO-5XX and HTTP-COMPLETE: the
        # SDK rightly raises on them, which says nothing about its compatibility.
        view = ctx.exchange.sdk
        return (
            view is not None
            and ctx.case.stream is stream
            and not view.get("transport")
            and ctx.exchange.status is not None
            and ctx.exchange.status < 500
        )

    return applies


def _sdk_error(ctx: Context) -> None:
    """Raise for an SDK that could not read the answer (or a declined feature)."""
    error = (ctx.exchange.sdk or {}).get("error")
    if error is None:
        return
    status = ctx.exchange.status
    if status is not None and 400 <= status < 500 and status != 429:
        raise Unsupported(f"declined with {status}: {error}")
    raise Violation(f"the openai SDK failed: {error}")


def _differs(what: str, sdk: Any, wire: Any) -> None:
    if sdk != wire:
        raise Violation(
            f"{what}: the SDK read {sdk!r}, the wire says {wire!r}",
            path=what if " " not in what else None,
            expected=wire,
            actual=sdk,
        )


@requirement(
    "SDK-COMPLETION",
    level=Level.MUST,
    area="sdk",
    statement="The official openai SDK reads a non-streamed completion (n, logprobs, echo) "
    "without error, and every value it reads matches the wire.",
    source=SOURCE,
    evidence="client-visible",
    applies=_via_sdk(stream=False),
)
def sdk_completion(ctx: Context) -> None:
    _sdk_error(ctx)
    view, wire = ctx.exchange.sdk or {}, ctx.exchange.json
    if ctx.exchange.json_error:
        return  # a body that is not strict JSON is RESP-SCHEMA's, whatever the SDK made of it
    if not isinstance(wire, dict):
        raise Violation("the SDK returned a completion although the body is not a JSON object")
    for field in ("id", "object", "created", "model"):
        _differs(field, view.get(field), wire.get(field))
    for seen, raw in zip(view.get("choices", []), choices_of(wire), strict=False):
        for field in ("index", "text", "finish_reason"):
            _differs(f"choices[{raw.get('index')}].{field}", seen[field], raw.get(field))
        raw_lp = raw.get("logprobs")
        if isinstance(raw_lp, dict):
            _differs(
                f"choices[{raw.get('index')}].logprobs.tokens", seen["tokens"], raw_lp.get("tokens")
            )
    usage = wire.get("usage")
    if isinstance(usage, dict):
        _differs(
            "usage.total_tokens",
            (view.get("usage") or {}).get("total_tokens"),
            usage.get("total_tokens"),
        )


def _wire_stream(ctx: Context) -> tuple[dict[int, str], int, dict[str, Any] | None]:
    texts: dict[int, str] = {}
    chunks = 0
    usage = None
    for _, payload, problem in ctx.exchange.event_payloads():
        if problem or not isinstance(payload, dict):
            continue
        chunks += 1
        for choice in choices_of(payload):
            index, text = choice.get("index"), choice.get("text")
            if is_int(index) and isinstance(text, str):
                texts[index] = texts.get(index, "") + text
        if isinstance(payload.get("usage"), dict):
            usage = payload["usage"]
    return texts, chunks, usage


@requirement(
    "SDK-STREAM",
    level=Level.MUST,
    area="sdk",
    statement="The official openai SDK consumes a stream (with include_usage) without error, "
    "and the text per choice and the usage it reads match the wire.",
    source=SOURCE,
    evidence="client-visible",
    applies=_via_sdk(stream=True),
)
def sdk_stream(ctx: Context) -> None:
    _sdk_error(ctx)
    view = ctx.exchange.sdk or {}
    if not view.get("chunks"):
        raise Violation("the SDK read no chunk from the stream: users' code gets no text")
    if view.get("text_none"):
        raise Violation(
            f"the SDK read choices[].text as None in {view['text_none']} chunk(s) (the wire "
            "omits text): users' code that joins the text raises"
        )
    texts, chunks, usage = _wire_stream(ctx)
    _differs("chunk count", view.get("chunks"), chunks)
    _differs("text per choice index", view.get("texts"), texts)
    if usage is not None:
        _differs(
            "usage.total_tokens",
            (view.get("usage") or {}).get("total_tokens"),
            usage.get("total_tokens"),
        )
