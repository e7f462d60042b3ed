"""SDK compatibility requirements proven both ways: the openai client against faults."""

from __future__ import annotations

import pytest
from support import Targets, case, failed

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run import sdk

FLAVORS = ("aihubmix", "nscale")
STREAM = {"stream": True, "n": 2, "stream_options": {"include_usage": True}}


def via_sdk(
    targets: Targets, flavor: str, request: Case, *faults: str
) -> tuple[Exchange, set[str]]:
    target = targets.get(flavor, *faults)
    exchange = sdk.send(target.client, request)
    from support import judge

    return exchange, failed(judge(target.spec, exchange))


@pytest.mark.parametrize("flavor", FLAVORS)
def test_sdk_reads_conformant_answers(targets: Targets, flavor: str) -> None:
    full = case(prompt=["one", "two"], n=2, logprobs=2, echo=True)
    exchange, failures = via_sdk(targets, flavor, full)
    assert failures == set()
    assert exchange.sdk is not None and exchange.sdk["error"] is None
    assert len(exchange.sdk["choices"]) == 4
    exchange, failures = via_sdk(targets, flavor, case(**STREAM))
    assert failures == set()
    assert exchange.sdk is not None and exchange.sdk["usage"] is not None
    assert exchange.events and exchange.events[-1].data == "[DONE]"


@pytest.mark.parametrize(
    ("fault", "fields", "requirement"),
    [
        ("schema-choices-not-array", {}, "SDK-COMPLETION"),
        ("stream-error-event", STREAM, "SDK-STREAM"),
        ("stream-not-json", STREAM, "SDK-STREAM"),
    ],
)
def test_sdk_requirement_fails_when_the_sdk_cannot_read(
    targets: Targets, fault: str, fields: dict[str, object], requirement: str
) -> None:
    exchange, failures = via_sdk(targets, "aihubmix", case(**fields), fault)
    assert requirement in failures
    assert exchange.sdk is not None and exchange.sdk["error"]


def test_sdk_declined_feature_is_a_capability(targets: Targets) -> None:
    tokens = case(prompt=[1, 2, 3])
    exchange, failures = via_sdk(targets, "aihubmix", tokens, "reject-token-prompts")
    assert exchange.status == 400 and failures == set()


def test_sdk_values_must_match_the_wire(targets: Targets) -> None:
    """A value the SDK reads differently from the wire (e.g. a lossy proxy) fails."""
    target = targets.get("aihubmix")
    exchange = sdk.send(target.client, case())
    assert exchange.sdk is not None
    exchange.sdk["choices"][0]["text"] += " (altered)"
    from support import judge

    findings = judge(target.spec, exchange)
    assert findings["SDK-COMPLETION"].outcome == "failed"
    assert "choices[0].text" in findings["SDK-COMPLETION"].message
