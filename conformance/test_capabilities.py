"""The capability table: one probe per optional feature (conformance.capabilities)."""

from conformance import scenarios as s
from conformance.plugin import suite_test

test_capabilities = suite_test(s.CAPABILITIES)
