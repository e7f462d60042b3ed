"""Non-streamed completions: generated requests judged by every requirement that applies."""

from __future__ import annotations

import re

import pytest

from conformance.case import Case
from conformance.engine import BATCHES, ItemRun, batched
from strategies import draw, edge_requests, invalid_cases, valid_requests

pytestmark = pytest.mark.conformance


@batched
def test_valid_requests(conformance: ItemRun, batch: int) -> None:
    s = conformance.settings
    strategy = valid_requests(
        conformance.spec, model=s.model, max_tokens=s.max_tokens, vocab_size=s.vocab_size
    )
    conformance.send_all(draw(strategy, s.max_examples, seed_value=s.seed, part=(batch, BATCHES)))
    conformance.verdict()


@batched
def test_edge_requests(conformance: ItemRun, batch: int) -> None:
    s = conformance.settings
    cases = edge_requests(
        conformance.spec, model=s.model, max_tokens=s.max_tokens, vocab_size=s.vocab_size
    )
    conformance.send_all(cases[batch::BATCHES])
    conformance.verdict()


@batched
def test_invalid_requests(conformance: ItemRun, batch: int) -> None:
    """One request per rule the spec states: cheap, since each must be rejected unserved."""
    s = conformance.settings
    cases = invalid_cases(conformance.spec, model=s.model, max_tokens=1)
    conformance.send_all(cases[batch::BATCHES])
    conformance.verdict()


def test_stop_probe(conformance: ItemRun) -> None:
    """Ask once at temperature 0, then again with a word of the first answer as stop."""
    s = conformance.settings
    body = {
        "model": s.model,
        "prompt": "Count slowly from one to twenty:",
        "max_tokens": max(s.max_tokens, 8),
        "temperature": 0,
        "seed": 7,
    }
    first = conformance.send(Case(body, mode="probe", label="stop probe: first answer"))
    text = _first_text(first.json if first else None)
    # U+FFFD stands for bytes that are not UTF-8: no server can match it as a stop.
    words = [w for w in re.findall(r"\S+", text or "") if "\ufffd" not in w]
    if len(words) < 2:
        pytest.skip("the first answer has too few words to pick a stop sequence from")
    stop = words[len(words) // 2]
    second = Case(
        {**body, "stop": [stop]},
        mode="probe",
        label=f"stop probe: stop={stop!r}",
        tags=frozenset({"probe:stop"}),
    )
    conformance.send(second, related=(first,) if first else ())
    # The same stop, streamed: a stream must honour stop sequences too.
    streamed = Case(
        {**second.body, "stream": True}, mode="probe", label=f"stop probe, streamed: stop={stop!r}"
    )
    conformance.send(streamed)
    conformance.verdict()


def _first_text(body: object) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("choices"), list) and body["choices"]:
        choice = body["choices"][0]
        if isinstance(choice, dict) and isinstance(choice.get("text"), str):
            return str(choice["text"])
    return None
