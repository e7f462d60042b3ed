"""The judge core, at the bottom of the stack: the run record and the one ``decide()``.

Imports no generator, engine, runner or report code (tests/test_layers.py checks it).
"""

from __future__ import annotations

from conformance.judging.record import (
    EXCUSED,
    RunRecord,
    ScenarioRun,
    ShardMismatch,
    SkipCause,
    combine_shards,
)
from conformance.judging.verdict import (
    EXIT_CODES,
    WORDS,
    Coverage,
    Uncovered,
    Verdict,
    applicability,
    coverage,
    decide,
    deciding_levels,
    failing,
    verdict_word,
)

__all__ = [
    "EXCUSED",
    "EXIT_CODES",
    "WORDS",
    "Coverage",
    "RunRecord",
    "ScenarioRun",
    "ShardMismatch",
    "SkipCause",
    "Uncovered",
    "Verdict",
    "applicability",
    "combine_shards",
    "coverage",
    "decide",
    "deciding_levels",
    "failing",
    "verdict_word",
]
