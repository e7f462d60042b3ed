"""The first screens a new user sees run as written and end as their text says (issue 27).

The README's examples are read from the README itself, so that a change to either the text
or the behaviour that makes them disagree fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _readme_command(start: str) -> list[str]:
    """The README's command that begins with ``start`` (in backticks or a code block),
    split into words, line continuations and bracketed optional parts removed."""
    found = re.search(rf"({re.escape(start)}[^`]*)`", README)
    assert found, f"the README no longer shows `{start} ...`"
    text = re.sub(r"\\\n\s*", " ", found.group(1))
    return re.sub(r"\[[^\]]*\](\.\.\.)?", "", text).split()


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """The reference target as the README serves it (``--port 0``: the one change, so that
    parallel runs do not collide); its base URL as it prints it."""
    words = _readme_command("python -m conformance.reference")
    port = words.index("--port")
    words[port + 1] = "0"
    process = subprocess.Popen(
        [sys.executable, *words[1:]], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    url = re.search(r"(http://127\.0\.0\.1:\d+)/v1", first)
    try:
        assert url, first
        yield url.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()


def test_the_keyless_reference_example_ends_as_the_readme_says(served: str, tmp_path: Path) -> None:
    """The README serves the reference target without a key and points the suite at it;
    "no API key: auth is not probed" is one of its stated reasons. So the run passes, with
    AUTH-REQUIRED listed as not applicable and why (it ended ``incomplete``, exit 7)."""
    assert "(e.g. no API key: auth is not probed)" in README
    words = _readme_command("pytest conformance --target-url http://127.0.0.1")
    words[words.index("--target-url") + 1] = served
    run = subprocess.run(
        [sys.executable, "-m", *words, "--report-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.splitlines() or [""]
    assert lines[-1].startswith("verdict: passed"), run.stdout[-3000:] + run.stderr
    assert run.returncode == 0
    assert not [line for line in lines if line.startswith("untested MUST")]
    assert (
        "not applicable MUST: AUTH-REQUIRED: scenario skipped: no API key configured "
        "(--api-key): auth is not probed"
    ) in lines
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| AUTH-REQUIRED | scenario skipped: no API key configured" in summary
