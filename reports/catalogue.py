"""The requirement catalogue (``docs/requirements.md``), generated from the registry.

    python -m conformance.reports.catalogue            # print it
    python -m conformance.reports.catalogue --write    # rewrite docs/requirements.md (run from the repo root)
    python -m conformance.reports.catalogue --check    # exit 1 when docs/requirements.md is out of date

``tests/test_reports.py`` fails when the file and the registry disagree, so the catalogue
cannot drift as requirements are added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.judging.checks import load_checks
from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.document.spec import Spec, load_spec, specs_dir
from conformance.judging.requirements import REGISTRY, Requirement
from conformance.reports.summary import LEVELS, areas_of

DEFAULT_PATH = Path("docs/requirements.md")
COMMAND = "python -m conformance.reports.catalogue --write"


def _cell(text: str) -> str:
    # Registry text is ours, not the target's: only keep the table intact.
    return " ".join(text.replace("|", "\\|").split())


def _documents(contract: Contract = DEFAULT_CONTRACT) -> list[Spec]:
    """The vendored documents, each as the suite loads it (errata applied)."""
    paths = sorted(specs_dir().glob("*.yaml"))
    return [load_spec(path.stem, contract=contract) for path in paths]


def _level(requirement: Requirement, spec: Spec, alone: Spec) -> str:
    """The level and evidence under the default contract, and under the document contract
    where that differs."""
    judged, other = requirement.under(spec), requirement.under(alone)
    cell = f"{judged.level.value} ({judged.evidence or '-'})"
    if other.level != judged.level:
        cell += f"; document contract: {other.level.value}"
    return cell


def render_catalogue() -> str:
    """Every registered requirement (ID, level and evidence under each vendored document,
    statement, source), by area."""
    load_checks()
    requirements: list[Requirement] = list(REGISTRY.values())
    documents = _documents()
    alone = _documents(Contract.DOCUMENT)

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
        f"<!-- Generated from the requirement registry by `{COMMAND}`; do not edit. -->",
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


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the catalogue."""
    parser = argparse.ArgumentParser(
        prog="python -m conformance.reports.catalogue", description=__doc__
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the catalogue file")
    mode.add_argument("--check", action="store_true", help="exit 1 when it is out of date")
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH, help=f"default {DEFAULT_PATH}")
    args = parser.parse_args(argv)
    text = render_catalogue()
    if args.write:
        args.path.write_text(text, encoding="utf-8")
        print(f"wrote {args.path}")
    elif args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
        if current != text:
            print(f"{args.path} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
