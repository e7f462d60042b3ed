"""SDK compatibility: the official openai client against the target."""

from __future__ import annotations

import pytest

from conformance import sdk
from conformance.case import Case
from conformance.engine import ItemRun

pytestmark = pytest.mark.conformance


def _cases(model: str, max_tokens: int) -> list[Case]:
    base = {"model": model, "max_tokens": max(1, min(max_tokens, 6))}
    return [
        Case(
            {**base, "prompt": ["Say something", "And more"], "n": 2, "logprobs": 2, "echo": True},
            label="SDK: n=2, logprobs=2, echo, two prompts",
            tags=frozenset({"sdk"}),
        ),
        Case({**base, "prompt": "Say something"}, label="SDK: plain", tags=frozenset({"sdk"})),
        Case(
            {
                **base,
                "prompt": "Say something",
                "n": 2,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            label="SDK: stream, n=2, include_usage",
            tags=frozenset({"sdk"}),
        ),
        # Plain twins, so a target that declines n > 1 still gets an SDK verdict.
        Case(
            {**base, "prompt": "Say something", "stream": True},
            label="SDK: stream, plain",
            tags=frozenset({"sdk"}),
        ),
    ]


def test_openai_sdk_reads_the_answers(conformance: ItemRun) -> None:
    if not sdk.available():
        pytest.skip("the openai package is not installed: SDK compatibility not tested")
    s = conformance.settings
    for case in _cases(s.model, s.max_tokens):
        if conformance.send(case, via=sdk.send) is None:
            break
    conformance.verdict()
