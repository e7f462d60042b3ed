"""Where the OpenAPI document comes from: a vendored name, a path, a URL, or the target.

``read_source`` returns the document's bytes with their sha256 and where they came from;
``parse`` turns them into a mapping. Two costs are kept small here:

- **Fetching** (``--spec https://...``, ``--spec target``): one GET, sent as requests to
  the target are (the API key as a bearer token, every ``--header``), read under the
  same bounds (time to first byte, total time, bytes), redirects followed only within
  the same origin so credentials never leave it, and every secret scrubbed from the
  one-line error. The copy is kept for the run: the xdist controller fetches, and its
  workers (started after it, with its environment) read the controller's copy instead
  of fetching again (``HANDOFF_ENV``).
- **Parsing a large document** (OpenAI's is ~3 MB of YAML): LibYAML's C loader when
  PyYAML has it, and a cache, keyed by the document's sha256, of the document slimmed to
  what the suite reads (the completions operation with its ``$ref`` inlined, servers,
  security). A changed document has another digest, so the cache cannot go stale.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import yaml

from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.redaction import REDACTED, Limits

#: Where the target publishes its document, tried in order by ``--spec target``.
TARGET_DOCUMENT_PATHS = ("/openapi.json", "/v1/openapi.json")
#: Documents above this size are slimmed and cached (the vendored small ones never are).
SLIM_ABOVE_BYTES = 512 * 1024
#: Bump when the slimmed form changes, so old cache entries are not read.
SLIM_FORMAT = 1
CACHE_ENV = "CONFORMANCE_CACHE_DIR"
#: The xdist controller's copy of a fetched document, read by its workers.
HANDOFF_ENV = "CONFORMANCE_FETCHED_SPEC"
MAX_REDIRECTS = 5

Document = dict[str, Any]
Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SourceError(ConformanceError):
    """The document cannot be had; the message is one line, with no secret in it."""


@dataclass(frozen=True, slots=True)
class Source:
    """A document's bytes, their digest and where they came from."""

    name: str
    origin: str  # a path or a URL, for messages and reports
    data: bytes
    path: Path  # a local file holding ``data``
    url: str | None = None  # set when fetched: relative server URLs resolve against it

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


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


def is_url(name: str) -> bool:
    return name.startswith(("http://", "https://"))


# -- fetching ---------------------------------------------------------------------------


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


# -- reading and parsing ----------------------------------------------------------------


def file_source(path: Path, name: str) -> Source:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read spec {str(path)!r}: {exc.strerror or exc}") from None
    return Source(name, str(path), data, path)


def user_cache() -> Path:
    """The suite's folder in the user's cache ($XDG_CACHE_HOME, else ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "completions-conformance"


def cache_dir() -> Path:
    """Where slimmed documents are kept: $CONFORMANCE_CACHE_DIR, else the user cache."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    return user_cache() / "specs"


def _load_text(source: Source) -> Any:
    text = source.data.decode("utf-8-sig")
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)  # JSON is YAML, but the JSON parser is 10x faster
        except ValueError:
            pass
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())[:200]
        raise SourceError(f"spec {source.origin!r} is not valid YAML or JSON: {first}") from None


def parse(source: Source, slim: Callable[[Document], Document]) -> Document:
    """The document as a mapping; a large one slimmed by ``slim`` and cached by digest."""
    if len(source.data) <= SLIM_ABOVE_BYTES:
        document = _load_text(source)
        if not isinstance(document, dict):
            raise SourceError(f"spec {source.origin!r} is not an OpenAPI document")
        return document
    cached = cache_dir() / f"{source.sha256}.slim{SLIM_FORMAT}.json"
    try:
        loaded = json.loads(cached.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            return loaded
    except (OSError, ValueError):
        pass
    document = _load_text(source)
    if not isinstance(document, dict):
        raise SourceError(f"spec {source.origin!r} is not an OpenAPI document")
    slimmed = slim(document)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(slimmed, default=str), encoding="utf-8")
        partial.replace(cached)  # atomic: concurrent processes never read half a file
    except OSError:
        pass  # a read-only home: the next run parses again, nothing else changes
    # The same JSON round trip as a cache hit, so the first run and later runs agree.
    result: Document = json.loads(json.dumps(slimmed, default=str))
    return result
