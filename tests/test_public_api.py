"""The public API as a user meets it: typed (mypy --strict on a user's script), cheap to
import with the plugin, one exception base, and a provider's own requirements."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support import case

import conformance
from conformance.judging.exceptions import ConformanceError
from conformance.judging.requirements import REGISTRY, Context, Level, Violation, requirement

ROOT = Path(__file__).resolve().parents[1]
USAGE = ROOT / "tests" / "typing" / "public_api.py"


def test_a_users_script_passes_mypy_strict() -> None:
    from mypy import api

    out, err, status = api.run(["--strict", str(USAGE)])
    assert status == 0, out + err
    assert (ROOT / "conformance" / "py.typed").exists()


def test_every_public_name_resolves() -> None:
    for name in conformance.__all__:
        assert getattr(conformance, name) is not None, name


def test_loading_the_plugin_imports_no_judge_engine_or_spec() -> None:
    code = "import sys, conformance.front.plugin; print(sorted(m for m in sys.modules if m.startswith('conformance')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # conformance.front.arguments: the option types and the command line's check (stdlib
    # only); option_table: the one table of options, whose choices and help come from the
    # contract, the errata's names, the policies and what a run records of an option (each
    # stdlib only, no document read); conformance.judging.version: the version (a
    # constant); the layers' packages themselves are docstrings.
    assert done.stdout.strip() == str(
        [
            "conformance",
            "conformance.front",
            "conformance.front.arguments",
            "conformance.front.option_table",
            "conformance.front.options",
            "conformance.front.plugin",
            "conformance.judging",
            "conformance.judging.document",
            "conformance.judging.document.contract",
            "conformance.judging.document.errata",
            "conformance.judging.document.policies",
            "conformance.judging.verdict",
            "conformance.judging.verdict.recorded_options",
            "conformance.judging.version",
        ]
    )
    third_party = "import sys, conformance.front.plugin; print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)))"
    done = subprocess.run(
        [sys.executable, "-c", third_party], capture_output=True, text=True, check=True
    )
    heavy = {"httpx", "jsonschema", "openapi_core", "hypothesis", "schemathesis", "yaml", "jinja2"}
    assert not heavy & set(ast.literal_eval(done.stdout)), done.stdout


def _exception_classes() -> list[tuple[str, str, list[str]]]:
    """(module, class, bases) of every exception class the package defines."""
    found = []
    for path in [
        *ROOT.glob("conformance/**/*.py"),
        *ROOT.glob("strategies/*.py"),
        *ROOT.glob("reports/*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Exception", "Error")) for b in bases):
                    found.append((str(path.relative_to(ROOT)), node.name, bases))
    return found


#: Not errors of the suite: how a check says "failed" / "declined with a proper 4xx".
OUTSIDE = {"Violation", "Unsupported"}


def test_the_suites_exceptions_share_one_base() -> None:
    classes = _exception_classes()
    assert len(classes) >= 12
    loose = [
        (path, name, bases)
        for path, name, bases in classes
        if name not in OUTSIDE
        and name != "ConformanceError"
        and not any("ConformanceError" in b or b in {n for _, n, _ in classes} for b in bases)
    ]
    # strategies/_fuzz.py is the options helper's to rebase (FuzzUnavailable).
    assert [name for _, name, _ in loose if name != "FuzzUnavailable"] == [], loose
    assert issubclass(conformance.BadInput, ConformanceError)
    assert issubclass(conformance.SpecError, ConformanceError)


@pytest.fixture
def provider_rule() -> object:
    @requirement(
        "ACME-PROMPT-ECHO",
        level=Level.MUST,
        area="schema",
        statement="The answer names the model asked for.",
        source="ACME's own rule",
        evidence="client-visible",
    )
    def model_named(ctx: Context) -> None:
        body = ctx.exchange.json
        if isinstance(body, dict) and body.get("model") != ctx.case.body.get("model"):
            raise Violation("the answer names another model", path="model")

    yield model_named
    REGISTRY.pop("ACME-PROMPT-ECHO")


def _answer(model: str) -> conformance.Exchange:
    body = (
        b'{"id":"x","object":"text_completion","created":1,"model":"' + model.encode() + b'",'
        b'"choices":[{"text":"hi","index":0,"logprobs":null,"finish_reason":"length"}]}'
    )
    recorded = case(model="m", prompt="hi", max_tokens=1)
    return conformance.exchange_from_wire(
        recorded, 200, [("content-type", "application/json")], body
    )


def test_a_providers_own_requirement_judges_both_ways(provider_rule: object) -> None:
    spec = conformance.load_spec("aihubmix")
    held = {f.requirement: f for f in conformance.judge(spec, _answer("m"))}
    assert held["ACME-PROMPT-ECHO"].outcome == "passed"
    broken = {f.requirement: f for f in conformance.judge(spec, _answer("other"))}
    assert broken["ACME-PROMPT-ECHO"].outcome == "failed"
    assert broken["ACME-PROMPT-ECHO"].message == "the answer names another model"


def test_a_transcript_replays_as_the_tool_replays_it() -> None:
    """conformance.exchange_from_transcript is the tool's to_exchange, moved into the core."""
    sys.path.insert(0, str(ROOT / "tools" / "real_targets"))
    try:
        import transcript  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    paths = sorted((ROOT / "tests" / "transcripts").rglob("*.json"))
    assert paths
    for path in paths:
        data = transcript.load(path)
        if "request" not in data or "response" not in data:
            continue
        mine, theirs = conformance.exchange_from_transcript(data), transcript.to_exchange(data)
        assert (mine.status, mine.body, mine.events, mine.stream_error) == (
            theirs.status,
            theirs.body,
            theirs.events,
            theirs.stream_error,
        ), path
        assert mine.case == theirs.case and mine.headers.items == theirs.headers.items, path
