"""The repository's documents say true things: no citation of a file that is not in the
repository, and the README's installation and commands work outside a checkout too."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".venv-ci", ".tox", ".git", "build", "dist", "__pycache__", ".real-targets",
        ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache", "out"}  # fmt: skip
TEXT = {".md", ".py", ".j2", ".yml", ".yaml", ".toml", ".ini", ".sh", ".txt"}
#: Files the suite writes (report names), not files of the repository.
OUTPUTS = {"summary.md", "matrix.md", "job-summary.md", "replays.md"}  # files the tools write
TOPS = ("conformance", "reports", "strategies", "docs", "tests", "tools", "benchmarks",
        "specs", "ci", ".github")  # fmt: skip
MD = re.compile(r"(?<![\w/.$<-])((?:[\w.-]+/)*[\w-]+\.md)(?![\w/])")
TOP = "|".join(re.escape(t) for t in TOPS)
INLINE_PATH = re.compile(rf"`((?:{TOP})/[\w./-]+\.\w+)`")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _files() -> list[Path]:
    found = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP]  # never walk into venvs and caches
        found += [Path(top, n) for n in names if Path(n).suffix in TEXT]
    return sorted(found)


def _prose(path: Path) -> str:
    """What a file says in words: a Python file's strings and comments (not its code,
    where ``args.md`` is an attribute); other files whole."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        return text
    kinds = (tokenize.STRING, tokenize.COMMENT)
    return "\n".join(
        t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type in kinds
    )


def _exists(cited: str, where: Path) -> bool:
    return (ROOT / cited).exists() or (where.parent / cited).exists()


def _placeholder(cited: str) -> bool:
    """``OUT.md``, ``DIR/summary.md``, ``WORK/results/...``: names the reader fills in
    (``DESIGN.md`` is not one: a file that would have to exist)."""
    return (
        bool(re.match(r"[A-Z]+/", cited))
        or cited in ("OUT.md",)
        or cited.startswith("reports/out/")
    )


def _dangling_md(path: Path) -> list[str]:
    return [
        cited
        for cited in MD.findall(_prose(path))
        if Path(cited).name not in OUTPUTS and not _placeholder(cited) and not _exists(cited, path)
    ]


def test_no_file_cites_a_markdown_file_that_is_not_in_the_repository() -> None:
    dangling = [
        f"{path.relative_to(ROOT)}: {cited}"
        for path in _files()
        # The tests name the temporary files they write.
        if not (path.parent.name == "tests" and path.suffix == ".py")
        for cited in _dangling_md(path)
    ]
    assert not dangling, dangling


def test_the_check_sees_a_dangling_citation(tmp_path: Path) -> None:
    doc = tmp_path / "x.py"
    doc.write_text(
        '"""Levels as in DESIGN.md and docs/design.md."""\nargs.md = 1  # see notes/a.md\n'
    )
    assert _dangling_md(doc) == ["DESIGN.md", "notes/a.md"]  # docs/design.md is there


def test_no_document_cites_a_repository_path_that_is_not_there() -> None:
    """Inline code paths in Markdown prose (`docs/x.md`, `conformance/y.py`); commands in
    fenced blocks may name files they write."""
    dangling = []
    for path in _files():
        if path.suffix != ".md":
            continue
        prose = FENCE.sub("", path.read_text(encoding="utf-8"))
        for cited in INLINE_PATH.findall(prose):
            if "*" in cited or "<" in cited or _placeholder(cited) or _exists(cited, path):
                continue
            dangling.append(f"{path.relative_to(ROOT)}: {cited}")
    assert not dangling, dangling


def test_readme_installs_from_outside_and_keeps_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # No index serves the package: the README must not pretend one does.
    assert not re.search(r"pip install ['\"]?completions-conformance\b", readme)
    assert 'pip install "git+https://github.com/OWNER/completions-conformance' in readme
    assert "OWNER: a placeholder" in readme
    # The workflow example uses the Action, not an install that only works in a checkout.
    workflow = readme[readme.index("```yaml") :]
    assert "uses: OWNER/completions-conformance@" in workflow
    assert "pip install -e" not in workflow
    quick = readme[readme.index("## Quick start") : readme.index("## Pointing it")]
    blocks = re.findall(r"```\n(.*?)\n```", quick, re.S)
    assert blocks[1:] == ["pytest conformance", "pytest -n auto"], blocks


def test_tox_lists_every_environment() -> None:
    """Issue 27, item 8: ``tox -l`` hid the conformance and real-targets environments. The
    suite's main job is a default environment; real-targets (third-party installs) stays
    opt-in, and ``tox l`` names it with its description."""
    if importlib.util.find_spec("tox") is None:
        pytest.skip("tox is not installed (the [dev] extra)")
    listed = subprocess.run(
        [sys.executable, "-m", "tox", "-l"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert listed.stdout.split() == ["tests", "exhaustive", "lint", "types", "conformance"]
    every = subprocess.run(
        [sys.executable, "-m", "tox", "l"], cwd=ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    assert "additional environments:" in every and "real-targets -> " in every, every


def test_ci_runs_both_tiers_the_readme_names() -> None:
    """Issue 27, item 9: the default tier is fast; the exhaustive one is marked, and CI
    runs both, as the README says."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    default, exhaustive = ci.index("pytest -n auto"), ci.index("pytest -n auto -m exhaustive")
    assert default < exhaustive
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`pytest -n auto -m exhaustive`" in readme and "CI (`.ci/run`)" in readme
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"-m", "not exhaustive"' in pyproject and '"exhaustive: ' in pyproject


def test_every_module_a_document_names_exists() -> None:
    """A module named in the documents (``conformance/judging/verdict/decision.py``) is where the
    documents say: a move or a rename that leaves a stale path fails here."""
    docs = [
        ROOT / "ARCHITECTURE.md",
        ROOT / "README.md",
        ROOT / "specs" / "README.md",
        ROOT / "tests" / "transcripts" / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    named = re.compile(
        r"(?<![\w/.-])((?:conformance|reports|strategies|tools|tests|benchmarks)/[\w/.-]+\.py)\b"
    )
    stale = [
        f"{doc.name}: {m.group(1)}"
        for doc in docs
        for m in named.finditer(doc.read_text(encoding="utf-8"))
        if not (ROOT / m.group(1)).is_file()
    ]
    assert not stale, stale
