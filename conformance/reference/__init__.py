"""The embedded reference target: a careful OpenAI-compatible ``/v1/completions`` server.

``create_app`` builds it as a Starlette app (for in-process tests), ``ReferenceServer``
serves it on a local port. ``flavor`` picks the vendor spec it follows; ``faults`` switches
on named misbehaviours from ``FAULTS`` to prove that checks can fail (``TOLERATED`` lists
the legal variations among them, which must not fail a correct suite).
"""

from __future__ import annotations

from conformance.reference.app import create_app
from conformance.reference.faults import CAPABILITY, FAULTS, TOLERATED, check_faults
from conformance.reference.flavors import FLAVORS
from conformance.reference.model import VOCAB_SIZE
from conformance.reference.server import ReferenceServer

__all__ = [
    "CAPABILITY",
    "FAULTS",
    "FLAVORS",
    "TOLERATED",
    "VOCAB_SIZE",
    "ReferenceServer",
    "check_faults",
    "create_app",
]
