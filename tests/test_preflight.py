"""The preflight: one minimal request proves the target serves completions, or one clear line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import API_KEY, MODEL, Targets

from conformance.front.options import SUITE_DIR
from conformance.run.client import Client
from conformance.run.preflight import PreflightFailed, base_url, preflight


def test_a_base_url_with_the_spec_prefix_is_used_once_and_reported() -> None:
    assert base_url("http://h:1") == ("http://h:1", None)
    assert base_url("http://h:1/api/") == ("http://h:1/api", None)
    base, note = base_url("http://h:1/v1/")
    assert base == "http://h:1"
    assert note == "using base URL http://h:1 (the spec's /v1 was already in --target-url)"
    assert base_url("http://h:1/gw/v1/completions")[0] == "http://h:1/gw"


def _fail(client: Client, model: str = MODEL) -> str:
    try:
        with pytest.raises(PreflightFailed) as raised:
            preflight(client, model)
    finally:
        client.close()
    return str(raised.value)


def test_a_conformant_target_passes(targets: Targets) -> None:
    client = Client(targets.get("nscale").server.url, api_key=API_KEY)
    try:
        assert preflight(client, MODEL).status == 200
    finally:
        client.close()


def test_an_unknown_model_is_named(targets: Targets) -> None:
    client = Client(targets.get("aihubmix").server.url, api_key=API_KEY)
    assert _fail(client, "nosuchmodel").startswith(
        "the target does not serve model 'nosuchmodel' (--model): 404"
    )


def test_credentials(targets: Targets) -> None:
    url = targets.get("aihubmix").server.url
    assert "demands an API key (401): pass --api-key" in _fail(Client(url))
    assert "rejected the API key (401)" in _fail(Client(url, api_key="sk-wrong-key"))


class Answer(BaseHTTPRequestHandler):
    """Answers every request with the class's status, content type and body."""

    status, media, body = 404, "application/json", b'{"detail": "Not Found"}'

    def do_POST(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.media)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[object]:
    servers: list[ThreadingHTTPServer] = []

    def start(handler: type[BaseHTTPRequestHandler]) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_not_a_completions_api(serve: object, tmp_path: Path) -> None:
    start = serve  # type: ignore[assignment]
    files = type("Files", (SimpleHTTPRequestHandler,), {"log_message": Answer.log_message})
    assert "is not a completions API (POST answered 501" in _fail(Client(start(files)))
    html = type("Html", (Answer,), {"status": 200, "media": "text/html", "body": b"<html/>"})
    assert "is not a completions API (POST answered 200" in _fail(Client(start(html)))
    assert "is not a completions API (404 there as on any path)" in _fail(Client(start(Answer)))
    model_404 = type("Model404", (Answer,), {"body": b'{"error": {"message": "no such model"}}'})
    other = start(model_404)
    # Same 404 on every path is a missing route, not an unknown model.
    assert "404 there as on any path" in _fail(Client(other))


def test_a_model_404_on_a_known_route(serve: object) -> None:
    class Routes(Answer):
        def do_POST(self) -> None:
            known = self.path == "/v1/completions"
            self.body = b'{"error": {"message": "unknown"}}' if known else b"Not Found"
            super().do_POST()

    start = serve  # type: ignore[assignment]
    message = _fail(Client(start(Routes)), "gpt-x")
    assert message.startswith(
        "the target does not serve model 'gpt-x' (404 on the completions route)"
    )


def test_embedded_target_with_a_model_it_does_not_serve_is_one_clear_error(
    pytester: pytest.Pytester,
) -> None:
    result = pytester.runpytest_inprocess(str(SUITE_DIR), "--model", "nosuchmodel")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: conformance: the target does not serve model 'nosuchmodel' (--model): 404 *"]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_false_gzip_header_on_a_completion_passes_the_preflight(serve: object) -> None:
    """The body read as sent is a completion: the run goes on, and judges the header."""

    class FalseGzip(Answer):
        status, body = 200, b'{"id": "c", "object": "text_completion", "choices": []}'

        def send_header(self, keyword: str, value: str) -> None:
            super().send_header(keyword, value)
            if keyword == "Content-Type":
                super().send_header("Content-Encoding", "gzip")

    start = serve  # type: ignore[assignment]
    client = Client(start(FalseGzip))
    try:
        exchange = preflight(client, MODEL)
    finally:
        client.close()
    assert exchange.status == 200 and exchange.false_encoding == "gzip"


def test_a_false_gzip_header_on_anything_else_is_named(serve: object) -> None:
    class FalseGzipHtml(Answer):
        status, media, body = 200, "text/html", b"<html>hello</html>"

        def send_header(self, keyword: str, value: str) -> None:
            super().send_header(keyword, value)
            if keyword == "Content-Type":
                super().send_header("Content-Encoding", "gzip")

    start = serve  # type: ignore[assignment]
    message = _fail(Client(start(FalseGzipHtml)))
    assert "claims Content-Encoding: gzip, but its body is not gzip" in message


def test_a_slow_preflight_goes_alone_while_the_first_lists_are_built() -> None:
    """The preflight goes out on a thread of its own; while a slow target keeps it waiting,
    the run builds the edge and invalid lists and draws the valid requests
    (conformance/run/ahead.py), in that order until it is answered: the same lists the
    scenarios build, and nothing else is sent before its answer."""
    from conformance.reference import ReferenceServer
    from conformance.run.ahead import edge_list, invalid_list
    from conformance.run.assembly import assemble
    from conformance.run.session import Settings, Setup

    # A second: time enough for both lists on a busy machine (they take ~0.2 s).
    server = ReferenceServer(api_key=API_KEY, models=(MODEL,), delay=1.0)
    url = server.start()
    try:
        setup = Setup(Settings(model=MODEL), target_url=url, api_key=API_KEY)
        assembled = assemble(setup)
        try:
            run = assembled.run
            assert assembled.results.spent.requests == 1
            prebuilt = dict(run._shared)
            assert list(prebuilt) == AHEAD_ORDER[: len(prebuilt)]
            assert edge_list(run) is prebuilt["edge_requests"]
            assert invalid_list(run) is prebuilt["invalid_cases"]
        finally:
            assembled.close()
    finally:
        server.stop()


AHEAD_ORDER = [
    "edge_requests",
    "invalid_cases",
    *(f"valid_{kind}[{b}]" for kind in ("requests", "streams") for b in range(4)),
]


@pytest.fixture
def bare_run() -> Iterator[object]:
    """An assembled run against the reference target, without its preflight: nothing built."""
    from conformance.reference import ReferenceServer
    from conformance.run.assembly import assemble
    from conformance.run.session import Settings, Setup

    server = ReferenceServer(api_key=API_KEY, models=(MODEL,))
    url = server.start()
    assembled = assemble(
        Setup(Settings(model=MODEL), target_url=url, api_key=API_KEY, preflight=False)
    )
    try:
        yield assembled.run
    finally:
        assembled.close()
        server.stop()


def test_the_valid_requests_drawn_ahead_are_the_ones_each_batch_draws(bare_run: object) -> None:
    """Each value is seeded by its index: a part drawn ahead is the part the batch would
    have drawn itself, streamed or not."""
    from conformance.run import scenarios
    from conformance.run.ahead import build_ahead
    from conformance.strategies import draw, valid_requests

    run: Any = bare_run
    build_ahead(run)
    assert list(run._shared) == AHEAD_ORDER
    s = run.settings
    for stream in (False, True):
        strategy = valid_requests(run.spec, model=s.model, max_tokens=s.max_tokens, stream=stream)
        for b in range(scenarios.BATCHES):
            drawn = draw(strategy, s.max_examples, seed_value=s.seed, part=(b, scenarios.BATCHES))
            assert scenarios._valid(run, b, stream=stream) == drawn
            assert (
                scenarios._valid(run, b, stream=stream)
                is run._shared[AHEAD_ORDER[2 + 4 * stream + b]]
            )


def test_building_ahead_stops_once_the_preflight_is_answered(bare_run: object) -> None:
    from conformance.run.ahead import build_ahead

    run: Any = bare_run
    build_ahead(run, lambda: True)
    assert run._shared == {}
    asked = iter([False, False, True])
    build_ahead(run, lambda: next(asked))
    assert list(run._shared) == AHEAD_ORDER[:2]
    build_ahead(run, draws=False)  # an xdist worker draws only the parts its items play
    assert list(run._shared) == AHEAD_ORDER[:2]


def test_a_slow_preflight_that_fails_is_the_same_one_line() -> None:
    from conformance.reference import ReferenceServer
    from conformance.run.assembly import BadInput, assemble
    from conformance.run.session import Settings, Setup

    server = ReferenceServer(api_key=API_KEY, models=(MODEL,), delay=0.3)
    url = server.start()
    try:
        setup = Setup(Settings(model=MODEL), target_url=url, api_key="sk-wrong-key")
        with pytest.raises(BadInput, match="rejected the API key"):
            assemble(setup)
    finally:
        server.stop()


def _documents() -> list[object]:
    from conformance.judging.document.spec import BUILTIN_SPECS, load_spec

    fixtures = Path(__file__).parent / "fixtures"
    found: list[object] = [load_spec(name) for name in BUILTIN_SPECS]
    found += [load_spec(name, strict=True) for name in BUILTIN_SPECS]
    return found + [load_spec(str(path)) for path in sorted(fixtures.glob("*.json"))]


def test_the_quick_probe_is_the_constructors_case_or_nothing() -> None:
    """The preflight leaves before openapi-core is imported only with the very case the one
    case constructor builds (tests/test_spec_mutation.py checks tightened copies too)."""
    from conformance.run.preflight import probe_case, quick_probe_case

    taken = []
    for spec in _documents():
        quick = quick_probe_case(MODEL, spec)  # type: ignore[arg-type]
        try:
            built = probe_case(MODEL, spec)  # type: ignore[arg-type]
        except PreflightFailed:
            built = None
        assert quick is None or quick == built, spec
        taken.append(quick is not None)
    assert all(taken[:3])  # the vendored documents as the defaults load them
    assert not taken[3]  # Nscale as written admits no prompt: the old order, one line


def test_the_preflight_is_on_the_wire_while_the_run_is_assembled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Against a slow target the generation check and the run's assembly happen while the
    preflight waits, not before it leaves; still nothing else is sent before its answer."""
    from conformance.reference import ReferenceServer
    from conformance.run import assembly
    from conformance.run.session import Settings, Setup

    seen: list[bool] = []
    check = assembly._check_generation

    def watched(*args: object) -> None:
        seen.append(any(t.name == "conformance-preflight" for t in threading.enumerate()))
        check(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(assembly, "_check_generation", watched)
    server = ReferenceServer(api_key=API_KEY, models=(MODEL,), delay=0.3)
    url = server.start()
    try:
        assembled = assembly.assemble(Setup(Settings(model=MODEL), target_url=url, api_key=API_KEY))
        try:
            assert seen == [True]
            assert assembled.results.spent.requests == 1
            assert list(assembled.run._shared) == AHEAD_ORDER[: len(assembled.run._shared)]
        finally:
            assembled.close()
    finally:
        server.stop()


def test_a_quick_probe_the_constructor_disagrees_with_is_sent_again_as_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conformance.judging.wire.case import Case
    from conformance.reference import ReferenceServer
    from conformance.run import assembly
    from conformance.run.session import Settings, Setup

    other = Case({"model": MODEL, "prompt": "Other", "max_tokens": 1}, "probe", "preflight")
    monkeypatch.setattr(assembly, "quick_probe_case", lambda model, spec: other)
    sent: list[str] = []
    send = assembly.Client.send

    def recorded(self: Client, case: Case) -> object:
        sent.append(case.body["prompt"])
        return send(self, case)

    monkeypatch.setattr(assembly.Client, "send", recorded)
    server = ReferenceServer(api_key=API_KEY, models=(MODEL,))
    url = server.start()
    try:
        assembled = assembly.assemble(Setup(Settings(model=MODEL), target_url=url, api_key=API_KEY))
        try:
            assert sent == ["Other", "Say hi"]
            assert assembled.results.spent.requests == 2
        finally:
            assembled.close()
    finally:
        server.stop()
