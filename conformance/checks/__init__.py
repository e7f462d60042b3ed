"""Check modules, one per area; importing this package registers every requirement."""

from conformance.checks import (  # noqa: F401  (registers on import)
    defaults,
    encoding,
    errors,
    invariants,
    liveness,
    logprobs,
    ratelimit,
    response,
    sdk,
    semantics,
    stream_text,
    streaming,
    tokens,
    window,
)
