"""Deep fuzz (opt-in, nightly): schemathesis's own generation judged by the same registry.

Skipped unless ``--fuzz N`` is given; needs the ``[fuzz]`` extra (schemathesis). See
docs/fuzz.md for what it finds that the default run does not.
"""

from __future__ import annotations

import pytest

from conformance.engine import ItemRun

pytestmark = pytest.mark.conformance


def test_deep_fuzz(conformance: ItemRun, request: pytest.FixtureRequest) -> None:
    count = int(getattr(request.config.option, "fuzz", 0) or 0)
    if count <= 0:
        pytest.skip("deep fuzz is opt-in: --fuzz N")
    from strategies import FuzzUnavailable, fuzz_cases

    s = conformance.settings
    try:
        cases = fuzz_cases(conformance.spec, count, s.seed, model=s.model, max_tokens=s.max_tokens)
    except FuzzUnavailable as exc:
        pytest.skip(str(exc))
    conformance.send_all(cases)
    conformance.verdict()
