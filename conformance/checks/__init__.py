"""Check modules, one per area; importing this package registers every requirement."""

from conformance.checks import errors, logprobs, response, sdk, semantics, streaming  # noqa: F401
