"""Hypothesis strategies for ``POST /v1/completions`` requests, derived from a Spec.

Bounds, enums, required fields and prompt forms are read from the Spec's request schema
(errata applied), so vendors differ by their documents, not by code here.

- :func:`valid_requests`: a strategy of schema-valid Cases within the run's cost bounds.
- :func:`edge_requests`: a list of boundary-hitting valid Cases (each worth sending once).
- :func:`invalid_requests` / :func:`invalid_cases`: Cases that break exactly one named
  rule (``Case.breaks``), as a strategy and as one list entry per rule.
- :func:`broken_rules` / :func:`cross_field_problems`: which rules a request breaks (the
  request oracle of the judge core, conformance/judging/document/oracle.py, re-exported).
- :func:`draw`: a reproducible list of values from a strategy.
- :func:`build_case`: the one constructor of Cases; valid, edge and probe bodies are
  validated by openapi-core and adapted to the nearest valid values or
  :class:`CaseSkipped`; invalid ones must break exactly their rule (:func:`oracle_rules`).
- :func:`fuzz_cases`: schemathesis's own generation (coverage phase, positive and
  negative modes), classified by the same oracle (opt-in ``--fuzz N``, extra ``[fuzz]``).
- :class:`NoValidPrompt`: the document as written admits no prompt (``--strict-spec``).
"""

from conformance.judging.document.oracle import broken_rules, cross_field_problems
from conformance.judging.document.validation import oracle_rules
from conformance.strategies._cases import CaseSkipped, build_case
from conformance.strategies._describe import describe, prompt_form, request_tags
from conformance.strategies._draw import draw
from conformance.strategies._edge import edge_requests
from conformance.strategies._fuzz import FuzzUnavailable, fuzz_cases
from conformance.strategies._invalid import invalid_cases, invalid_requests
from conformance.strategies._requests import NoValidPrompt, valid_requests

__all__ = [
    "CaseSkipped",
    "FuzzUnavailable",
    "NoValidPrompt",
    "broken_rules",
    "build_case",
    "cross_field_problems",
    "describe",
    "draw",
    "edge_requests",
    "fuzz_cases",
    "invalid_cases",
    "invalid_requests",
    "oracle_rules",
    "prompt_form",
    "request_tags",
    "valid_requests",
]
