"""One table of verdicts and exit codes: every front door gives the documented code.

The same condition ends with the same exit code whichever door it came through: bad
input (a file or value the suite cannot use) is ``bad-input`` (4) for the run, the merge,
the comparison, the gate, the traffic judge, the proxy and the reference target's command
line; a merged run's code is its verdict's (tests/test_verdict_paths.py). The codes come from conformance/judging/verdict/outcomes.py
alone (no door keeps a number of its own).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conformance.front import cli
from conformance.judging.verdict.outcomes import BAD_INPUT, EXIT_CODES, MEANINGS, OUTCOMES, WORDS

ROOT = Path(__file__).resolve().parents[1]
MISSING = "does-not-exist.json"

#: Each front door, given input it cannot use (argv of ``completions-conformance``).
BAD_INPUTS = {
    "run": ["--spec", "no-such-spec"],
    "merge": [MISSING],
    "compare": [MISSING],
    "gate": ["--shards", "0"],
    "judge": [MISSING],
    "proxy": ["--upstream", "not a url"],
    "serve": ["--flavor", "no-such-flavor"],
}


@pytest.mark.parametrize("door", sorted(BAD_INPUTS))
def test_bad_input_is_the_same_code_at_every_door(
    door: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = BAD_INPUTS[door] if door == "run" else [door, *BAD_INPUTS[door]]
    try:
        code = cli.main([*argv, "-p", "no:cacheprovider"] if door == "run" else argv)
    except SystemExit as exited:
        code = exited.code  # argparse-based doors exit instead of returning
    out = capsys.readouterr()
    assert code == BAD_INPUT == EXIT_CODES["bad-input"], (door, code, out.out, out.err)
    # One line says what is wrong, not a traceback.
    assert "Traceback" not in out.err, out.err


def test_every_word_decide_gives_has_a_code_and_a_meaning() -> None:
    assert set(WORDS) <= set(EXIT_CODES) and set(WORDS) <= set(MEANINGS)
    codes = [o.exit_code for o in OUTCOMES]
    assert len(set(codes)) == len(codes)  # one code, one condition
    # pytest's own codes 2 (interrupted) and 5 (no tests) are never a verdict's.
    assert not {2, 5} & set(codes)


def _numbers_assigned_to_exit_names(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        numbers = isinstance(node, ast.Assign) and (
            (isinstance(node.value, ast.Constant) and isinstance(node.value.value, int))
            or (
                isinstance(node.value, ast.Tuple)
                and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, int)
                    for e in node.value.elts
                )
            )
        )
        if isinstance(node, ast.Assign) and numbers:
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any("EXIT" in n or "BAD_INPUT" in n or n == "ERROR" for n in names):
                found.append(f"{path.relative_to(ROOT)}: {', '.join(names)}")
        returned = isinstance(node, ast.Return) and isinstance(node.value, ast.Constant)
        if returned and node.value.value in (2, 3, 4, 6, 7):  # type: ignore[union-attr]
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: return {node.value.value}")
    return found


def test_no_front_door_keeps_an_exit_code_of_its_own() -> None:
    table = ROOT / "conformance" / "judging" / "verdict" / "outcomes.py"
    doors = [p for p in (ROOT / "conformance").rglob("*.py") if p != table]
    doors += list((ROOT / "reports").glob("*.py"))
    found = [line for path in doors for line in _numbers_assigned_to_exit_names(path)]
    assert not found, "exit codes belong in conformance/judging/verdict/outcomes.py:\n" + "\n".join(
        found
    )


def test_the_readme_table_is_the_one_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = {
        cells[1].strip().replace(" ", "-"): int(cells[2])
        for line in readme.splitlines()
        if (cells := line.split("|")) and len(cells) > 3 and cells[2].strip().isdigit()
    }
    assert rows == EXIT_CODES
