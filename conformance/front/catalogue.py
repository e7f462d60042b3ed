"""``python -m conformance.front.catalogue``: the requirement catalogue, printed, written or checked.

    python -m conformance.front.catalogue            # print it
    python -m conformance.front.catalogue --write    # rewrite docs/requirements.md (run from the repo root)
    python -m conformance.front.catalogue --check    # exit 1 when docs/requirements.md is out of date

The registry and the vendored documents are gathered here; ``reports/requirement_table.py``
renders them. ``tests/test_reports.py`` fails when the file and the registry disagree, so
the catalogue cannot drift as requirements are added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.judging.checks import load_checks
from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.document.spec import Spec, load_spec, specs_dir
from conformance.judging.requirements import REGISTRY, Requirement
from conformance.reports.requirement_table import catalogue_markdown

DEFAULT_PATH = Path("docs/requirements.md")
PROG = "python -m conformance.front.catalogue"
COMMAND = f"{PROG} --write"


def _documents(contract: Contract = DEFAULT_CONTRACT) -> list[Spec]:
    """The vendored documents, each as the suite loads it (errata applied)."""
    paths = sorted(specs_dir().glob("*.yaml"))
    return [load_spec(path.stem, contract=contract) for path in paths]


def render_catalogue() -> str:
    """The catalogue of every registered requirement, under each vendored document."""
    load_checks()
    requirements: list[Requirement] = list(REGISTRY.values())
    return catalogue_markdown(
        requirements, _documents(), _documents(Contract.DOCUMENT), command=COMMAND
    )


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the catalogue."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
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
