"""Streamed completions: generated streams, the usage chunk both ways, the stream compared
with its non-streamed twin, and the streams servers get wrong; each stream judged whole."""

from __future__ import annotations

from typing import Any

import pytest

from conformance import scenarios as s
from conformance.plugin import Suite, parametrized

pytestmark = pytest.mark.conformance


@parametrized(s.VALID_STREAMS)
def test_valid_streams(conformance: Suite, param: Any) -> None:
    conformance.play(s.VALID_STREAMS, param)


@parametrized(s.USAGE_CHUNK)
def test_usage_chunk(conformance: Suite, param: Any) -> None:
    conformance.play(s.USAGE_CHUNK, param)


def test_stream_matches_non_stream(conformance: Suite) -> None:
    conformance.play(s.STREAM_TWIN)


def test_stream_edges(conformance: Suite) -> None:
    conformance.play(s.STREAM_EDGES)
