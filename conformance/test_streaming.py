"""Streamed completions: generated streams, the usage chunk both ways, the stream compared
with its non-streamed twin, and the streams servers get wrong; each stream judged whole."""

from conformance.front.plugin import suite_test
from conformance.run import scenarios as s

test_valid_streams = suite_test(s.VALID_STREAMS)
test_usage_chunk = suite_test(s.USAGE_CHUNK)
test_stream_matches_non_stream = suite_test(s.STREAM_TWIN)
test_stream_edges = suite_test(s.STREAM_EDGES)
