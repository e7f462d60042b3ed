"""Deep fuzz (opt-in, nightly, ``--fuzz N``; docs/fuzz.md): schemathesis's generation."""

from conformance.front.plugin import suite_test
from conformance.run import scenarios as s

test_deep_fuzz = suite_test(s.DEEP_FUZZ)
