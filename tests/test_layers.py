"""Imports point down only: judge core <- generator <- engine <- runner and reports.

Every import in the package (also those inside functions, which the code uses to stay
cheap to import) is parsed with ``ast`` and checked against the layer of its module, so a
new upward import fails here instead of growing a cycle. ARCHITECTURE.md draws the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Layer of each module, by the longest matching dotted prefix; a module may import its
#: own layer and those below it.
LAYERS = {
    "conformance": 0,  # the judge core: what is not listed below
    "strategies": 1,  # the request generator
    "conformance.engine": 2,
    "conformance.item": 2,
    "conformance.scenarios": 2,
    "conformance.schedule": 2,
    "conformance.preflight": 2,
    "conformance.assembly": 2,
    "conformance.option_values": 2,  # checks a Setup before assembly
    "conformance.reference": 2,  # the embedded target: validates with the core and generator
    "conformance.reference.proofs": 3,  # runs the suite against every fault
    "conformance.reference.proof_table": 3,  # renders docs/proof.md, measures EXACT
    "conformance.runner": 3,
    "conformance.plugin": 3,
    "conformance.options": 3,
    "conformance.arguments": 3,  # the command line's words that are not the suite's
    "conformance.terminal": 3,
    "conformance.cli": 3,
    "conformance.gate": 3,  # the CI gate (GitHub Action): shards, merge, job summary
    "conformance.traffic_cli": 3,  # judge FILE...: reads traffic, writes the reports
    "conformance.proxy": 3,  # the judging reverse proxy: judges, serves, writes the reports
    "conformance.forward": 3,  # the proxy's forwarding process
    "conformance.__main__": 3,
    "conformance.test_": 3,  # the pytest suite
    "reports": 3,
}
NAMES = {0: "judge core", 1: "generator", 2: "engine", 3: "runner/reports"}
#: The package's face (conformance/__init__.py) re-exports from every layer.
FACADE = "conformance"
#: Upward imports not yet removed, each with why it is still there. Shrink, never grow.
KNOWN: set[tuple[str, str]] = set()


def layer(module: str) -> int:
    def under(prefix: str) -> bool:
        if prefix.endswith("_"):
            return module.startswith(prefix)
        return module == prefix or module.startswith(prefix + ".")

    return LAYERS[max(filter(under, LAYERS), key=len)]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            # ``from conformance import scenarios`` imports a submodule.
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {
        name for name in found if name.split(".")[0] in ("conformance", "strategies", "reports")
    }


def modules() -> list[tuple[str, Path]]:
    files = [p for d in ("conformance", "strategies", "reports") for p in (ROOT / d).rglob("*.py")]
    return sorted((module_name(p), p) for p in files)


def upward() -> set[tuple[str, str]]:
    known_modules = {name for name, _ in modules()}
    out = set()
    for name, path in modules():
        if name == FACADE:
            continue
        for target in imports(path, name):
            if target not in known_modules:
                continue  # ``from conformance import X`` where X is a name, not a module
            if layer(target) > layer(name):
                out.add((name, target))
    return out


def test_imports_point_down_only() -> None:
    found = upward()
    new = sorted(found - KNOWN)
    assert not new, "\n".join(
        f"{a} ({NAMES[layer(a)]}) imports {b} ({NAMES[layer(b)]})" for a, b in new
    )
    assert not (KNOWN - found), f"no longer needed, remove from KNOWN: {sorted(KNOWN - found)}"


def test_the_judge_core_imports_no_generator_engine_runner_or_report() -> None:
    core = {
        target
        for name, path in modules()
        if name.startswith("conformance.judging")
        for target in imports(path, name)
    }
    assert all(layer(t) == 0 for t in core), sorted(t for t in core if layer(t))


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    probe = ROOT / "conformance" / "judging" / "verdict.py"
    assert "conformance.judging.record" in imports(probe, "conformance.judging.verdict")
    assert layer("conformance.judging.verdict") == 0 and layer("reports.merge") == 3
    assert layer("conformance.test_completions") == 3 and layer("strategies._cases") == 1
