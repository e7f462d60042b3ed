"""Non-streamed completions: generated valid, edge and invalid requests, and the stop probe.

Each test plays the scenario of conformance/run/scenarios.py that it is named after.
"""

from conformance.front.plugin import suite_test
from conformance.run import scenarios as s

test_valid_requests = suite_test(s.VALID_REQUESTS)
test_edge_requests = suite_test(s.EDGE_REQUESTS)
test_invalid_requests = suite_test(s.INVALID_REQUESTS)
test_stop_probe = suite_test(s.STOP_PROBE)
test_declared_defaults = suite_test(s.DECLARED_DEFAULTS)
