"""The public API as a user writes against it: mypy --strict must accept this file.

Checked by tests/test_public_api.py; never imported by the suite.
"""

from __future__ import annotations

import conformance
from conformance import (
    ConformanceError,
    Context,
    Exchange,
    Finding,
    Level,
    Outcome,
    Settings,
    Setup,
    Spec,
    Verdict,
    Violation,
    exchange_from_transcript,
    exchange_from_wire,
    judge,
    load_spec,
    requirement,
    run_suite,
)


@requirement(
    "ACME-MODEL-ECHO",
    level=Level.SHOULD,
    area="schema",
    statement="The answer names the model that was asked for.",
    source="ACME's own rule",
    evidence="server-habit",
)
def model_echoed(ctx: Context) -> None:
    body = ctx.exchange.json
    if isinstance(body, dict) and body.get("model") != ctx.case.body.get("model"):
        raise Violation("the answer names another model")


def replay(recorded: dict[str, object]) -> list[str]:
    spec: Spec = load_spec("aihubmix")
    exchange: Exchange = exchange_from_transcript(recorded)
    findings: list[Finding] = judge(spec, exchange)
    return [f.requirement for f in findings if f.outcome == "failed"]


def wire() -> Exchange:
    case = conformance.Case({"model": "m", "prompt": "hi"}, label="captured")
    return exchange_from_wire(case, 200, [("content-type", "application/json")], b"{}")


def gate() -> int:
    try:
        outcome: Outcome = run_suite(Setup(settings=Settings(max_examples=2)))
    except ConformanceError as exc:
        print(f"ERROR: {exc}")
        return 4
    verdict: Verdict = outcome.verdict
    word: str = verdict.word
    print(word, verdict.reasons, [u.id for u in verdict.coverage.untested])
    return verdict.exit_code
