"""SDK compatibility: the official openai client against the target."""

from __future__ import annotations

import pytest

from conformance import scenarios as s
from conformance.plugin import Suite

pytestmark = pytest.mark.conformance


def test_openai_sdk_reads_the_answers(conformance: Suite) -> None:
    conformance.play(s.SDK)
