"""ARCHITECTURE.md's folder list matches the tree, and no module is over 600 lines.

The folder list (the block under "## The folders") names every subpackage and module of the
installed package (one real tree: ``conformance/strategies`` and ``conformance/reports`` are
folders of it, the repository's top-level ``strategies/`` and ``reports/`` symlinks to them),
each with its one job; every name there is a file or
folder of the tree. A subpackage's ``__init__.py`` is named by its folder's line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "conformance"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
#: Where the line limit holds: the package (with strategies/ and reports/) and tools/.
LIMITED = (PACKAGE, ROOT / "tools")
MAX_LINES = 600
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>\S+)(?: {2,}(?P<job>\S.*))?$")


def folder_list() -> dict[str, str]:
    """Path (relative to the repository, folders ending in /) -> the job written beside it."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(r"^## The folders\n.*?^```\n(.*?)^```", text, re.M | re.S)
    assert match, "ARCHITECTURE.md has no folder list (a ``` block under '## The folders')"
    entries: dict[str, str] = {}
    stack: list[str] = []
    for line in match.group(1).splitlines():
        found = ENTRY.match(line)
        assert found, f"not an entry of the folder list: {line!r}"
        depth, rest = divmod(len(found["indent"]), 2)
        assert not rest and depth <= len(stack), f"bad indentation: {line!r}"
        del stack[depth:]
        path = "".join(stack) + found["name"]
        entries[path] = found["job"] or ""
        if found["name"].endswith("/"):
            stack.append(found["name"])
    return entries


def tree() -> set[str]:
    """Every module (``.py``) and every folder holding one, under conformance/ (a real tree,
    no link followed); a folder's ``__init__.py`` is named by the folder."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        here = Path(folder).relative_to(ROOT).as_posix() + "/"
        modules = [f for f in files if f.endswith(".py")]
        if modules:
            found.add(here)
        found |= {here + f for f in modules if not (f == "__init__.py" and here != "conformance/")}
    return found


def test_every_module_and_subpackage_is_in_the_folder_list() -> None:
    listed = set(folder_list())
    missing = sorted(tree() - listed)
    assert not missing, "add to ARCHITECTURE.md's folder list, with its job: " + ", ".join(missing)


def test_every_name_in_the_folder_list_exists() -> None:
    gone = sorted(p for p in folder_list() if not (ROOT / p).exists())
    assert not gone, "ARCHITECTURE.md's folder list names what is not there: " + ", ".join(gone)


def test_every_entry_says_its_job() -> None:
    silent = sorted(p for p, job in folder_list().items() if not job.strip())
    assert not silent, "give these a job in ARCHITECTURE.md's folder list: " + ", ".join(silent)


def test_the_layers_diagram_draws_the_layers_of_test_layers() -> None:
    from test_layers import LAYERS

    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(r"^## Layers and the import rule\n.*?^```\n(.*?)^```", text, re.M | re.S)
    assert match, "ARCHITECTURE.md has no layer diagram"
    diagram = match.group(1)
    drawn = [w for w in re.findall(r"^ (\w+) ", diagram, re.M) if w in LAYERS]
    assert drawn[::-1] == list(LAYERS), f"drawn top to bottom: {drawn}; bottom first: {LAYERS}"
    for layer in LAYERS:
        assert f"conformance/{layer}/" in diagram, layer


def limited_modules() -> list[Path]:
    out: list[Path] = []
    for root in LIMITED:
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            out += [Path(folder, f) for f in files if f.endswith(".py")]
    return sorted(out)


def lines_of(path: Path) -> int:
    """Lines as ``wc -l`` counts them."""
    return path.read_bytes().count(b"\n")


#: Where a full module of a kind splits: named in the failure, so the first addition to a
#: full module says where its next neighbour goes instead of only that it is too long.
SEAMS = {
    "faults_": "move its faults by stage (registry.STAGES) or theme into a sibling faults_*.py, "
    "listed in reference/faults.py and ARCHITECTURE.md (faults_stream.py took the stream stage)",
    "checks/": "start the area's next checks module (listed in checks/__init__.py), shared "
    "helpers in checks/common.py or a *_rules.py module",
}
GENERIC_SEAM = "split along a real seam (one module, one job)"


def seam(path: Path) -> str:
    """What a module over the limit should do, by its kind."""
    name = path.as_posix()
    return next((how for key, how in SEAMS.items() if key in name), GENERIC_SEAM)


def test_no_module_is_over_600_lines() -> None:
    modules = limited_modules()
    assert any(p.parts[-2:] == ("strategies", "_edge.py") for p in modules)
    over = [
        f"{p.relative_to(ROOT)}: {n} lines: {seam(p)}"
        for p in modules
        if (n := lines_of(p)) > MAX_LINES
    ]
    assert not over, f"max {MAX_LINES} lines a module: " + "; ".join(over)


def test_a_full_fault_module_is_told_where_to_split() -> None:
    assert "by stage" in seam(ROOT / "conformance" / "reference" / "faults_content.py")
    assert seam(ROOT / "conformance" / "run" / "engine.py") == GENERIC_SEAM


@pytest.mark.parametrize("body", ["x = 1\n" * 601])
def test_the_line_check_sees_a_long_module(tmp_path: Path, body: str) -> None:
    path = tmp_path / "long.py"
    path.write_text(body)
    assert lines_of(path) == 601 > MAX_LINES
