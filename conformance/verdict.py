"""The run's verdict: a stable path to the judge core's (conformance.judging.verdict)."""

from __future__ import annotations

from conformance.judging.verdict import (
    EXIT_CODES,
    WORDS,
    Coverage,
    Uncovered,
    Verdict,
    coverage,
    decide,
    deciding_levels,
)

__all__ = [
    "EXIT_CODES",
    "WORDS",
    "Coverage",
    "Uncovered",
    "Verdict",
    "coverage",
    "decide",
    "deciding_levels",
]
