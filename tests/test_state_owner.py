"""One owner of a run's state: only conformance/judging/verdict/state.py writes a run's
RunInfo (``results.info``) and its RunRecord (``results.run_record``); every other module
calls the owner's named methods (``begin``, ``note_*``, ``set_record``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "conformance"
OWNER = PACKAGE / "judging" / "verdict" / "state.py"
#: The Results' attributes that hold a run's state.
STATE = ("info", "run_record")


def writes(source: str) -> list[str]:
    """The writes to ``X.info.field``, ``X.info`` itself, ``X.run_record`` and calls of
    ``X.info.update(...)``/``X.info.unset(...)`` in ``source``, as text."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and (
                target.attr in STATE
                or (isinstance(target.value, ast.Attribute) and target.value.attr == "info")
            ):
                found.append(ast.unparse(target))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "unset")
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "info"
        ):
            found.append(ast.unparse(node.func))
    return found


def test_only_the_owner_writes_a_runs_state() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {write}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != OWNER
        for write in writes(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "write through the owner (judging/verdict/state.py): " + "; ".join(
        offenders
    )


def test_the_scan_sees_each_kind_of_write() -> None:
    source = (
        "results.info.seed = 1\n"
        "results.run_record = record\n"
        "results.info.update(seed=1)\n"
        "self.info = RunInfo()\n"
        "results.note_ended(1.0)\n"
    )
    assert writes(source) == [
        "results.info.seed",
        "results.run_record",
        "self.info",
        "results.info.update",
    ]
