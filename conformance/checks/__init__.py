"""Check modules, one per area; importing this package registers every requirement."""

from conformance.checks import response, semantics, streaming  # noqa: F401
