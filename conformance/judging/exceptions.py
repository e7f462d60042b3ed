"""The suite's own exceptions share one base, ``ConformanceError``, so that a tool can
catch whatever the suite raises about its input or its run in one clause.

``Violation`` and ``Unsupported`` (conformance.judging.requirements) are not errors of the suite:
they are how a check says "failed" or "declined", and stay outside this hierarchy.
"""

from __future__ import annotations


class ConformanceError(Exception):
    """Base of every exception the suite raises about its input, its run or its results."""
