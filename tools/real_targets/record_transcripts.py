"""A pytest plugin that saves every exchange the suite's client makes as a transcript.

Loaded by run.py with ``-p record_transcripts`` (tools/real_targets on PYTHONPATH) when
``$CONFORMANCE_TRANSCRIPTS_DIR`` is set: each exchange is written, redacted (the API key
from ``$CONFORMANCE_API_KEY`` never reaches the file), as ``NNNN-<label>.json`` in that
folder, in the format of tests/transcripts/README.md, with ``judged_failed``: the
requirement IDs today's judge failed on it (the promoter, promote_transcript.py, turns
that into a reviewed ``expect_failed``). It wraps ``Client.paced`` from the outside, so
the suite itself is unchanged. Only exchanges with the completions endpoint are saved: the
format knows no other request (the suite's ``GET /v1/models``, which it counts but does not
judge, was saved as a POST to /v1/completions and judged as a completion).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import transcript

ENV_DIR = "CONFORMANCE_TRANSCRIPTS_DIR"
ENV_SOURCE = "CONFORMANCE_TRANSCRIPTS_SOURCE"  # "family|server version|how obtained"
# JSON: {"server", "version", "command", "server_command", "date"} of the recording run.
ENV_PROVENANCE = "CONFORMANCE_TRANSCRIPTS_PROVENANCE"
_counter = itertools.count(1)
_lock = threading.Lock()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "exchange"


def _source() -> dict[str, str]:
    family, server, obtained = (os.environ.get(ENV_SOURCE, "") + "||").split("|")[:3]
    return {
        "family": family or "unknown",
        "server": server or "unknown",
        "obtained": obtained or "recorded from a server run locally by tools/real_targets",
    }


def _provenance() -> dict[str, Any]:
    try:
        given = json.loads(os.environ.get(ENV_PROVENANCE) or "{}")
    except ValueError:
        given = {}
    return {**(given if isinstance(given, dict) else {}), "kind": "recorded"}


def recordable(exchange: Any) -> bool:
    """Whether ``exchange`` went to the completions endpoint (a transcript's only request)."""
    return urlsplit(str(getattr(exchange, "url", ""))).path.endswith(transcript.PATH)


def save(exchange: Any, folder: Path, spec: str) -> Path:
    """Write one exchange as a transcript with the judge's findings of today; a document
    that is not vendored (``--spec target``, a URL, a path) is kept beside it."""
    secrets = [os.environ.get("CONFORMANCE_API_KEY", "")]
    found = transcript.run_document(spec)
    document = None
    if found is not None:
        path, origin = found
        document = transcript.keep_document(path, folder, origin)
    data = transcript.to_transcript(
        exchange,
        spec=spec,
        source=_source(),
        secrets=secrets,
        provenance=_provenance(),
        document=document,
    )
    try:
        data["judged_failed"] = sorted(transcript.judge(data, where=folder))
    except Exception as exc:  # a judge crash is worth keeping beside the bytes
        data["judged_failed"] = [f"judge raised {type(exc).__name__}: {exc}"]
    with _lock:
        number = next(_counter)
    path = folder / f"{number:04d}-{_slug(exchange.case.label)}.json"
    transcript.dump(data, path)
    return path


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get(ENV_DIR)
    if not folder:
        return
    from conformance.run.client import Client

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    spec = str(config.getoption("--spec", default="aihubmix") or "aihubmix")
    # Every sender (the client's own send, the openai SDK's tee) goes through
    # Client.paced, which returns the final, scrubbed exchange: record it there.
    original = Client.paced

    def paced_and_saved(self: Client, attempt: Any, case: Any = None) -> Any:
        exchange = original(self, attempt, case)
        if recordable(exchange):
            save(exchange, target, spec)
        return exchange

    Client.paced = paced_and_saved  # type: ignore[method-assign]
