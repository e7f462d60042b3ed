"""Transcripts: one recorded (or documented) wire exchange as a JSON file, and back.

The format is described in ``tests/transcripts/README.md``. This module is the only place
that knows it: ``to_transcript`` turns an :class:`~conformance.judging.wire.exchange.Exchange` the
suite's client produced into a redacted JSON-able dict; ``to_exchange`` rebuilds the
Exchange the client would have produced from those bytes (content coding undone the way
httpx undoes it, events parsed with the suite's own SSE parser, as conformance/run/client.py
does), so the judge can replay it offline; ``judge`` runs the public judge over it and
returns the set of failed requirement IDs.

A transcript names the document it was judged by in ``spec``: a vendored name is enough;
any other (a path, a URL, ``target``: the target's own ``/openapi.json``) is kept as a copy
beside the transcripts (``documents/<sha256>``) that ``spec_document`` points at, so that
re-judging it later, offline, reads the same bytes (``spec_of``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.judging.document.spec import BUILTIN_SPECS, TARGET_SPEC, Spec, SpecError, load_spec
from conformance.judging.document.spec_source import is_url
from conformance.judging.wire.exchange import Exchange
from conformance.judging.wire.wire import exchange_from_transcript
from conformance.run.fetch import HANDOFF_ENV

FORMAT = 1
REDACTED = "[REDACTED]"
# Request headers whose values are credentials (the auth probes' fake ones stay readable).
SECRET_HEADERS = ("authorization", "api-key", "x-api-key", "proxy-authorization", "cookie")
# Response headers whose values change on every run and say nothing about conformance.
VOLATILE_HEADERS = ("date", "set-cookie")
PATH = "/v1/completions"

# -- provenance ---------------------------------------------------------------------------
# Every transcript says how its bytes were obtained (tests/transcripts/README.md):
#   recorded  a real server sent them to the suite's client (server, version, command, date);
#   modelled  written from a cited issue, pull request, source file or document;
#   moved     written from a cited source that shows another endpoint (e.g. a chat-completions
#             bug shown on /v1/completions): `from` names that endpoint.
PROVENANCE_KINDS = ("recorded", "modelled", "moved")
RECORDED_KEYS = ("server", "version", "command", "date")
# A modelled exchange whose source shows no response headers keeps only these; requirements
# judged on other headers alone are then unknowable on replay and are not judged.
HEADERS_NONE_SHOWN = "none shown"
HEADERS_CITED = "cited"
BODY_HEADERS = ("content-type", "content-encoding")
HEADER_ONLY_REQUIREMENTS = frozenset({"REQUEST-ID-HEADER", "RESP-HEADERS-REQUIRED"})


def provenance_problems(data: dict[str, Any]) -> list[str]:
    """What the transcript's provenance lacks or contradicts (empty: well formed)."""
    prov = data.get("provenance")
    if not isinstance(prov, dict):
        return ["no provenance: say whether the bytes were recorded, modelled or moved"]
    kind = prov.get("kind")
    if kind not in PROVENANCE_KINDS:
        return [f"provenance.kind {kind!r} is not one of {', '.join(PROVENANCE_KINDS)}"]
    if kind == "recorded":
        return [f"recorded without {key}" for key in RECORDED_KEYS if not prov.get(key)]
    problems = []
    cites = prov.get("cites")
    if not isinstance(cites, list) or not cites or not all(isinstance(c, str) and c for c in cites):
        problems.append(f"{kind} without `cites` (the issue, pull request, file or document)")
    if kind == "moved" and not prov.get("from"):
        problems.append("moved without `from` (the endpoint the source shows)")
    if not prov.get("verified"):
        problems.append(f"{kind} without `verified` (whether the citation was found, and how)")
    headers = prov.get("headers")
    if headers not in (HEADERS_NONE_SHOWN, HEADERS_CITED):
        problems.append(f"provenance.headers must be {HEADERS_NONE_SHOWN!r} or {HEADERS_CITED!r}")
    elif headers == HEADERS_CITED and not prov.get("headers_source"):
        problems.append("headers cited without `headers_source`")
    elif headers == HEADERS_NONE_SHOWN:
        extra = [
            str(k)
            for k, _ in data.get("response", {}).get("headers", [])
            if str(k).lower() not in BODY_HEADERS
        ]
        if extra:
            problems.append(f"headers the source does not show: {', '.join(extra)}")
        unknowable = sorted(HEADER_ONLY_REQUIREMENTS & set(data.get("expect_failed", [])))
        if unknowable:
            problems.append(f"expects {', '.join(unknowable)} although no header is known")
    return problems


def unknowable(data: dict[str, Any]) -> frozenset[str]:
    """Requirements the transcript cannot witness: header-only ones when no header is known."""
    prov = data.get("provenance") or {}
    if prov.get("kind") != "recorded" and prov.get("headers") == HEADERS_NONE_SHOWN:
        return HEADER_ONLY_REQUIREMENTS
    return frozenset()


# -- the document a transcript was judged by ----------------------------------------------

DOCUMENTS = "documents"


def run_document(spec: str) -> tuple[Path, str] | None:
    """The file and origin of the document a suite run in this process judges by, for a
    ``--spec`` that is not vendored: the path itself, or the copy the suite keeps of a
    fetched one (``--spec target`` or a URL; run/fetch.py hands it to xdist workers)."""
    if spec in BUILTIN_SPECS:
        return None
    if spec == TARGET_SPEC or is_url(spec):
        try:
            handoff = json.loads(os.environ.get(HANDOFF_ENV) or "{}")
        except ValueError:
            return None
        file = handoff.get("file") if isinstance(handoff, dict) else None
        return (Path(file), str(handoff.get("url") or spec)) if file else None
    return Path(spec), spec


def keep_document(path: Path, folder: Path, origin: str) -> dict[str, str]:
    """Copy the document at ``path`` once into ``folder/documents/`` (named by its digest)
    and return the ``spec_document`` entry that points at it from ``folder``."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    suffix = path.suffix if path.suffix in (".json", ".yaml", ".yml") else ".json"
    name = f"{DOCUMENTS}/{digest[:16]}{suffix}"
    copy = folder / name
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        partial = copy.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(copy)  # atomic: xdist workers save beside each other
    return {"file": name, "sha256": digest, "origin": origin}


def spec_of(data: dict[str, Any], where: Path | None = None) -> Spec:
    """The document ``data`` was judged by: its vendored name, else the copy ``spec_document``
    points at (relative to ``where``, the transcript's folder), else its path."""
    name = str(data["spec"])
    document = data.get("spec_document")
    if name in BUILTIN_SPECS:
        return load_spec(name)
    if isinstance(document, dict) and document.get("file"):
        path = (where or Path()) / str(document["file"])
        spec = load_spec(str(path))
        if spec.sha256 != document.get("sha256"):
            raise SpecError(f"{path} is not the document {name!r} was judged by (sha256 differs)")
        return spec
    if name != TARGET_SPEC and not is_url(name) and Path(name).is_file():
        return load_spec(name)
    raise SpecError(
        f"the transcript was judged by --spec {name!r} but carries no spec_document: "
        "record it again (record_transcripts.py keeps the document), or pass the spec"
    )


# -- Exchange -> transcript ---------------------------------------------------------------


def _text_or_base64(data: bytes) -> dict[str, str]:
    try:
        return {"body": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(data).decode("ascii")}


def redact_headers(headers: dict[str, str], auth: str, secrets: Sequence[str]) -> dict[str, str]:
    """Request headers with every credential hidden (auth probes' fake values are kept)."""
    out = {}
    for name, value in headers.items():
        lname = name.lower()
        if lname in SECRET_HEADERS and not (lname == "authorization" and auth != "default"):
            value = "Bearer " + REDACTED if value.lower().startswith("bearer") else REDACTED
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        out[name] = value
    return out


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def to_transcript(
    exchange: Exchange,
    *,
    spec: str,
    source: dict[str, str],
    secrets: Sequence[str] = (),
    provenance: dict[str, Any] | None = None,
    document: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A redacted, JSON-able transcript of ``exchange`` (findings left for the promoter);
    ``document``: where the (non-vendored) document judged by is kept (keep_document)."""
    # Values too short to be secrets would blank out ordinary text if scrubbed.
    secrets = [s for s in secrets if s and len(s) >= 4]
    case = exchange.case
    request: dict[str, Any] = {
        "method": "POST",
        "path": PATH,
        "headers": redact_headers(exchange.request_headers, case.auth, secrets),
    }
    if case.raw_body is not None:
        request["raw_body"] = _scrub(case.raw_body.decode("utf-8", "replace"), secrets)
    else:
        request["body"] = json.loads(_scrub(json.dumps(case.body), secrets))
    response: dict[str, Any] = {
        "status": exchange.status,
        "headers": [
            [k, _scrub(v, secrets)]
            for k, v in exchange.headers.items
            if k.lower() not in VOLATILE_HEADERS
        ],
    }
    body = exchange.body
    for secret in secrets:
        body = body.replace(secret.encode(), REDACTED.encode())
    response.update(_text_or_base64(body))
    for name in ("transport_error", "bound"):
        if getattr(exchange, name):
            response[name] = _scrub(str(getattr(exchange, name)), secrets)
    return {
        "format": FORMAT,
        "title": case.label or "recorded exchange",
        "source": source,
        "provenance": provenance or {"kind": "recorded"},
        "spec": spec,
        **({"spec_document": document} if document else {}),
        "case": {
            "mode": case.mode,
            "label": case.label,
            "breaks": case.breaks,
            "auth": case.auth,
            "tags": sorted(case.tags),
        },
        "request": request,
        "response": response,
    }


# -- transcript -> Exchange ---------------------------------------------------------------


def to_exchange(data: dict[str, Any]) -> Exchange:
    """The Exchange conformance/run/client.py would have built from the transcript's bytes
    (the judge core's public builder: replaying a transcript is a user feature)."""
    return exchange_from_transcript(data)


def judge(data: dict[str, Any], spec: Any = None, *, where: Path | None = None) -> dict[str, str]:
    """Failed requirement ID -> the judge's message, for one transcript, by today's judge
    (the judge core's own: conformance.judging.judge.judge_alone, attribution included),
    under ``spec``, else the document it names (``where`` is its folder, see spec_of)."""
    from conformance.judging.checks import load_checks
    from conformance.judging.judge import judge_alone
    from conformance.judging.requirements import REGISTRY

    load_checks()
    spec = spec if spec is not None else spec_of(data, where)
    # A modelled exchange whose source shows no headers cannot witness header requirements.
    skip = unknowable(data)
    judges = [r for r in REGISTRY.values() if r.id not in skip]
    findings = judge_alone(spec, to_exchange(data), requirements=judges)
    # A check that crashed (outcome "error" once the reports slice adds it) is a suite
    # defect: never let it pass for "not failed".
    crashed = [f for f in findings if f.outcome == "error"]
    if crashed:
        raise RuntimeError(f"the check of {crashed[0].requirement} crashed: {crashed[0].message}")
    return {f.requirement: f.message for f in findings if f.outcome == "failed"}


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def dump(data: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
