"""Errors on purpose: bad credentials, an unknown model and the cheap documented 4xx.

Every probe asks for at most one token. Statuses the suite cannot provoke cheaply and
politely (403 needs a restricted key, 429 needs hammering, 5xx a broken target) are
judged whenever they turn up elsewhere in the run.
"""

from __future__ import annotations

import pytest

from conformance.checks.errors import auth_probes, bad_request_probes, unknown_model_probe
from conformance.engine import ItemRun

pytestmark = pytest.mark.conformance


def test_auth_probes(conformance: ItemRun) -> None:
    """No credentials, a malformed header and a wrong key are each answered 401."""
    if not conformance.spec.bearer_auth:
        pytest.skip("the spec declares no bearer auth")
    if not conformance.run.client.api_key:
        # Without a key of our own the target may well be open: a 200 proves nothing.
        pytest.skip("no API key configured (--api-key): auth is not probed")
    conformance.send_all(auth_probes(conformance.settings.model))
    conformance.verdict()


def test_unknown_model(conformance: ItemRun) -> None:
    """A model the target does not serve is answered 404 in the error envelope."""
    conformance.send(unknown_model_probe())
    conformance.verdict()


def test_bad_requests(conformance: ItemRun) -> None:
    """A body that is not JSON and a wrongly typed field are answered 400."""
    conformance.send_all(bad_request_probes(conformance.spec, conformance.settings.model))
    conformance.verdict()
