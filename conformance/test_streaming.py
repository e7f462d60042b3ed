"""Streamed completions: generated streams, the usage chunk both ways, and the probe that
compares a stream with its non-streamed twin; each stream judged as a whole."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.case import Case
from conformance.checks.streaming import TWIN_TAG
from conformance.engine import BATCHES, ItemRun, batched
from strategies import describe, draw, request_tags, valid_requests

pytestmark = pytest.mark.conformance


def _case(body: dict[str, Any]) -> Case:
    return Case(body, mode="valid", label=describe(body), tags=request_tags(body))


@batched
def test_valid_streams(conformance: ItemRun, batch: int) -> None:
    s = conformance.settings
    strategy = valid_requests(
        conformance.spec,
        model=s.model,
        max_tokens=s.max_tokens,
        vocab_size=s.vocab_size,
        stream=True,
    )
    conformance.send_all(draw(strategy, s.max_examples, seed_value=s.seed, part=(batch, BATCHES)))
    conformance.verdict()


@pytest.mark.parametrize("include_usage", [True, False], ids=["include-usage", "no-usage"])
def test_usage_chunk(conformance: ItemRun, include_usage: bool) -> None:
    """With include_usage exactly one usage chunk comes last; without it, none at all."""
    s = conformance.settings
    body: dict[str, Any] = {
        "model": s.model,
        "prompt": "Name two rivers:",
        "max_tokens": s.max_tokens,
        "n": 2,
        "stream": True,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    conformance.send(_case(body))
    conformance.verdict()


def test_stream_matches_non_stream(conformance: ItemRun) -> None:
    """Ask once without streaming at temperature 0, then stream the same request."""
    s = conformance.settings
    body = {
        "model": s.model,
        "prompt": "Describe a river in a few words:",
        "max_tokens": max(s.max_tokens, 8),
        "temperature": 0,
        "seed": 7,
    }
    twin = conformance.send(Case(body, mode="probe", label="stream probe: non-streamed twin"))
    streamed = Case(
        {**body, "stream": True},
        mode="probe",
        label="stream probe: the same request streamed",
        tags=frozenset({TWIN_TAG}),
    )
    conformance.send(streamed, related=(twin,) if twin else ())
    conformance.verdict()


def test_stream_edges(conformance: ItemRun) -> None:
    """Streams that servers get wrong, always sent: echo of a text prompt, max_tokens 0."""
    s = conformance.settings
    base = {"model": s.model, "prompt": "Say hi", "stream": True}
    conformance.send_all(
        [
            _case({**base, "echo": True, "max_tokens": s.max_tokens}),
            _case({**base, "max_tokens": 0, "stop": ["\n"]}),
        ]
    )
    conformance.verdict()
