"""``--spec URL`` and ``--spec target``: fetched once, like requests to the target, bounded.

A tiny Starlette app on 127.0.0.1 serves documents (one only with the bearer key and an
extra header), redirects, a 404, HTML and an oversized body; the reference target
serves its own document at ``/openapi.json``. The whole-run tests are the issue's
"done when": OpenAI's document by name, by path and as a URL served by the target each
give ``passed`` against the conformant reference target.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from support import meta_of

from conformance.front.runner import assemble, run_suite
from conformance.judging.document.spec import SpecError, specs_dir
from conformance.reference import ReferenceServer
from conformance.run.assembly import BadInput
from conformance.run.client import Limits
from conformance.run.fetch import HANDOFF_ENV, Fetch, load_spec
from conformance.run.session import Settings, Setup

KEY = "sk-docs-" + "c0ffee" * 4
ORG = "org-" + "beef" * 4
DOCUMENT = (specs_dir() / "nscale.yaml").read_bytes()
SMALL_RUN = Settings(max_examples=2)


class Served:
    """What the tiny app saw: the requests to each path."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}


def _app(served: Served, other_origin: str) -> Starlette:
    async def guarded(request: Request) -> Response:
        served.hits[request.url.path] = served.hits.get(request.url.path, 0) + 1
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return PlainTextResponse(f"no key {request.headers.get('authorization')}", 401)
        if request.headers.get("x-org") != ORG:
            return PlainTextResponse("no org", 403)
        return Response(DOCUMENT, media_type="application/yaml")

    async def html(request: Request) -> Response:
        return Response(b"<html><body>docs</body></html>", media_type="text/html")

    async def broken(request: Request) -> Response:
        return Response(b"{ not: [yaml", media_type="application/json")

    async def big(request: Request) -> Response:
        return Response(b"#" * 200_000, media_type="application/yaml")

    return Starlette(
        routes=[
            Route("/docs/openapi.yaml", guarded),
            Route("/html", html),
            Route("/broken.json", broken),
            Route("/big.yaml", big),
            Route("/moved", lambda r: RedirectResponse("/docs/openapi.yaml", 307)),
            Route("/away", lambda r: RedirectResponse(f"{other_origin}/docs/openapi.yaml", 307)),
        ]
    )


@pytest.fixture
def docs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Served]]:
    monkeypatch.delenv(HANDOFF_ENV, raising=False)
    served = Served()
    other = ReferenceServer()  # another origin (another port)
    other_url = other.start()
    server = ReferenceServer()
    server.app = _app(served, other_url)  # serve the tiny app instead of a target
    url = server.start()
    yield url, served
    server.stop()
    other.stop()


FETCH = Fetch(api_key=KEY, headers=(("X-Org", ORG),))


def test_a_document_behind_the_key_is_fetched_with_it(docs: tuple[str, Served]) -> None:
    url, served = docs
    spec = load_spec(f"{url}/docs/openapi.yaml", fetch=FETCH)
    assert spec.title.startswith("Nscale") and spec.origin == f"{url}/docs/openapi.yaml"
    import hashlib

    assert spec.sha256 == hashlib.sha256(DOCUMENT).hexdigest()
    assert served.hits == {"/docs/openapi.yaml": 1}


def test_the_run_fetches_once_and_workers_read_its_copy(
    docs: tuple[str, Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, served = docs
    load_spec(f"{url}/docs/openapi.yaml", fetch=FETCH)
    # An xdist worker starts with the controller's environment: no second request.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    again = load_spec(f"{url}/docs/openapi.yaml", fetch=Fetch())
    assert served.hits == {"/docs/openapi.yaml": 1}
    assert Path(json.loads(os.environ[HANDOFF_ENV])["file"]) == again.path
    # The controller itself (or a second run in one process) fetches afresh.
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    load_spec(f"{url}/docs/openapi.yaml", fetch=FETCH)
    assert served.hits == {"/docs/openapi.yaml": 2}


def test_same_origin_redirects_are_followed(docs: tuple[str, Served]) -> None:
    url, _ = docs
    assert load_spec(f"{url}/moved", fetch=FETCH).title.startswith("Nscale")


@pytest.mark.parametrize(
    ("path", "fetch", "words"),
    [
        ("/docs/openapi.yaml", Fetch(), "answered 401"),
        ("/docs/openapi.yaml", Fetch(api_key=KEY), "answered 403"),
        ("/nowhere.json", FETCH, "answered 404"),
        ("/html", FETCH, "is not an OpenAPI document"),
        ("/broken.json", FETCH, "is not valid YAML or JSON"),
        ("/big.yaml", Fetch(limits=Limits(max_bytes=100_000)), "larger than --max-body-bytes"),
        ("/away", FETCH, "redirects to another origin"),
    ],
    ids=["no key", "no header", "404", "html", "not yaml", "too big", "other origin"],
)
def test_fetch_errors_are_one_line_without_secrets(
    docs: tuple[str, Served], path: str, fetch: Fetch, words: str
) -> None:
    url, _ = docs
    with pytest.raises(SpecError) as raised:
        load_spec(url + path, fetch=fetch)
    message = str(raised.value)
    assert words in message and "\n" not in message
    assert KEY not in message and ORG not in message


def test_an_unreachable_url_is_one_line() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SpecError, match="cannot fetch"):
        load_spec(f"http://127.0.0.1:{port}/openapi.json", fetch=FETCH)


def test_a_bad_spec_url_is_bad_input_for_the_run(docs: tuple[str, Served]) -> None:
    url, _ = docs
    setup = Setup(spec=f"{url}/docs/openapi.yaml", api_key="sk-wrong-" + "x" * 12)
    with pytest.raises(BadInput, match="answered 401") as raised:
        assemble(setup)
    assert "sk-wrong" not in str(raised.value)


def test_spec_target_needs_a_target_url() -> None:
    with pytest.raises(BadInput, match="--spec target reads the document from --target-url"):
        assemble(Setup(spec="target"))


# -- the "done when": OpenAI's contract three ways, each `passed` ----------------


@pytest.fixture(scope="module")
def openai_target() -> Iterator[str]:
    with ReferenceServer("openai", api_key=KEY, models=("reference-model",)) as server:
        yield server.url


def _run(spec: str, target: str | None = None) -> tuple[str, dict[str, object]]:
    setup = Setup(settings=SMALL_RUN, spec=spec, target_url=target, api_key=KEY if target else None)
    outcome = run_suite(setup)
    return outcome.verdict.word, meta_of(outcome.results)


def test_openai_by_name_passes_on_the_embedded_target() -> None:
    word, meta = _run("openai")
    assert word == "passed"
    assert meta["operation"] == "POST /v1/completions (server path /v1 + path /completions)"
    assert (
        meta["spec_sha256"]
        == json.loads((specs_dir() / "pins.json").read_text())["openai.yaml"]["sha256"]
    )


def test_openais_raw_document_by_path_passes_with_either_base_url(
    tmp_path: Path, openai_target: str
) -> None:
    raw = tmp_path / "openapi.yaml"
    shutil.copyfile(specs_dir() / "openai.yaml", raw)
    assert _run(str(raw))[0] == "passed"
    assert _run(str(raw), openai_target + "/v1")[0] == "passed"  # the server path given too


def test_the_targets_own_document_as_a_url_passes(
    openai_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HANDOFF_ENV, raising=False)
    word, meta = _run(f"{openai_target}/openapi.json", openai_target)
    assert word == "passed" and meta["spec_source"] == f"{openai_target}/openapi.json"
    monkeypatch.delenv(HANDOFF_ENV, raising=False)
    word, meta = _run("target", openai_target + "/v1")
    assert word == "passed" and meta["spec_source"] == f"{openai_target}/openapi.json"


def test_a_spec_url_that_fails_is_one_error_line_exit_4(
    pytester: pytest.Pytester, docs: tuple[str, Served]
) -> None:
    from conformance.front.plugin import SUITE_DIR

    url, _ = docs
    out = str(pytester.path / "out")
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "--report-dir", out, "--spec", f"{url}/x.json"
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    errors = [line for line in output.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and "answered 404" in errors[0], output
    assert "Traceback" not in output
