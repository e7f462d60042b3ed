"""SDK compatibility: the official openai client reads the target's answers."""

from conformance import scenarios as s
from conformance.plugin import suite_test

test_openai_sdk_reads_the_answers = suite_test(s.SDK)
