"""``completions-conformance``: its own help page, pytest's behind it, no warnings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.front import cli
from conformance.judging.verdict.outcomes import EXIT_CODES

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_opens_with_the_suites_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    page = capsys.readouterr().out
    first_screen = page.splitlines()[:24]
    assert first_screen[0].startswith("usage: completions-conformance")
    for option in ("--target-url URL", "--model NAME", "--api-key KEY", "--spec"):
        assert any(line.lstrip().startswith(option) for line in first_screen), option
    assert "pytest.main()" not in page and "--junit-prefix" not in page  # pytest's, not ours
    assert "--help-pytest" in page


def test_help_shows_every_suite_option_and_every_exit_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli.main(["run", "-h"])
    page = capsys.readouterr().out
    from conformance.front import option_table

    for option in option_table.of(option_table.RUN):
        assert option.flag in page, option.flag
    # The page's table is the one table of outcomes (conformance.judging.verdict.outcomes).
    for word, code in EXIT_CODES.items():
        assert f"  {word:<11} {code}  " in page


@pytest.mark.parametrize(
    ("command", "prog"),
    [("serve", "conformance.reference"), ("merge", "conformance-merge"), ("compare", "conformance-compare"),
     ("gate", "completions-conformance gate")],
)  # fmt: skip
def test_subcommands_are_the_existing_tools(
    command: str, prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--help"])
    assert exited.value.code == 0
    assert prog in capsys.readouterr().out


def test_pytest_help_is_one_option_away(tmp_path: Path) -> None:
    run = _cli("--help-pytest", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "--junit-prefix" in run.stdout and "--target-url" in run.stdout
    # Issue 27, item 6: it opened with "usage: pytest.main() [options]".
    first = run.stdout.splitlines()[0]
    assert first.startswith("pytest's own options, which completions-conformance passes"), first
    assert "pytest.main()" not in run.stdout


def test_a_run_takes_pytest_options_after_dashes_and_warns_of_nothing(tmp_path: Path) -> None:
    """The command imports ``conformance`` before pytest starts: pytest must not warn that
    it cannot rewrite it (nor anything else) on a normal run."""
    # As --help says: pytest's options anywhere on the line (-q) or after -- (-k).
    run = _cli("-q", "--max-examples", "1", "--report-dir", "out", "--", "-k", "unknown_model",
               cwd=tmp_path)  # fmt: skip
    out = run.stdout + run.stderr
    # One scenario alone leaves MUSTs untested (exit 7); pytest's -k reached pytest.
    assert run.returncode == 7, out
    assert run.stdout.splitlines()[-1].startswith("verdict: incomplete ("), out
    assert "26 deselected" in out or "deselected" in out
    assert "warning" not in out.lower(), out
    assert (tmp_path / "out" / "results.json").is_file()
