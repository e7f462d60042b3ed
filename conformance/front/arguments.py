"""The words of a suite run's command line that are neither the suite's nor pytest's.

pytest takes a stray word for a test path: ``completions-conformance my`` sent the
preflight, listed 56 MUSTs as untested, said ``verdict: error`` and only then pytest's
``ERROR: module or package not found: my``. An unknown option, a malformed ``-k``/``-m``
expression or a number option given a word (``--request-timeout abc``) ended in pytest's
multi-line usage text naming ``pytest.main()``, its ini file and rootdir. :func:`problem`
names the first such word in one line, in the suite's words; the plugin checks it before
pytest parses the line for good (``pytest_load_initial_conftests``), so the run ends with
one ``ERROR:`` line and exit 4 before any request (issue 27).

Light: imported by conformance/front/options.py in every pytest process.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

#: The suite's own command (conformance/front/cli.py), as its usage lines name it.
PROG = "completions-conformance"

#: The package folder that holds the pytest suite (conformance/test_*.py).
SUITE_DIR = Path(__file__).resolve().parents[1]
HELP = "see completions-conformance --help"


class Unread(str):
    """An option value its type could not read: kept, so that :func:`problem` refuses it
    naming the option, instead of argparse's usage text (see :func:`reads`)."""

    expected = "a value of its type"


def reads(kind: type[int] | type[float], expected: str) -> Callable[[str], Any]:
    """An option ``type`` that never fails inside argparse: ``kind(text)``, or the text as
    :class:`Unread` (``expected`` says what would do, e.g. "an integer")."""

    def read(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            unread = Unread(text)
            unread.expected = expected
            return unread

    read.__name__ = kind.__name__  # argparse names the type in its help
    return read


INTEGER = reads(int, "an integer")
NUMBER = reads(float, "a number")


def one_of(*choices: str) -> Callable[[str], Any]:
    """An option ``type`` that never fails inside argparse: one of ``choices``, or the text
    as :class:`Unread` (argparse's ``choices`` would print pytest's usage text instead)."""

    def read(text: str) -> Any:
        if text in choices:
            return text
        unread = Unread(text)
        unread.expected = "one of " + ", ".join(choices)
        return unread

    read.__name__ = "choice"
    return read


def in_suite(arg: str, invocation_dir: Path) -> bool:
    """Whether a positional argument names the suite or a part of it (a path, a node ID,
    or ``conformance``/``conformance.test_x`` with --pyargs)."""
    path = arg.split("::", 1)[0]
    if path == "conformance" or path.startswith("conformance."):
        return True
    resolved = Path(invocation_dir, path).resolve()
    return resolved == SUITE_DIR or SUITE_DIR in resolved.parents


def _expression_problem(option: str, expression: str) -> str | None:
    """A ``-k``/``-m`` expression pytest would refuse only after the run had started."""
    if not expression:
        return None
    try:  # pytest's own parser (private: without it, pytest still refuses it, later)
        from _pytest.mark.expression import Expression
    except ImportError:
        return None
    try:
        Expression.compile(expression)
    except SyntaxError as exc:
        return f"{option} {expression!r}: not a valid expression: {exc.msg} (column {exc.offset})"
    return None


def nearest(flag: str, options: Iterable[str]) -> str | None:
    """The option of ``options`` that ``flag`` most likely misspells (``--max-exampels``:
    ``--max-examples``), if one is close enough."""
    close = difflib.get_close_matches(flag.split("=", 1)[0], list(options), n=1, cutoff=0.8)
    return close[0] if close else None


def problem(
    namespace: argparse.Namespace,
    unknown: Sequence[str],
    invocation_dir: Path,
    options: Iterable[str] = (),
) -> str | None:
    """The first word of a suite run's command line that cannot run, in one line; None
    when every word is an option of the suite or of pytest, or a part of the suite. An
    unknown option names the nearest of ``options`` (the suite's), if one is near."""
    for flag in unknown:
        near = nearest(flag, options)
        hint = f"did you mean {near}? {HELP}" if near else HELP
        return f"{flag!r} is not an option of the suite or of pytest ({hint})"
    for name, value in vars(namespace).items():
        if isinstance(value, Unread):
            return f"--{name.replace('_', '-')} {str(value)!r}: expected {value.expected}"
    for arg in getattr(namespace, "file_or_dir", None) or ():
        if not in_suite(str(arg), invocation_dir):
            return f"{str(arg)!r} is not an option of the suite or of pytest ({HELP})"
        path = str(arg).split("::", 1)[0]
        named = path == "conformance" or path.startswith("conformance.")  # --pyargs
        if not named and not Path(invocation_dir, path).exists():
            return f"{path!r}: no such file of the suite"
    return _expression_problem("-k", getattr(namespace, "keyword", "") or "") or (
        _expression_problem("-m", getattr(namespace, "markexpr", "") or "")
    )


def one_line(usage: str) -> str:
    """pytest's multi-line usage error (usage, ``error:``, inifile, rootdir) as its one line
    that says what is wrong."""
    said = [line.split(": error: ", 1)[1] for line in usage.splitlines() if ": error: " in line]
    return said[0] if said else " ".join(usage.split())
