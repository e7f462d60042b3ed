"""The OpenAPI document fetched over HTTP: ``--spec https://...`` and ``--spec target``.

The judge core reads a document's bytes (``judging/document/spec_source.py``: a vendored
name or a path, parsed and cached); getting them from a URL is talking to a server, so it
is here. One GET, sent as requests to the target are (the API key as a bearer token, every
``--header``), read under the same bounds (time to first byte, total time, bytes),
redirects followed only within the same origin so credentials never leave it, and every
secret scrubbed from the one-line error. The copy is kept for the run: the xdist controller
fetches, and its workers (started after it, with its environment) read the controller's
copy instead of fetching again (``HANDOFF_ENV``).

``load_spec`` is the public ``conformance.load_spec``: the core's, with a URL or ``target``
fetched here first.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from conformance.judging.document import spec
from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.document.spec import TARGET_SPEC, Spec, SpecError, spec_of
from conformance.judging.document.spec_source import Source, SourceError, is_url
from conformance.judging.wire.redaction import REDACTED, Limits

#: Where the target publishes its document, tried in order by ``--spec target``.
TARGET_DOCUMENT_PATHS = ("/openapi.json", "/v1/openapi.json")
#: The xdist controller's copy of a fetched document, read by its workers.
HANDOFF_ENV = "CONFORMANCE_FETCHED_SPEC"
MAX_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class Fetch:
    """How a document is fetched over HTTP: like the requests to the target."""

    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    limits: Limits = field(default_factory=Limits)
    target_url: str | None = None  # the base URL ``--spec target`` reads from

    def secrets(self) -> list[str]:
        values = [self.api_key or "", *(v for _, v in self.headers)]
        return [v for v in values if len(v) >= 4]

    def scrub(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, REDACTED)
        return text


def load_spec(
    name_or_path: str,
    *,
    strict: bool = False,
    fetch: Fetch | None = None,
    contract: Contract = DEFAULT_CONTRACT,
) -> Spec:
    """Load a vendored spec by name (``nscale``, ``aihubmix``, ``openai``), any document by
    path or http(s) URL, or ``target`` (the target's own ``/openapi.json``; ``fetch``
    says how to reach it), to be judged under ``contract`` (conformance/judging/document/contract.py)."""
    return spec_of(read_source(name_or_path, fetch), strict=strict, contract=contract)


def read_source(name_or_path: str, fetch: Fetch | None = None) -> Source:
    """The document's bytes: fetched for an http(s) URL or ``target``, else read by the
    core (a vendored name or a path)."""
    try:
        if name_or_path == TARGET_SPEC:
            return target_source(fetch or Fetch())
        if is_url(name_or_path):
            return fetch_source(name_or_path, fetch or Fetch())
    except SourceError as exc:
        raise SpecError(str(exc)) from None
    return spec.read_source(name_or_path)


def _same_origin(a: str, b: str) -> bool:
    x, y = urlsplit(a), urlsplit(b)
    return (x.scheme, x.netloc) == (y.scheme, y.netloc)


def _get(url: str, fetch: Fetch) -> tuple[int, bytes, str]:
    """GET ``url`` under the bounds: (status, body, final URL). Raises SourceError."""
    import httpx

    limits = fetch.limits
    headers = {"User-Agent": "completions-conformance", "Accept": "application/json, */*"}
    headers.update(dict(fetch.headers))
    if fetch.api_key:
        headers["Authorization"] = f"Bearer {fetch.api_key}"
    start = time.monotonic()
    with httpx.Client(follow_redirects=False, timeout=httpx.Timeout(limits.ttfb)) as http:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                with http.stream("GET", url, headers=headers) as response:
                    if response.is_redirect:
                        location = urljoin(url, response.headers.get("location", ""))
                        if not _same_origin(url, location):
                            raise SourceError(
                                f"{url} redirects to another origin ({location}); not followed, "
                                "so credentials stay with the target's origin"
                            )
                        url = location
                        continue
                    body = bytearray()
                    for piece in response.iter_bytes():
                        body += piece
                        if len(body) > limits.max_bytes:
                            raise SourceError(
                                f"{url} is larger than --max-body-bytes ({limits.max_bytes})"
                            )
                        if time.monotonic() - start > limits.total:
                            raise SourceError(f"{url} took longer than {limits.total:g} s")
                    return response.status_code, bytes(body), url
            except httpx.HTTPError as exc:
                reason = (str(exc) or type(exc).__name__).splitlines()[0][:200]
                raise SourceError(f"cannot fetch {url}: {reason}") from None
    raise SourceError(f"{url}: more than {MAX_REDIRECTS} redirects")


def _handoff_copy(url: str) -> Path | None:
    """The controller's copy of ``url``, when this process is one of its xdist workers
    (a controller, or a second run in the same process, always fetches afresh)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    try:
        handoff = json.loads(os.environ.get(HANDOFF_ENV, "") or "{}")
    except ValueError:
        return None
    path = Path(handoff.get("file", "")) if handoff.get("url") == url else None
    return path if path is not None and path.is_file() else None


def _keep_for_workers(url: str, data: bytes) -> Path:
    """Write the fetched bytes where this run's xdist workers will read them."""
    folder = Path(tempfile.mkdtemp(prefix="conformance-spec-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "document"
    path.write_bytes(data)
    os.environ[HANDOFF_ENV] = json.dumps({"url": url, "file": str(path)})
    return path


def fetch_source(url: str, fetch: Fetch) -> Source:
    """The document at ``url``, fetched once per run (workers read the controller's copy)."""
    name = Path(urlsplit(url).path).stem or urlsplit(url).netloc
    copy = _handoff_copy(url)
    if copy is not None:
        return Source(name, url, copy.read_bytes(), copy, url=url)
    try:
        status, body, final = _get(url, fetch)
    except SourceError as exc:
        raise SourceError(fetch.scrub(str(exc))) from None
    if status != 200:
        excerpt = " ".join(body[:120].decode("utf-8", "replace").split())
        raise SourceError(fetch.scrub(f"cannot fetch spec {url}: answered {status} {excerpt!r}"))
    return Source(name, url, body, _keep_for_workers(url, body), url=final)


def target_source(fetch: Fetch) -> Source:
    """The document the target publishes at its base URL (``--spec target``)."""
    if not fetch.target_url:
        raise SourceError("--spec target reads the document from --target-url; none was given")
    base = fetch.target_url.rstrip("/")
    for suffix in ("/v1/completions", "/completions", "/v1"):
        if urlsplit(base).path.endswith(suffix):
            base = base[: -len(suffix)]
            break
    tried = []
    for path in TARGET_DOCUMENT_PATHS:
        try:
            return fetch_source(base + path, fetch)
        except SourceError as exc:
            tried.append(str(exc))
    raise SourceError(f"--spec target: no document at {base}: {'; '.join(tried)}")
