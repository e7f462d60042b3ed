"""Check modules, one per area; importing this package registers every requirement."""

from conformance.checks import response, semantics  # noqa: F401
