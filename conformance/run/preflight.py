"""Before the suite runs: prove that the target serves completions for the run's model.

One minimal valid request (the run's model, a short string prompt, max_tokens 1, made
valid under the run's spec by the one case constructor, conformance.strategies.build_case) must
get a 200 that is recognisably a completion. Anything else ends the run as bad input
with one line naming the likely cause: the model is unknown, the credentials are refused,
or the URL is not a completions API. A base URL that already ends in the spec's path
prefix (``http://host/v1``, as OpenAI SDK users type it) is accepted: the prefix is
dropped once, and the run says which base URL it used, so the path never doubles.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from conformance.judging.document.spec import OPERATION_PATH, Spec
from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.client import Client

#: The spec's server path prefix: the operation path without its last segment ("/v1").
PATH_PREFIX = OPERATION_PATH.rsplit("/", 1)[0]
API_KEY_ENV = "CONFORMANCE_API_KEY"


class PreflightFailed(ConformanceError):
    """The target does not serve completions for this run; the message says why."""


def base_url(
    target_url: str, operation_path: str = OPERATION_PATH, server_path: str = PATH_PREFIX
) -> tuple[str, str | None]:
    """The base URL to send to, and a note when ``target_url`` already held the spec's path
    (the operation's path, or its server's path prefix: ``/v1`` for every vendored spec)."""
    url = target_url.rstrip("/")
    path = urlsplit(url).path
    for suffix in (operation_path, server_path):
        if suffix and path.endswith(suffix):
            base = url[: -len(suffix)]
            return base, f"using base URL {base} (the spec's {suffix} was already in --target-url)"
    return url, None


def minimal_body(model: str) -> dict[str, Any]:
    """The minimal request's body, before any document has a say."""
    return {"model": model, "prompt": "Say hi", "max_tokens": 1}


def probe_case(model: str, spec: Spec | None = None) -> Case:
    """The minimal request; under ``spec``, moved to its nearest valid values (a copy of a
    spec may allow only 5 characters of prompt, or no ``max_tokens`` below 2)."""
    body = minimal_body(model)
    if spec is None:
        return Case(body, mode="probe", label="preflight")
    from conformance.strategies import CaseSkipped, build_case

    try:
        return build_case(spec, body, mode="probe", label="preflight")
    except CaseSkipped as exc:
        raise PreflightFailed(f"no minimal valid request under the spec: {exc.reason}") from None


def quick_probe_case(model: str, spec: Spec) -> Case | None:
    """The minimal request as ``probe_case`` builds it, when the document's own compiled
    schema and its stated cross-field rules take it as it is; None when only the one case
    constructor can say (it imports openapi-core and Hypothesis: ~0.35 s that the run
    spends meanwhile, against a slow target, instead of before its first request).
    The run checks the two agree (conformance/run/assembly.py)."""
    from conformance.judging.document.oracle import cross_rules, request_schema_errors

    body = minimal_body(model)
    if "json" not in spec.request_media_type or spec.validators["request"] is None:
        return None
    if request_schema_errors(spec, body) or cross_rules(spec, body, set()):
        return None
    return Case(body, mode="probe", label="preflight")


def preflight(
    client: Client, model: str, spec: Spec | None = None, case: Case | None = None
) -> Exchange:
    """Send the minimal request (``case``: built already); return its exchange (a
    completion, or a 429 after retries).

    Raises PreflightFailed naming the likely cause otherwise.
    """
    exchange = client.send(case or probe_case(model, spec))
    if exchange.status == 429 or (exchange.status == 200 and is_completion(exchange)):
        return exchange
    raise PreflightFailed(diagnose(client, exchange, model))


def is_completion(exchange: Exchange) -> bool:
    """Whether a 200 looks like a completion (not whether it conforms: the checks judge that)."""
    if exchange.media_type == "text/event-stream":
        return True
    try:
        body = json.loads(exchange.body)
    except ValueError:
        return False
    return isinstance(body, dict) and ("choices" in body or "completion" in str(body.get("object")))


def diagnose(client: Client, exchange: Exchange, model: str) -> str:
    """The likely cause of a failed preflight, in one line."""
    url, status = client.url, exchange.status
    seen = f"{status} {_excerpt(exchange)}".strip()
    if status is None:
        return exchange.transport_error or f"no answer from {url}"
    if exchange.false_encoding:
        coding = exchange.false_encoding
        return (
            f"the {status} answer at {url} claims Content-Encoding: {coding}, but its body is "
            f"not {coding}, and read as sent it is not a completion either: {seen}"
        )
    if status == 401:
        if client.api_key:
            return f"the target rejected the API key (401) at {url}"
        return f"the target demands an API key (401): pass --api-key or set {API_KEY_ENV}"
    if status == 403:
        return f"the target refused the credentials (403) for model {model!r} at {url}: {seen}"
    if exchange.media_type == "text/html" or status in (405, 501):
        return f"{url} is not a completions API (POST answered {seen})"
    if status == 200:
        return f"{url} is not a completions API (200 without a completion: {seen})"
    if 400 <= status < 500 and model in exchange.body.decode("utf-8", "replace"):
        return f"the target does not serve model {model!r} (--model): {seen}"
    if status == 404:
        if _route_missing(client, exchange):
            return (
                f"{url} is not a completions API (404 there as on any path): "
                "is --target-url the API's base URL?"
            )
        return f"the target does not serve model {model!r} (404 on the completions route): {seen}"
    if 400 <= status < 500:
        return f"the target refused a minimal valid request at {url}: {seen}"
    return f"the target failed a minimal valid request at {url}: {seen}"


def _route_missing(client: Client, exchange: Exchange) -> bool:
    """Whether a path that cannot exist gets the same 404 as the completions route."""
    bogus = replace(client, path=f"{PATH_PREFIX}/conformance-no-such-route")
    try:
        other = bogus.send(exchange.case)
    finally:
        bogus.close()
    return other.status == 404 and other.body == exchange.body


def _excerpt(exchange: Exchange, limit: int = 160) -> str:
    text = " ".join(exchange.body[:limit].decode("utf-8", "replace").split())
    if not text:
        return f"({exchange.media_type or 'empty body'})"
    return repr(text) if len(exchange.body) <= limit else repr(text + "…")
