"""The fault catalogue of the reference target.

Each fault, switched on alone, makes the otherwise conformant reference target break one
requirement (or, for the names in ``TOLERATED``, behave in a legal but unusual way that a
correct client and a correct suite must accept). The suite's own tests switch faults on
one at a time to prove that every check can fail, and that no check fails on a legal
variation.

"Non-streamed" faults change only ``stream: false`` responses, "streamed" ones only event
streams; "both modes" ones change what is generated, so both kinds of response show them.

Faults are declared where they are written, with ``registry.fault`` (see ``registry`` for
the stages they hook into): serving faults in ``faults_serving``, content faults in
``faults_content``, a stream's payload list (the ``stream`` stage: ids, finish chunks,
``[DONE]``, the usage chunk, streamed text) in ``faults_stream``, request
parameters honoured wrongly in ``faults_request``, features declined with a proper 400
(capability switches) in ``faults_declines``, the returned text's offsets, stop sequences
and prompts in ``faults_text``. To add one, write its transformer there under ``@fault(name,
description, stage, ...)``; the catalogue below is built from the registry.
"""

from __future__ import annotations

from collections.abc import Iterable

# Importing the definition modules registers their faults.
from conformance.reference import (  # noqa: F401
    faults_content,
    faults_declines,
    faults_request,
    faults_serving,
    faults_stream,
    faults_text,
)
from conformance.reference.registry import REGISTRY, ActiveFaults

__all__ = ["CAPABILITY", "FAULTS", "TOLERATED", "activate", "check_faults"]

#: Every fault name and its one-line description.
FAULTS: dict[str, str] = {name: f.description for name, f in REGISTRY.items()}

#: Faults that are legal behaviour: a conformant suite passes with any one of them on.
TOLERATED: frozenset[str] = frozenset(name for name, f in REGISTRY.items() if f.tolerated)

#: Tolerated faults that should still show up as a CAPABILITY finding.
CAPABILITY: frozenset[str] = frozenset(name for name, f in REGISTRY.items() if f.capability)


def check_faults(names: Iterable[str]) -> frozenset[str]:
    """Return the names as a frozenset, or raise ValueError naming the valid ones."""
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        valid = ", ".join(sorted(FAULTS))
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; valid faults: {valid}")
    return chosen


def activate(names: Iterable[str]) -> ActiveFaults:
    """The transformers of the named faults (ValueError for unknown names)."""
    return ActiveFaults(check_faults(names))
