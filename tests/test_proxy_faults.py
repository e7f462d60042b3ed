"""Every fault family of the reference target shows in the proxy's live verdict under the
requirement IDs a suite run gives.

A family is the stage a fault hooks into (conformance/reference/registry.py: what the
model is asked to generate, the body, the stream, the head, the refusals...). For a
representative fault of each, the suite's own scenarios that exercise it are sent through
the proxy: the suite's findings must be the fault's recorded set (proofs.EXACT, the whole
suite's), and the proxy's live verdict must name the same requirements, less those traffic
cannot show (an SDK's view of the answer).

Two families cannot show in traffic, by what they are: ``pacing`` (a stalled stream is a
finding of the client's own time bound; the proxy imposes none and counts the exchange
the client abandoned as not judged) and ``remembered`` (a target that stops serving is
TARGET-ALIVE's through the suite's health probe; traffic shows its later 404s as
declined requests, VALID-ACCEPTED). Both are asserted below as what the proxy does show.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conformance import Settings, Setup, run_suite
from conformance.front.proofs_exact import EXACT
from conformance.front.proxy import LIVE, ProxyServer
from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.document.spec import load_spec
from conformance.judging.traffic_judge import UNOBSERVABLE
from conformance.reference import ReferenceServer
from conformance.reference.registry import REGISTRY
from conformance.run.client import Limits
from conformance.run.scenarios import SCENARIOS

KEY = "sk-proxy-faults-0123456789"
BY_NAME = {s.name: s for s in SCENARIOS}

#: family (the fault's first stage) -> (fault, flavor, the scenarios that exercise it).
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "plan": ("choices-ignore-n", "aihubmix", ("valid_requests", "valid_streams")),
    "finish": ("finish-not-length", "aihubmix", ("valid_requests", "valid_streams")),
    "usage": ("usage-arithmetic", "aihubmix", ("valid_requests", "usage_chunk")),
    "body": ("logprobs-positive", "aihubmix", ("valid_requests", "valid_streams")),
    "nulls": ("null-fields", "nscale", ("valid_requests", "edge_requests")),
    "stream": ("stream-no-done", "aihubmix", ("valid_streams",)),
    "chunk": ("stream-text-offset-stalled", "aihubmix", ("valid_streams",)),
    "head": ("json-content-type-text", "aihubmix", ("valid_requests",)),
    "request-id": ("missing-request-id-header", "nscale", ("valid_requests",)),
    "request": ("capability-500", "aihubmix", ("valid_requests", "edge_requests")),
    "parsed": ("prompt-cut-at-nul", "aihubmix", ("edge_requests",)),
    "refusal": ("accepts-invalid", "aihubmix", ("bad_requests",)),
    "error-reply": ("errors-fastapi", "aihubmix", ("bad_requests",)),
    "admit": ("rate-limit-bare-body", "aihubmix", ("valid_requests",)),
    "framing": (
        "stream-single-newline",
        "aihubmix",
        ("valid_streams", "openai_sdk_reads_the_answers"),
    ),
    # Not a family of its own (refusal), but the auth area's: a request without a key.
    "refusal (auth)": ("auth-ignored", "aihubmix", ("auth_probes",)),
}
NOT_IN_TRAFFIC = {"pacing", "remembered"}
#: Families judged under another contract, by both the suite and the proxy: a choice's
#: `logprobs: null` is OpenAI's own answer under the openai-compatible one.
ARGS: dict[str, tuple[str, ...]] = {"nulls": ("--contract", "document")}


def family(fault: str) -> str:
    return next(iter(REGISTRY[fault].hooks))


def through_proxy(
    fault: str, flavor: str, names: tuple[str, ...], **setup: Any
) -> tuple[set[str], dict[str, Any]]:
    """The suite's failed requirements and the proxy's live verdict, for the scenarios
    ``names`` sent through the proxy to the target with ``fault``."""
    faults = frozenset({fault})
    contract = setup.get("contract", DEFAULT_CONTRACT)
    with (
        ReferenceServer(flavor, api_key=KEY, faults=faults) as ref,
        ProxyServer(ref.url, load_spec(flavor, contract=contract)) as proxy,
    ):
        settings = Settings(max_examples=3, concurrency=8)
        run = Setup(settings=settings, spec=flavor, target_url=proxy.url, api_key=KEY, **setup)
        outcome = run_suite(run, scenarios=[BY_NAME[n] for n in names])
        proxy.drain()
        live = httpx.get(proxy.url + LIVE + "/verdict.json").json()
    return {rid for rid, t in outcome.results.tallies.items() if t.failed}, live


def test_every_family_has_a_representative() -> None:
    families = {
        family(name) for name, f in REGISTRY.items() if not f.tolerated and not f.capability
    }
    assert families == {family(fault) for fault, _, _ in FAMILIES.values()} | NOT_IN_TRAFFIC


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_family_shows_in_the_live_verdict(name: str) -> None:
    fault, flavor, scenarios = FAMILIES[name]
    args = ARGS.get(name, ())
    contract = Contract(args[1]) if args else DEFAULT_CONTRACT
    suite, live = through_proxy(fault, flavor, scenarios, contract=contract)
    assert suite == EXACT[(fault, args)][flavor]
    shown = {r["id"] for r in live["requirements"] if r["failed"]}
    assert shown == suite - set(UNOBSERVABLE)
    assert live["verdict"] == (
        "failed"
        if any(r["level"] == "MUST" and r["failed"] for r in live["requirements"])
        else "incomplete"
    )
    for row in live["requirements"]:
        if row["failed"]:
            assert row["findings"] and row["findings"][0]["message"]


def test_pacing_a_stall_is_the_clients_bound_not_the_proxys() -> None:
    suite, live = through_proxy(
        "stream-stall", "aihubmix", ("valid_streams",), limits=Limits(gap=0.5)
    )
    assert (
        suite == EXACT[("stream-stall", ("--stream-gap", "0.5"))]["aihubmix"] == {"HTTP-COMPLETE"}
    )
    assert not any(r["failed"] for r in live["requirements"])
    assert (
        live["traffic"]["unjudged"]["the client closed the connection before the answer ended"] >= 1
    )


def test_remembered_a_dead_target_shows_as_declined_requests() -> None:
    suite, live = through_proxy(
        "dies-on-one-item-prompt-list", "aihubmix", ("valid_requests", "edge_requests")
    )
    assert suite == {"TARGET-ALIVE"}
    rows = {r["id"]: r for r in live["requirements"]}
    assert rows["TARGET-ALIVE"]["status"] == "not-observable"
    assert rows["VALID-ACCEPTED"]["unsupported"] >= 1 and not any(
        r["failed"] for r in live["requirements"]
    )
