"""The import graph of the installed package: every arrow points down, and there is no cycle.

Every module of ``conformance`` (with ``conformance.strategies`` and ``conformance.reports``,
which live in the repository's top-level ``strategies/`` and ``reports/``) is parsed with
``ast``; every import (also those inside functions, which the code uses to stay cheap to
import) is an arrow to the module it names. A module may import its own layer and those
below it, and the graph of arrows has no cycle. ARCHITECTURE.md draws the layers.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "conformance"

#: The layers, bottom first: a subpackage of ``conformance`` each. The package's own
#: modules (the public face ``__init__``, ``__main__`` and the pytest suite ``test_*``)
#: sit on top of them all.
LAYERS = ("judging", "strategies", "reference", "run", "reports", "front")
TOP = len(LAYERS)


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return TOP


def layer_name(module: str) -> str:
    index = layer(module)
    return LAYERS[index] if index < TOP else "the package's face"


def modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name (one real tree, no link followed)."""
    found = {}
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith(".py"):
                continue
            parts = list(Path(folder, name).relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = Path(folder, name)
    return found


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of the package that ``module`` (at ``path``) imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                # ``from conformance.run import engine`` imports the submodule, not the package.
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {
        name for name in found if name.split(".")[0] in ("conformance", "strategies", "reports")
    }


def graph() -> dict[str, set[str]]:
    every = modules()
    known = set(every)
    return {name: imports(path, name, known) - {name} for name, path in every.items()}


def cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(arrows):
        if root in index:
            continue
        work = [(root, iter(sorted(arrows[root] & arrows.keys())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(arrows[step] & arrows.keys()))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward(arrows: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (name, target)
        for name, targets in arrows.items()
        for target in targets
        if target in arrows and layer(target) > layer(name)
    )


def test_every_module_is_read() -> None:
    every = modules()
    # Every file under the package is in, the generator and the reports included: pathlib's
    # rglob (which follows no symlink) sees the same tree the layer rule reads.
    assert "conformance.strategies._draw" in every and "conformance.reports.junit" in every
    assert len(every) == sum(1 for _ in PACKAGE.rglob("*.py"))


def test_the_package_is_one_real_tree() -> None:
    """No symlink inside the package: the wheel, import-graph tools and rglob see each module
    once; the repository's top-level strategies/ and reports/ are the links, into it."""
    links = [p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*") if p.is_symlink()]
    assert not links, f"symlinks inside the package: {links}"
    for top in ("strategies", "reports"):
        assert (ROOT / top).resolve() == PACKAGE / top, f"{top}/ must lead to conformance/{top}/"


def test_imports_point_down_only() -> None:
    found = upward(graph())
    assert not found, "\n".join(
        f"{a} ({layer_name(a)}) imports {b} ({layer_name(b)}), a layer above it" for a, b in found
    )


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(graph())
    assert not found, "\n".join("cycle: " + " <-> ".join(c) for c in found)


def test_nothing_imports_the_generic_top_level_names() -> None:
    # The wheel installs conformance.strategies and conformance.reports only: a bare
    # ``import strategies`` would work in a checkout and fail once installed.
    files = [*modules().values(), *ROOT.glob("tests/**/*.py"), *ROOT.glob("tools/**/*.py")]
    files += [*ROOT.glob("benchmarks/**/*.py")]
    bare = sorted(
        f"{path.relative_to(ROOT)}: {target}"
        for path in files
        for target in imports(path, "x.y", set())
        if target.split(".")[0] in ("strategies", "reports")
    )
    assert not bare, "\n".join(bare)


def test_the_checker_sees_an_upward_arrow_and_a_cycle() -> None:
    assert (
        layer("conformance.judging.verdict.verdict") == 0
        and layer("conformance.reports.junit") == 4
    )
    assert layer("conformance.test_completions") == TOP
    assert upward({"conformance.judging.a": {"conformance.run.b"}, "conformance.run.b": set()})
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(loop) == [["a", "b", "c"]]
    verdict = PACKAGE / "judging" / "verdict" / "decision.py"
    every = set(modules())
    assert "conformance.judging.verdict.record" in imports(
        verdict, "conformance.judging.verdict.decision", every
    )


@pytest.mark.parametrize("name", LAYERS)
def test_each_layer_is_a_folder(name: str) -> None:
    assert (PACKAGE / name / "__init__.py").is_file()


#: Modules that talk to a server: the judge core imports none of them (ARCHITECTURE.md:
#: judging judges bytes already received; a document at a URL is fetched by run/fetch.py).
HTTP_MODULES = (
    "httpx",
    "requests",
    "aiohttp",
    "urllib3",
    "openai",
    "http.client",
    "urllib.request",
)


def http_imports(path: Path) -> set[str]:
    """The HTTP modules of ``HTTP_MODULES`` that the module at ``path`` imports (anywhere)."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            named |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {
        http
        for name in named
        for http in HTTP_MODULES
        if name == http or name.startswith(http + ".")
    }


def test_the_judge_core_speaks_no_http() -> None:
    found = sorted(
        f"{name} imports {http}"
        for name, path in modules().items()
        if layer(name) == LAYERS.index("judging")
        for http in http_imports(path)
    )
    assert not found, "only run/ talks to a server (run/fetch.py fetches documents): " + (
        "; ".join(found)
    )


@pytest.mark.parametrize(
    ("source", "seen"),
    [
        ("import httpx", {"httpx"}),
        ("def f():\n    from httpx import Client", {"httpx"}),
        ("from urllib import request", {"urllib.request"}),
        ("import http.client", {"http.client"}),
        ("from urllib.parse import urlsplit\nfrom http import HTTPStatus", set()),
    ],
)
def test_the_http_check_sees_an_http_import(tmp_path: Path, source: str, seen: set[str]) -> None:
    path = tmp_path / "module.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert http_imports(path) == seen
