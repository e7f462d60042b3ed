"""Deep fuzz (opt-in, nightly, ``--fuzz N``; docs/fuzz.md): schemathesis's generation."""

from conformance import scenarios as s
from conformance.plugin import suite_test

test_deep_fuzz = suite_test(s.DEEP_FUZZ)
