"""Non-streamed completions: generated valid requests judged by every requirement."""

from __future__ import annotations

import pytest

from conformance.engine import ItemRun
from strategies import draw, valid_requests

pytestmark = pytest.mark.conformance


def test_valid_requests(conformance: ItemRun) -> None:
    s = conformance.settings
    strategy = valid_requests(
        conformance.spec, model=s.model, max_tokens=s.max_tokens, vocab_size=s.vocab_size
    )
    conformance.send_all(draw(strategy, s.max_examples, seed_value=s.seed))
    conformance.verdict()
