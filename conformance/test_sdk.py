"""SDK compatibility: the official openai client reads the target's answers."""

from conformance.front.plugin import suite_test
from conformance.run import scenarios as s

test_openai_sdk_reads_the_answers = suite_test(s.SDK)
