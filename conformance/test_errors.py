"""Errors on purpose: bad credentials, an unknown model and the cheap documented 4xx.

Every probe asks for at most one token. Statuses the suite cannot provoke cheaply and
politely (403 needs a restricted key, 429 needs hammering, 5xx a broken target) are
judged whenever they turn up elsewhere in the run.
"""

from __future__ import annotations

import pytest

from conformance import scenarios as s
from conformance.plugin import Suite

pytestmark = pytest.mark.conformance


def test_auth_probes(conformance: Suite) -> None:
    conformance.play(s.AUTH_PROBES)


def test_unknown_model(conformance: Suite) -> None:
    conformance.play(s.UNKNOWN_MODEL)


def test_bad_requests(conformance: Suite) -> None:
    conformance.play(s.BAD_REQUESTS)
