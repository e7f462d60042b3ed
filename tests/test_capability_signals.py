"""What conformance requests show of the target's capabilities by themselves.

A valid edge value the target refuses with a proper 4xx (vLLM: ``max_tokens: 0`` without
echo, ``top_p: 0``) is named per value in the capability table, the closing block and
summary.md, never only counted; ``best_of`` accepted where OpenAI's rules say it cannot be
(below ``n``, with ``stream``) is ignored, not offered on the strength of a 200.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import API_KEY, MODEL, Targets

from conformance.front.runner import Outcome, run_suite
from conformance.judging.verdict import capabilities as cap
from conformance.reports.summary import offered_of
from conformance.run.session import Settings, Setup


def _run(targets: Targets, fault: str, report_dir: Path | None = None) -> Outcome:
    url = targets.get("aihubmix", fault).server.url
    settings = Settings(model=MODEL, max_examples=3, concurrency=8)
    setup = Setup(settings, spec="aihubmix", target_url=url, api_key=API_KEY)
    return run_suite(setup, report_dir=report_dir)


def test_a_refused_valid_value_is_named_per_value_in_every_report(
    targets: Targets, tmp_path: Path
) -> None:
    outcome = _run(targets, "decline-max-tokens-0", tmp_path)
    assert outcome.verdict.word == "passed", outcome.verdict.reasons
    table = outcome.results.capabilities
    entry = table["value:max_tokens=0"]
    assert entry.outcome == "declined"
    assert entry.detail == '400 with the error envelope: "max_tokens must be at least 1"'
    # A refused value is no probed feature: the capability figure is the conformant one's.
    assert (
        offered_of(outcome.results).counts == offered_of(_run(targets, "sse-crlf").results).counts
    )
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "value:max_tokens=0" in summary
    assert "Valid requests refused:" in summary
    assert '"max_tokens must be at least 1": max_tokens=0' in summary


@pytest.mark.exhaustive  # a whole run in a subprocess or of its own
def test_the_closing_block_names_the_refused_valid_requests(
    targets: Targets, tmp_path: Path
) -> None:
    url = targets.get("aihubmix", "decline-max-tokens-0").server.url
    run = subprocess.run(
        [sys.executable, "-m", "conformance", "--target-url", url, "--model", MODEL,
         "--max-examples", "3", "--report-dir", str(tmp_path), "-q", "-p", "no:cacheprovider"],
        env={**os.environ, "CONFORMANCE_API_KEY": API_KEY},
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("valid requests refused: ") for line in lines), run.stdout
    assert 'refused: declined with 400: "max_tokens must be at least 1": max_tokens=0' in lines
    assert (
        'capability value:max_tokens=0: declined (400 with the error envelope: "max_tokens '
        'must be at least 1")' in lines
    )


def test_best_of_served_where_openai_refuses_it_is_ignored_not_offered(targets: Targets) -> None:
    outcome = _run(targets, "best-of-ignored")
    table = outcome.results.capabilities
    assert table["best_of"].outcome == "offered"  # the probe's 200 alone shows nothing
    assert table["best_of:below-n"].outcome == "ignored"
    assert table["best_of:stream"].outcome == "ignored"
    assert "cannot be streamed" in table["best_of:stream"].detail
    unmet = cap.unmet(outcome.results, ["best_of"])
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in unmet] == [
        "best_of:below-n",
        "best_of:stream",
    ]


@pytest.mark.exhaustive  # a whole run in a subprocess or of its own
def test_a_conformant_target_shows_no_signal(targets: Targets) -> None:
    outcome = _run(targets, "sse-crlf")
    assert not [f for f in outcome.results.capabilities if f.startswith(("value:", "best_of:"))]


def test_the_logit_bias_probe_biases_a_token_every_vocabulary_has() -> None:
    from conformance.judging.document.spec import load_spec

    probes = cap.capability_probes(load_spec("aihubmix"), MODEL, 8)
    (probe,) = [p for p in probes if cap.feature_of(p) == "logit_bias"]
    (token,) = probe.body["logit_bias"]
    assert int(token) < 320  # within the smallest vocabulary of the tier (vLLM's tiny model)
