"""The requirement catalogue (``docs/requirements.md``) rendered: every requirement, by area.

A function of typed objects only: the registered requirements and the vendored documents
they are judged under, gathered by the command that prints, writes or checks the file
(``python -m conformance.front.catalogue``).
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.judging.document.spec import Spec
from conformance.judging.requirements import Requirement
from conformance.reports.summary import LEVELS, areas_of


def _cell(text: str) -> str:
    # Registry text is ours, not the target's: only keep the table intact.
    return " ".join(text.replace("|", "\\|").split())


def _level(requirement: Requirement, spec: Spec, alone: Spec) -> str:
    """The level and evidence under the default contract, and under the document contract
    where that differs."""
    judged, other = requirement.under(spec), requirement.under(alone)
    cell = f"{judged.level.value} ({judged.evidence or '-'})"
    if other.level != judged.level:
        cell += f"; document contract: {other.level.value}"
    return cell


def catalogue_markdown(
    requirements: Sequence[Requirement],
    documents: Sequence[Spec],
    alone: Sequence[Spec],
    *,
    command: str,
) -> str:
    """Every requirement (ID, level and evidence under each document, statement, source),
    by area. ``documents``: each vendored document under the default contract; ``alone``:
    the same documents under the document contract, in the same order; ``command``: what
    regenerates the file, named in its header."""

    def count(spec: Spec) -> str:
        return ", ".join(
            f"{n} {level}"
            for level in LEVELS
            if (n := sum(r.under(spec).level.value == level for r in requirements))
        )

    counts = [
        f"{spec.name}: {count(spec)}"
        + (f" (document contract: {count(a)})" if count(a) != count(spec) else "")
        for spec, a in zip(documents, alone, strict=True)
    ]
    lines = [
        "# Requirement catalogue",
        "",
        f"<!-- Generated from the requirement registry by `{command}`; do not edit. -->",
        "",
        f"{len(requirements)} requirements ({'; '.join(counts)}). A MUST failure fails the "
        "run; a SHOULD failure fails it only with `--strict-should`; a CAPABILITY the target "
        "declines with a proper 4xx is not a failure (see docs/design.md, "
        '"Requirement levels and evidence tiers"). IDs are stable: reports, baselines and '
        "`--checks` / `--skip-checks` refer to them.",
        "",
        "A requirement's level follows the evidence the judged document gives, so it is "
        "listed per vendored document, with that evidence: spec-schema, spec-text (the "
        "document's own field descriptions say it), client-visible (the openai SDK or a "
        "widely used client breaks or misreads), openai-contract (OpenAI's API reference "
        "says it and the document, which reuses OpenAI's field names, says nothing more) "
        "or server-habit (what OpenAI happens to do; never a MUST). A document given "
        "with `--spec PATH` is judged the same way.",
        "",
        "The level also follows the **contract** the document is judged under "
        "(`--contract`). Under `openai-compatible`, the default, a field the document "
        "declares under OpenAI's name, with a type OpenAI's value could take, binds "
        "OpenAI's documented meaning: openai-contract evidence about it is a MUST; the "
        "document wins where it says otherwise (a declared default, its schema, its "
        "text), and a field it does not declare binds nothing (SHOULD). Under `document` "
        "the document alone binds: openai-contract evidence is at most a SHOULD. Each "
        "cell gives the level under the default contract and, where it differs, under "
        "the document contract; every report says, per requirement, why it has its level.",
    ]
    header = "| ID | " + " | ".join(spec.name for spec in documents) + " | Statement | Source |"
    for area in areas_of(r.area for r in requirements):
        in_area = sorted((r for r in requirements if r.area == area), key=lambda r: r.id)
        if not in_area:
            continue
        lines += ["", f"## {area} ({len(in_area)})", ""]
        lines += [header, "|---|" + "---|" * len(documents) + "---|---|"]
        lines += [
            f"| `{r.id}` | "
            + " | ".join(_level(r, s, a) for s, a in zip(documents, alone, strict=True))
            + f" | {_cell(r.statement)} | {_cell(r.source)} |"
            for r in in_area
        ]
    return "\n".join(lines) + "\n"
