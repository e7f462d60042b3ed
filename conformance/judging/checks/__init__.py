"""Check modules, one per area; importing this package registers every requirement."""

from conformance.judging.checks import (  # noqa: F401  (registers on import)
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
    stop_probe,
    stream_text,
    streaming,
    tokens,
    window,
)


def load_checks() -> None:
    """Every check module imported, so that its requirements are registered (again, after
    pytester restored ``sys.modules`` under an in-process run)."""
    import conformance.judging.checks  # noqa: F401  (registers on import)
