"""Where the OpenAPI document comes from: a vendored name or a path, read as bytes.

A ``Source`` is a document's bytes with their sha256 and where they came from; ``parse``
turns them into a mapping. The judge core speaks no HTTP: a document at a URL
(``--spec https://...``, ``--spec target``) is fetched by ``conformance/run/fetch.py``,
under the run's bounds and with its credentials, and judged from the ``Source`` it
returns, as a file's. Parsing a large document is kept cheap (OpenAI's is ~3 MB of YAML):
LibYAML's C loader when PyYAML has it, and a cache, keyed by the document's sha256, of the
document slimmed to what the suite reads (the completions operation with its ``$ref``
inlined, servers, security). A changed document has another digest, so the cache cannot
go stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.judging.exceptions import ConformanceError

#: Documents above this size are slimmed and cached (the vendored small ones never are).
SLIM_ABOVE_BYTES = 512 * 1024
#: Bump when the slimmed form changes, so old cache entries are not read.
SLIM_FORMAT = 1
CACHE_ENV = "CONFORMANCE_CACHE_DIR"

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


def is_url(name: str) -> bool:
    """Is ``name`` a document's http(s) URL (fetched by conformance/run/fetch.py)?"""
    return name.startswith(("http://", "https://"))


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
