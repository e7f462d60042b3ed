"""CONTEXT-WINDOW-REJECTED (issue 25): a prompt over the window /v1/models advertises.

Both ways on synthetic exchanges (the rule's edges) and through the context window
scenario against the reference target: the conformant target refuses the prompt with a
400, fault ``context-window-ignored`` serves it (vLLM, Ollama), and where no window is
advertised (``models-no-window``) the requirement is not applicable, with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import API_KEY, MODEL, Targets, failed, judge
from synthetic import body_exchange, completion_for, req

from conformance.front.runner import Outcome, run_suite
from conformance.judging.checks.window import advertised_window, over_window_probe
from conformance.judging.document.spec import load_spec
from conformance.judging.verdict.record import SkipCause
from conformance.judging.wire.case import Case
from conformance.run.scenarios import CONTEXT_WINDOW
from conformance.run.session import Settings, Setup

AIHUBMIX = load_spec("aihubmix")
RID = "CONTEXT-WINDOW-REJECTED"


def test_the_window_is_read_from_the_models_own_object() -> None:
    listing = {"object": "list", "data": [{"id": "a", "max_model_len": 4096}, {"id": "b"}]}
    assert advertised_window(listing, "a") == (4096, "")
    assert advertised_window(listing, "b")[0] is None
    assert "no model 'c'" in advertised_window(listing, "c")[1]
    # One model listed: a server serving it under another name (an alias).
    assert advertised_window({"data": [{"id": "x", "max_model_len": 8}]}, "alias") == (8, "")
    assert "not a model list" in advertised_window({"detail": "Not Found"}, "a")[1]
    assert advertised_window({"data": [{"id": "a", "max_model_len": "4096"}]}, "a")[0] is None


def served(probe: Case, prompt_tokens: int | None = None, status: int = 200) -> Any:
    """vLLM's answer to a prompt over its window: 200, empty text, "length"."""
    body = completion_for(req(max_tokens=1), [])
    body["choices"][0].update(text="", finish_reason="length")
    if prompt_tokens is None:
        del body["usage"]
    else:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 0,
                         "total_tokens": prompt_tokens}  # fmt: skip
    return judge(AIHUBMIX, body_exchange(probe, body, status=status))


@pytest.mark.parametrize("token_ids", [True, False])
def test_a_prompt_over_the_window_served_is_the_one_finding(token_ids: bool) -> None:
    probe = over_window_probe(MODEL, 16, token_ids=token_ids)
    findings = served(probe, 17)
    assert failed(findings) == {RID}
    assert "16-token context window" in findings[RID].message
    assert "'length'" in findings[RID].message


def test_a_refusal_passes_and_a_5xx_fails() -> None:
    probe = over_window_probe(MODEL, 16, token_ids=True)
    error = {"error": {"message": "too long", "type": "invalid_request_error", "param": None,
                       "code": "context_length_exceeded"}}  # fmt: skip
    assert failed(judge(AIHUBMIX, body_exchange(probe, error, status=400))) == set()
    assert failed(judge(AIHUBMIX, body_exchange(probe, error, status=500))) == {RID}
    assert RID not in judge(AIHUBMIX, body_exchange(probe, error, status=429))


def test_a_text_the_target_counts_within_its_window_is_no_finding() -> None:
    # Text is the target's tokenizer's to count: its own count within the window says the
    # prompt was not over it; no count leaves the units (each a token) as the count.
    probe = over_window_probe(MODEL, 16, token_ids=False)
    assert failed(served(probe, 16)) == set()
    assert failed(served(probe, None)) == {RID}
    # A token-id prompt's length is exact, whatever usage says.
    assert failed(served(over_window_probe(MODEL, 16, token_ids=True), 3)) == {RID}


def play(targets: Targets, *faults: str, flavor: str = "aihubmix") -> Outcome:
    url = targets.get(flavor, *faults).server.url
    settings = Settings(model=MODEL, max_examples=1)
    setup = Setup(spec=flavor, target_url=url, api_key=API_KEY, settings=settings)
    return run_suite(setup, scenarios=[CONTEXT_WINDOW])


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_the_conformant_target_refuses_the_prompt_over_its_window(
    targets: Targets, flavor: str
) -> None:
    results = play(targets, flavor=flavor).results
    tally = results.tallies[RID]
    assert (tally.checked, tally.failed) == (1, 0)
    assert not [t.id for t in results.tallies.values() if t.failed]
    # The preflight, the model list, the short token-id prompt, the prompt over the window.
    assert results.spent.requests == 4


def test_a_target_refusing_token_ids_gets_the_prompt_as_text(targets: Targets) -> None:
    results = play(targets, "reject-token-prompts").results
    assert (results.tallies[RID].checked, results.tallies[RID].failed) == (1, 0)


def test_a_prompt_over_the_window_served_fails(targets: Targets) -> None:
    outcome = play(targets, "context-window-ignored")
    assert [rid for rid, _, _ in outcome.verdict.failed] == [RID]
    message = outcome.results.tallies[RID].examples[0].message
    assert "8192-token context window" in message and "'length'" in message


def test_no_advertised_window_is_not_applicable_with_the_reason(targets: Targets) -> None:
    outcome = play(targets, "models-no-window")
    assert outcome.results.tallies[RID].checked == 0
    (ran,) = outcome.results.run_record.scenarios
    assert (ran.cause, ran.covers) == (SkipCause.NOT_DECLARED, (RID,))
    assert "advertises no context window" in ran.reason and "max_model_len" in ran.reason
    not_applicable = {u.id: u.reason for u in outcome.verdict.coverage.not_applicable}
    assert "advertises no context window" in not_applicable[RID]
    assert RID not in {u.id for u in outcome.verdict.coverage.untested}


def test_a_window_past_the_token_budget_is_not_sent(targets: Targets) -> None:
    # Served, the prompt would cost the whole window: only within --budget-tokens. That is
    # said before anything is sent (a stated reason, COST), so a 128k model under the
    # default budget is not "incomplete": the MUST is listed as not probed, with the way
    # to probe it, never passed.
    url = targets.get("aihubmix").server.url
    settings = Settings(model=MODEL, max_examples=1, budget_tokens=4096)
    setup = Setup(target_url=url, api_key=API_KEY, settings=settings)
    outcome = run_suite(setup, scenarios=[CONTEXT_WINDOW])
    (ran,) = outcome.results.run_record.scenarios
    assert ran.cause == SkipCause.COST and "--budget-tokens 4096" in ran.reason
    assert "raise it above 8192" in ran.reason
    assert outcome.results.spent.requests == 2  # the preflight and the model list
    assert RID not in {u.id for u in outcome.verdict.coverage.untested}
    assert (
        "--budget-tokens" in {u.id: u.reason for u in outcome.verdict.coverage.not_applicable}[RID]
    )
    assert outcome.results.tallies[RID].checked == 0
