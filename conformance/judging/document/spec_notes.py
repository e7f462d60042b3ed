"""What a run says about the document it judges by: header lines, the registry, identity.

The errata applied, the policies in force and the conventions read (``registry``, for the
reports), the header lines a run prints (``header_lines``), where the operation is
(``operation_line``) and the document's identity in results.json (``document_meta``).
"""

from __future__ import annotations

from typing import Any

from conformance.judging.document.contract import CONTRACT_HELP
from conformance.judging.document.policies import STRICT_SWITCH
from conformance.judging.document.spec import Spec


def operation_line(spec: Spec) -> str:
    """Where the operation is, for the header: ``POST /v1/completions`` and, where the
    document puts part of it in its server URL, which server path was used."""
    line = f"POST {spec.operation_path}"
    if spec.server_path:
        line += f" (server path {spec.server_path} + path {spec.path_key})"
    return line


def registry(spec: Spec) -> list[dict[str, Any]]:
    """Errata applied, policies in force and conventions read for ``spec``, one entry
    each, for reports.

    Each entry: ``{"kind": "erratum" | "policy" | "convention", "id", "title", "detail",
    "switch"}`` (a convention has no switch: it corrects nothing).
    """
    entries: list[dict[str, Any]] = [
        {
            "kind": "erratum",
            "id": e.id,
            "title": e.title,
            "detail": e.detail,
            "switch": STRICT_SWITCH,
        }
        for e in spec.errata
    ]
    entries += [
        {"kind": "policy", "id": p.id, "title": p.title, "detail": p.rationale, "switch": p.switch}
        for p in spec.policies
    ]
    # Conventions correct nothing, so no switch turns them off (conformance/judging/document/errata.py).
    entries += [
        {"kind": "convention", "id": c.id, "title": c.title, "detail": c.detail, "switch": ""}
        for c in spec.conventions
    ]
    return entries


def header_lines(spec: Spec) -> list[str]:
    """Terminal lines naming the errata, the policies and the conventions (or saying there
    are none), then the document (with its digest) and where its operation is."""
    strict = " (--strict-spec)" if spec.strict else ""
    errata = ", ".join(e.id for e in spec.errata) or "none" + strict
    policies = ", ".join(p.id for p in spec.policies) or "none" + strict
    conventions = ", ".join(c.id for c in spec.conventions) or "none"
    digest = f", sha256 {spec.sha256[:16]}" if spec.sha256 else ""
    return [
        f"conformance: contract {spec.contract.value}: {CONTRACT_HELP[spec.contract]}",
        f"conformance: errata applied: {errata}",
        f"conformance: policies: {policies}",
        f"conformance: conventions of the document: {conventions}",
        f"conformance: document {spec.origin}{digest}; operation {operation_line(spec)}",
    ]


def document_meta(spec: Spec) -> dict[str, Any]:
    """What every run's results say of the document judged and how (results.json meta)."""
    return {
        "spec": spec.name,
        "spec_title": f"{spec.title} {spec.version}".strip(),
        "spec_source": spec.origin,
        "spec_sha256": spec.sha256,
        "operation": operation_line(spec),
        "strict_spec": spec.strict,
        "contract": spec.contract.value,
    }
