"""Errors on purpose: bad credentials, an unknown model, the cheap documented 4xx, and a
prompt over the context window the target advertises.

Every probe asks for at most one token. Statuses the suite cannot provoke cheaply and
politely (403 needs a restricted key, 429 needs hammering, 5xx a broken target) are
judged whenever they turn up elsewhere in the run.
"""

from conformance.front.plugin import suite_test
from conformance.run import scenarios as s

test_auth_probes = suite_test(s.AUTH_PROBES)
test_unknown_model = suite_test(s.UNKNOWN_MODEL)
test_bad_requests = suite_test(s.BAD_REQUESTS)
test_context_window = suite_test(s.CONTEXT_WINDOW)
