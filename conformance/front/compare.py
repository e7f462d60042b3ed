"""``conformance-compare``: several runs' results.json side by side, for choosing a vendor.

    conformance-compare A.json B.json ... [--html OUT.html] [--md OUT.md] [--names a,b,...]

Writes the requirement × target matrix, the capabilities side by side and a score per
target as HTML and/or Markdown; with neither option, prints the Markdown. Bad input (a
missing file, not JSON, another schema_version, not a results document) ends with one
``conformance-compare: error: ...`` line on stderr and exit status 4 (bad input, as every front door: judging/verdict/outcomes.py).

The command line lives here; the pages are the reports layer's (``reports/matrix.py`` the
data, ``reports/markdown.py`` and ``reports/html.py`` the renderings). ``load_results``
reads one results.json back for every door that takes one (``--baseline``, the gate,
``conformance-merge``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from conformance.judging.exceptions import ConformanceError
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.verdict.results import RESULTS_SCHEMA_VERSION, Results
from conformance.reports.html import comparison_html
from conformance.reports.markdown import comparison_markdown
from conformance.reports.matrix import compare
from conformance.reports.schema import schema_errors

PROG = "conformance-compare"


class InputError(ConformanceError):
    """An input file or option the comparison cannot use; the message says why."""


def load_results(path: Path) -> Results:
    """Read one ``results.json``; raise :class:`InputError` saying what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a conformance results file (a JSON object is expected)")
    version = data.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION:
        raise InputError(
            f"{path}: results schema_version {version!r}, this tool reads {RESULTS_SCHEMA_VERSION}"
        )
    errors = schema_errors(data)
    if errors:
        raise InputError(f"{path}: not a conformance results file: {errors[0]}")
    return Results.from_json(data)


def display_names(paths: list[Path], runs: list[Results], names: str | None) -> list[str]:
    """The column names: ``--names``, else each run's target, else the file names."""
    if names is not None:
        given = [n.strip() for n in names.split(",")]
        if len(given) != len(paths) or not all(given):
            raise InputError(
                f"--names gives {len(given)} name(s) for {len(paths)} file(s); "
                "give one non-empty name per file"
            )
        return given
    targets = [str(r.info.target or p.stem) for p, r in zip(paths, runs, strict=True)]
    if len(set(targets)) == len(targets):
        return targets
    # Same target twice (e.g. two runs of the embedded reference): tell them apart by file.
    return [f"{t} ({p.name})" for t, p in zip(targets, paths, strict=True)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compare conformance runs (results.json files) side by side.",
    )
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json")
    parser.add_argument("--html", type=Path, metavar="OUT.html", help="write the HTML matrix")
    parser.add_argument("--md", type=Path, metavar="OUT.md", help="write the Markdown matrix")
    parser.add_argument(
        "--names", metavar="a,b,...", help="column names, one per file (default: the targets)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; return the exit status (0, or 4 on bad input: judging.outcomes)."""
    args = _parser().parse_args(argv)
    try:
        runs = [load_results(path) for path in args.results]
        names = display_names(args.results, runs, args.names)
        comparison = compare(list(zip(names, runs, strict=True)))
        markdown = comparison_markdown(comparison)
        written = []
        if args.html is not None:
            written.append(_write(args.html, comparison_html(comparison)))
        if args.md is not None:
            written.append(_write(args.md, markdown))
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return BAD_INPUT
    if not written:
        sys.stdout.write(markdown)
    # The caveat goes to stderr as well: it must reach a terminal even when the Markdown
    # is piped into a file, and when only files were written.
    if comparison.differences:
        settings = ", ".join(d.setting for d in comparison.differences)
        print(
            f"{PROG}: warning: the runs differ in {settings}: not directly comparable",
            file=sys.stderr,
        )
    for path in written:
        print(f"report: {path.resolve()}")  # as the main run says them (front/terminal.py)
    return 0


def _write(path: Path, text: str) -> Path:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot write it ({exc.strerror or exc})") from None
    return path


if __name__ == "__main__":
    raise SystemExit(main())
