"""The capability table: one probe per optional feature (conformance.judging.verdict.capabilities)."""

from conformance.front.plugin import suite_test
from conformance.run import scenarios as s

test_capabilities = suite_test(s.CAPABILITIES)
