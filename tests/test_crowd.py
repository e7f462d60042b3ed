"""Verdicts that do not depend on concurrency: what a crowd of requests causes is judged alone.

Run at the default concurrency (16) against real servers, the suite once blamed healthy
streams for the 28 s FastChat spent on one request beside them, never judged that request,
and named the wrong request when mlx-lm died. Here, with requests in flight together on
purpose (no timing races: each step waits for the server to say it is there):

* a request that held a one-slot target is judged on its own answer, and the requests
  that waited behind it, answered when sent again alone, name it in the run's report;
* when the target dies, TARGET-ALIVE names the request that was in flight when it died,
  not another one that came back first.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from hostile_servers import HeldBySlowRequest, RawServer, Servers, gone, silent
from support import API_KEY, MODEL, case, meta_of

from conformance.judging.checks.liveness import HEALTH_TAG
from conformance.judging.document.spec import load_spec
from conformance.judging.verdict.run_info import SentAlone
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.reference import ReferenceServer
from conformance.run.client import Client, Limits, RetryPolicy
from conformance.run.engine import Run
from conformance.run.item import ItemRun
from conformance.run.session import Sent, Settings

HOLDS = Case({"model": MODEL, "prompt": "hold", "max_tokens": 4}, label="the slow one")


@pytest.fixture
def serve() -> Iterator[Servers]:
    with Servers() as servers:
        yield servers


def held_then_stream(
    serve: Servers,
    behaviour: HeldBySlowRequest,
    slow: Case,
    limits: Limits,
    retry: RetryPolicy | None = None,
) -> tuple[ItemRun, Client, list[Exchange | None]]:
    """``slow`` holds the one slot of ``behaviour``'s target, then a stream is sent beside it;
    both are received and judged by one item of a run at concurrency 4."""
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=limits, concurrency=4,
                    retry=retry or RetryPolicy())  # fmt: skip
    run = Run(Settings(concurrency=4), load_spec("aihubmix"), client)
    item = run.item()
    try:
        held = item.dispatch(slow)
        assert behaviour.arrived.wait(5)
        stream = item.dispatch(case(stream=True))
        judged = [item.receive(held), item.receive(stream)]
    finally:
        run.close()
        client.close()
    return item, client, judged


def test_the_request_that_held_the_target_is_judged_and_named(serve: Servers) -> None:
    """An invalid n: 129 the target accepted holds its one slot while three streams wait
    past the gap bound: INVALID-REJECTED judges it on its own answer, the streams pass
    HTTP-COMPLETE once sent alone, and the run's report names it as the holder."""
    behaviour = HeldBySlowRequest(hold=1.5)
    server = serve.start(behaviour)
    spec = load_spec("aihubmix")
    client = Client(server.url, api_key=API_KEY, limits=Limits(ttfb=5, gap=0.3, total=5),
                    concurrency=4)  # fmt: skip
    run = Run(Settings(concurrency=4), spec, client)
    body = {"model": MODEL, "prompt": "hold", "max_tokens": 4, "n": 129}
    slow = Case(body, mode="invalid", breaks="n:maximum", label="n:maximum: n=129")
    item = run.item()
    try:
        held = item.dispatch(slow)
        assert behaviour.arrived.wait(5)  # it holds the slot before the streams go
        streams = [item.dispatch(case(stream=True)) for _ in range(3)]
        judged = [item.receive(held), *(item.receive(s) for s in streams)]
    finally:
        run.close()
        client.close()
    assert all(ex is not None and ex.status == 200 for ex in judged)
    tallies = item.results.tallies
    assert (tallies["INVALID-REJECTED"].checked, tallies["INVALID-REJECTED"].failed) == (1, 1)
    assert (tallies["HTTP-COMPLETE"].checked, tallies["HTTP-COMPLETE"].failed) == (4, 0)
    entries = meta_of(item.results)["sent_alone"]
    assert len(entries) == 3
    assert all("the target was held by 'n:maximum: n=129'" in e["note"] for e in entries)
    assert all(e["held_by"].startswith("'n:maximum: n=129'") for e in entries)
    assert all('"n": 129' in e["held_by"] for e in entries)


def test_a_wait_behind_work_the_client_left_is_not_charged(serve: Servers) -> None:
    """The n: 129 outlasts the first-byte bound, in the crowd and alone: its time-out
    stands, and the target keeps working on both copies after the client left them, as
    FastChat did. The stream that waited behind it goes alone after it (the first started
    goes alone first), once the target answered the minimal request: answered, it is not
    charged (before: a second HTTP-COMPLETE finding, which its replay on a fresh server
    refuted), and it names the n: 129."""
    body = {"model": MODEL, "prompt": "hold", "max_tokens": 4, "n": 129}
    slow = Case(body, mode="invalid", breaks="n:maximum", label="n:maximum: n=129")
    limits = Limits(ttfb=0.6, gap=0.3, total=5)
    item, client, judged = held_then_stream(serve, HeldBySlowRequest(hold=1.0), slow, limits)
    assert [ex.bound if ex else None for ex in judged] == ["ttfb", None]
    complete = item.results.tallies["HTTP-COMPLETE"]
    assert (complete.checked, complete.failed) == (2, 1)
    assert [ex.evidence.case for ex in complete.examples] == ["n:maximum: n=129"]
    [entry] = item.results.info.sent_alone or ()
    assert entry.held_by is not None and entry.held_by.startswith("'n:maximum: n=129'")
    assert "sent again alone once the target answered the minimal request" in entry.note, entry.note
    assert client.stats.free_probes >= 2


def test_left_work_that_outlasts_the_clients_wait_is_waited_out(serve: Servers) -> None:
    """llama-cpp-python spent about 75 s on each unlimited max_tokens: 0 answer and went on
    for 45 s after the client left at 30 s: the stream behind it met its bound alone too,
    and again when sent "as long again" later (before: a false alarm on 7 healthy requests
    of 9). Here the slow request holds the one slot five times the first-byte bound; the
    stream goes alone only once the minimal request is answered, and is answered."""
    behaviour = HeldBySlowRequest(hold=2.0)
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=Limits(ttfb=0.4, gap=0.3, total=5),
                    concurrency=4)  # fmt: skip
    client.probe_with(case())
    with ThreadPoolExecutor(4) as pool:
        slow = pool.submit(client.send, HOLDS)
        assert behaviour.arrived.wait(5)
        stream = pool.submit(client.send, case(stream=True)).result()
    client.close()
    assert slow.result().bound == "ttfb"
    assert "met a bound again (ttfb): the finding stands" in slow.result().notes[0]
    assert (stream.status, stream.bound, stream.events[-1].data) == (200, None, "[DONE]")
    assert stream.sent_alone is not None and "once the target answered" in stream.sent_alone
    assert "the target was held by 'the slow one'" in stream.sent_alone


class NeverAnswersABodyThatIsNotJSON(HeldBySlowRequest):
    """As HeldBySlowRequest, but a body that is not JSON is never answered: Prism waits for
    the rest of it (prism-proxy)."""

    def __call__(self, server: RawServer, conn: socket.socket, request: bytes) -> None:
        if request.endswith(b"not json"):
            while not (gone(conn) or server.stopping.wait(0.01)):
                pass
            return
        super().__call__(server, conn, request)


def test_a_kind_of_request_never_answered_does_not_make_others_stand(serve: Servers) -> None:
    """Two bodies that are not JSON met their bound alone (true: never answered): a third
    time-out of that kind stands unsent, but a completion that met its bound behind a slow request
    is still sent alone, and answered (before: "2 requests met such a bound alone too" made
    12 healthy requests stand on prism-proxy)."""
    behaviour = NeverAnswersABodyThatIsNotJSON(hold=1.0)
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=Limits(ttfb=0.3, gap=0.3, total=5),
                    concurrency=4)  # fmt: skip
    client.probe_with(case())
    raw = [Case({}, mode="invalid", raw_body=b"not json", label=f"raw {i}") for i in range(3)]
    with ThreadPoolExecutor(4) as pool:
        *malformed, third = [f.result() for f in [pool.submit(client.send, c) for c in raw]]
        slow = pool.submit(client.send, HOLDS)
        assert behaviour.arrived.wait(5)
        healthy = pool.submit(client.send, case()).result()
    client.close()
    assert all("met a bound again (ttfb): the finding stands" in ex.notes[0] for ex in malformed)
    assert slow.result().bound == "ttfb"
    assert (healthy.status, healthy.bound) == (200, None) and healthy.sent_alone is not None
    assert (
        third.bound == "ttfb" and "not sent again alone: 2 requests of its kind" in third.notes[0]
    )
    assert "a body that is not JSON" in third.notes[0]


def test_a_target_that_answers_no_minimal_request_stopped_serving(serve: Servers) -> None:
    """The other way: after the preflight, the target answers nothing, not even the minimal
    request (llama-cpp-python spent many minutes on one streamed max_tokens: 0 with a stop
    sequence, answering nobody). Before the first time-out goes alone, the minimal request
    goes until the wait runs out (bounded: RetryPolicy.free_wait): one TARGET-ALIVE
    finding, on that probe, names the requests in flight; the time-outs behind it are not
    charged to HTTP-COMPLETE (before: one finding each), and nothing more is sent."""
    server = serve.start(silent)
    spec = load_spec("aihubmix")
    client = Client(server.url, api_key=API_KEY, limits=Limits(ttfb=0.3, gap=0.2, total=5),
                    concurrency=4, retry=RetryPolicy(free_wait=1.0))  # fmt: skip
    run = Run(Settings(concurrency=4), spec, client)
    item = run.item()
    try:
        sent = [item.dispatch(case(prompt=f"never {i}")) for i in range(2)]
        judged = [item.receive(s) for s in sent]
        later = item.send(case(prompt="after"))
    finally:
        run.close()
        client.close()
    assert judged == [None, None] and later is None
    assert item.results.tallies["HTTP-COMPLETE"].checked == 0
    alive = [(f, ex) for f, ex in item.failures if f.requirement == "TARGET-ALIVE"]
    assert len(alive) == 1
    message = alive[0][0].message
    print(message)
    assert '"never 0"' in message and '"never 1"' in message, message
    assert HEALTH_TAG in alive[0][1].case.tags and alive[0][1].bound == "ttfb"
    assert client.throttle.stopped is not None and client.throttle.stopped.wait == 1.0
    assert 3 <= client.stats.free_probes <= 5  # 0.3 s each, for 1 s: a bounded wait


def test_a_request_that_holds_the_target_past_the_wait_is_named(serve: Servers) -> None:
    """llama-cpp-python's shape: one valid request holds the one slot far longer than the
    client waits for the minimal request. TARGET-ALIVE names it first of those in flight;
    the stream that waited behind it is not charged to HTTP-COMPLETE."""
    limits = Limits(ttfb=0.4, gap=0.3, total=5)
    behaviour = HeldBySlowRequest(hold=4.0)
    item, _, judged = held_then_stream(serve, behaviour, HOLDS, limits, RetryPolicy(free_wait=1))
    assert judged == [None, None]
    assert item.results.tallies["HTTP-COMPLETE"].failed == 0
    [(finding, probe)] = [(f, ex) for f, ex in item.failures if f.requirement == "TARGET-ALIVE"]
    in_flight = finding.message.partition("in flight when it died")[2]
    assert in_flight.index("'the slow one'") < in_flight.index("'valid test case'")
    assert "answered 200, then gap" in in_flight  # the stream's head came, then nothing
    assert "none of the" in finding.message and HEALTH_TAG in probe.case.tags


def test_a_request_the_client_left_is_named_before_those_answered_with_an_error() -> None:
    """Behind LiteLLM, requests answered 500 at once were in flight beside the one that held
    llama-cpp-python: the holder (cut by a bound) is named first, then the 500s."""
    from conformance.run.flights import Flight
    from conformance.run.health import Down

    answered = [
        Flight(case(prompt=f"500 {i}"), started=i, ended=i + 0.1, status=500) for i in range(3)
    ]
    holder = Flight(case(prompt="holds"), started=5.0, ended=20.0, status=200, failure="gap")
    normal = Flight(case(prompt="fine"), started=0.5, ended=0.6, status=200)
    probe = case()
    down = Down(
        Exchange(probe, "", {}, b""), Exchange(probe, "", {}, b""), (*answered, holder, normal)
    )
    assert [f.case.body["prompt"] for f in down.suspects if f.case] == [
        "holds",
        "500 0",
        "500 1",
        "500 2",
    ]


class HoldsTheKillersAnswer:
    """ASGI, around the reference app: the answer to a one-item prompt list (the request
    that kills the target, fault dies-on-one-item-prompt-list) is held back until another
    request has been answered after it, as mlx-lm's string-list prompt was still in flight
    when a token prompt's 404 came back."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.killer_seen = threading.Event()  # the target has it (and is dead)
        self.other_out = threading.Event()  # another request was answered after it

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/completions":
            await self.app(scope, receive, send)
            return
        messages = [await receive()]
        while messages[-1].get("more_body"):
            messages.append(await receive())
        body = json.loads(b"".join(m.get("body", b"") for m in messages))
        replay = iter(messages)

        async def again() -> Any:
            return next(replay, None) or await receive()

        if body.get("prompt") == ["Say hi"]:
            held: list[Any] = []

            async def keep(message: Any) -> None:
                held.append(message)

            await self.app(scope, again, keep)
            self.killer_seen.set()
            while not self.other_out.is_set():  # the server's loop keeps serving meanwhile
                await asyncio.sleep(0.005)
            for message in held:
                await send(message)
            return
        await self.app(scope, again, send)
        if self.killer_seen.is_set():
            self.other_out.set()


def test_the_request_in_flight_when_the_target_died_is_named() -> None:
    """The killer is in flight; another request, sent after it, comes back 404 first: that
    404 is the first failure seen, and TARGET-ALIVE names the killer as in flight when the
    target died, before the request that merely found it dead (not the last one answered
    normally, which finished before the killer started)."""
    spec = load_spec("aihubmix")
    server = ReferenceServer(
        "aihubmix", api_key=API_KEY, faults=frozenset({"dies-on-one-item-prompt-list"})
    )
    wrapper = server.app = HoldsTheKillersAnswer(server.app)
    client = Client(server.start(), api_key=API_KEY, limits=Limits(ttfb=5, gap=5, total=10),
                    concurrency=4)  # fmt: skip
    run = Run(Settings(concurrency=4), spec, client)
    item = run.item()
    killer = Case({"model": MODEL, "prompt": ["Say hi"], "max_tokens": 4}, label="one-item list")
    after = Case({"model": MODEL, "prompt": "After", "max_tokens": 4}, label="sent after")
    try:
        first = item.send(case())
        assert first is not None and first.status == 200  # the last normal answer
        in_flight: Future[Sent] = item.dispatch(killer)
        assert wrapper.killer_seen.wait(5)
        assert item.send(after) is None  # 404: the health probe finds the target dead
        assert item.receive(in_flight) is None  # not judged: the target is down
    finally:
        run.close()
        client.close()
        server.stop()
    alive = [(f, ex) for f, ex in item.failures if f.requirement == "TARGET-ALIVE"]
    assert len(alive) == 1
    message = alive[0][0].message
    # The first failure seen is whichever 404 the client read first (the killer's is let
    # go as the other one is answered); the killer is named first of those in flight.
    seen, named, in_flight_part = message.partition("in flight when it died")
    assert named and "the first failure seen" in seen
    assert in_flight_part.index("'one-item list'") < in_flight_part.index("'sent after'")
    assert "answered normally" not in message and "'valid test case'" not in message
    assert HEALTH_TAG in alive[0][1].case.tags  # the finding is on the failed probe


def test_the_requests_answered_alone_reach_the_run_and_its_closing_lines() -> None:
    """Items' entries are concatenated when the run merges them; the closing lines count
    them and name each holder once."""
    from conformance.front.terminal import sent_alone_lines
    from conformance.judging.verdict.results import Results

    held = "'n:maximum: n=129' {\"n\": 129}"
    run, first, second = Results(), Results(), Results()
    first.info.sent_alone = (SentAlone("a", "...", held),)
    second.info.sent_alone = (SentAlone("b", "...", held), SentAlone("c", "...", None))
    run.merge(first)
    run.merge(second)
    assert [e["case"] for e in meta_of(run)["sent_alone"]] == ["a", "b", "c"]
    lines = sent_alone_lines(run)
    assert lines[0].startswith("sent again alone: 3 request(s)")
    assert lines[1:] == [f"the target was held by: {held}"]
