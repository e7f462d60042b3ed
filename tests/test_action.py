"""The GitHub Action (action.yml): its steps' scripts run here, end to end, against the
embedded reference target, with a fake $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import API_KEY, Targets

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / ".github" / "action"


def _action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def _gate(
    tmp_path: Path, **inputs: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str], str]:
    """Run the gate step as the Action does: inputs as environment variables."""
    summary, output = tmp_path / "step_summary.md", tmp_path / "output.txt"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "MODEL": "reference-model",
        "EXTRA_ARGS": "--max-examples 2",
        **inputs,
    }
    run = subprocess.run(
        [str(SCRIPTS / "gate.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return run, outputs, summary.read_text(encoding="utf-8") if summary.exists() else ""


def _verdict_step(outputs: dict[str, str]) -> int:
    env = {
        **os.environ,
        "EXIT_CODE": outputs.get("exit-code", ""),
        "VERDICT": outputs.get("verdict", ""),
    }
    return subprocess.run([str(SCRIPTS / "verdict.sh")], env=env, capture_output=True).returncode


def test_action_declares_its_inputs_and_never_puts_an_input_into_shell_text() -> None:
    action = _action()
    assert {
        "target-url", "model", "spec", "api-key", "shards", "baseline",
        "require-capabilities", "python-version", "suite",
    } <= set(action["inputs"])  # fmt: skip
    steps = action["runs"]["steps"]
    assert action["runs"]["using"] == "composite"
    for step in steps:
        # Inputs reach scripts as environment variables only (no injection, no echo).
        assert "${{" not in step.get("run", ""), step
    text = (ROOT / "action.yml").read_text()
    assert (
        text.count("inputs.api-key") == 1 and "CONFORMANCE_API_KEY: ${{ inputs.api-key }}" in text
    )
    install = next(s for s in steps if s.get("name", "").startswith("Install"))
    assert "$GITHUB_ACTION_PATH" in install["run"]  # the Action's own checkout, anywhere
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps)
    for script in re.findall(r"\.github/action/[\w.]+", text):
        assert os.access(ROOT / script, os.X_OK), script


def test_failing_verdict_fails_the_job(targets: Targets, tmp_path: Path) -> None:
    url = targets.get("aihubmix", "empty-id").server.url
    quick = "--max-examples 1 --checks RESP-ID -k valid_requests"
    run, outputs, summary = _gate(
        tmp_path, TARGET_URL=url, CONFORMANCE_API_KEY=API_KEY, EXTRA_ARGS=quick
    )
    assert outputs["verdict"] == "failed", run.stdout + run.stderr
    assert "## Completions conformance: ❌ FAILED" in summary and "`RESP-ID`" in summary
    assert run.returncode == 0, "the gate step passes so that the reports are uploaded"
    assert _verdict_step(outputs) == 1


def test_unreachable_target_is_named_in_the_summary(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    run, outputs, summary = _gate(tmp_path, TARGET_URL=f"http://127.0.0.1:{port}", SHARDS="2")
    assert outputs["verdict"] == "bad-input" and outputs["exit-code"] == "4", run.stdout
    assert "⛔ NOT RUN" in summary and "2 of 2 shard(s) wrote no results" in summary
    for k in (1, 2):
        assert re.search(rf"- shard {k}/2: exit 4: ERROR: conformance: cannot connect to ", summary)
    assert _verdict_step(outputs) == 4


def test_gitlab_include_runs_the_same_gate() -> None:
    job = yaml.safe_load((ROOT / "ci" / "gitlab-ci.yml").read_text())[".completions-conformance"]
    assert any("completions-conformance gate" in line for line in job["script"])
    assert job["artifacts"]["when"] == "always"


def _readme_action_inputs() -> dict[str, str]:
    """The README's Action example as written: its ``with:`` inputs, the commented ones
    included (uncommented), as the environment the gate step gets them in."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("```yaml") + len("```yaml") :]
    block = block[: block.index("```")]
    uncommented = re.sub(r"^(\s+)# (\w[\w-]*: )", r"\1\2", block, flags=re.M)
    steps = yaml.safe_load(uncommented)["jobs"]["conformance"]["steps"]
    step = next(s for s in steps if "completions-conformance@" in s.get("uses", ""))
    env = {
        "TARGET_URL": "target-url", "MODEL": "model", "SPEC": "spec", "SHARDS": "shards",
        "BASELINE": "baseline", "REQUIRE_CAPABILITIES": "require-capabilities",
        "EXTRA_ARGS": "args", "CONFORMANCE_API_KEY": "api-key",
    }  # fmt: skip
    return {name: str(step["with"][key]) for name, key in env.items() if key in step["with"]}


def test_the_readme_action_example_runs_as_written(targets: Targets, tmp_path: Path) -> None:
    """Issue 27, item 2: ``args: --header 'X-Team: my team'`` became ``ERROR: module or
    package not found: my`` and ``verdict error (exit 3)``. The README's example, with its
    placeholders filled in (the reference target, its model and key, no baseline file), passes."""
    inputs = _readme_action_inputs()
    assert "'X-Team: my team'" in inputs["EXTRA_ARGS"], inputs
    url = targets.get("aihubmix").server.url
    inputs |= {"TARGET_URL": url, "MODEL": "reference-model", "CONFORMANCE_API_KEY": API_KEY}
    inputs.pop("BASELINE")  # a file of the reader's repository
    run, outputs, summary = _gate(tmp_path, **inputs)
    assert outputs["verdict"] == "passed", run.stdout[-3000:] + run.stderr
    assert outputs["exit-code"] == "0" and run.returncode == 0
    assert summary.startswith("## Completions conformance: ✅ PASSED")
    assert (tmp_path / "conformance-report" / "report.html").is_file()
    shards = int(inputs["SHARDS"])
    assert (
        shards > 1
        and (tmp_path / "conformance-report" / f"shard-{shards}" / "results.json").is_file()
    )
    assert _verdict_step(outputs) == 0
    # The key and the header's value never appear: not in the log, the summary, nor a report.
    written = [
        p.read_text(errors="replace")
        for p in (tmp_path / "conformance-report").rglob("*")
        if p.is_file()
    ]
    for secret in (API_KEY, "my team"):
        assert all(secret not in text for text in [run.stdout, run.stderr, summary, *written])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ("--header 'X-Team: my team' --max-examples 2", ["--header", "X-Team: my team"]),
        ('--header "X-Team: my team"', ["--header", "X-Team: my team"]),
        ("--checks RESP-ID,RESP-SCHEMA  -k 'valid and not edge'", ["-k", "valid and not edge"]),
        ("--header X-Star:* $HOME", ["X-Star:*", "$HOME"]),  # nothing expanded
    ],
)
def test_args_are_split_as_a_shell_user_expects(args: str, words: list[str]) -> None:
    from conformance.front.gate import split_args

    split = split_args(args)
    assert any(split[i : i + len(words)] == words for i in range(len(split))), split


def test_args_with_an_unbalanced_quote_is_one_error_line_and_the_summary_says_so(
    tmp_path: Path,
) -> None:
    """Issue 32: the job summary was empty. It says what is wrong, and which quote, but not
    the text itself: a header's value in it may be a secret."""
    run, outputs, summary = _gate(
        tmp_path, TARGET_URL="http://127.0.0.1:9", EXTRA_ARGS="--header 'X-Team: my team"
    )
    assert outputs["verdict"] == "bad-input" and outputs["exit-code"] == "4", run.stderr
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: completions-conformance gate: args")
    assert "an unbalanced quote: the ' after --header is never closed" in errors[0]
    assert summary.startswith("## Completions conformance: ⛔ NOT RUN"), summary
    assert "an unbalanced quote: the ' after --header is never closed" in summary
    assert "my team" not in run.stderr + run.stdout + summary
    assert _verdict_step(outputs) == 4


def test_a_mistyped_option_is_named_as_one_with_the_nearest_option(tmp_path: Path) -> None:
    """Issue 32: ``--max-exampels 2`` was summarised as "a target the suite cannot reach or
    use". One ERROR line on the terminal (not one per shard), and the summary says which
    option is unknown and which one was meant."""
    run, outputs, summary = _gate(
        tmp_path, TARGET_URL="http://127.0.0.1:9", SHARDS="2", EXTRA_ARGS="--max-exampels 2"
    )
    assert outputs["verdict"] == "bad-input" and outputs["exit-code"] == "4", run.stderr
    said = (
        "'--max-exampels' is not an option of the suite or of pytest (did you mean --max-examples?"
    )
    errors = [line for line in (run.stdout + run.stderr).splitlines() if "ERROR" in line]
    assert len(errors) == 1 and said in errors[0], run.stdout + run.stderr
    assert summary.startswith("## Completions conformance: ⛔ NOT RUN"), summary
    assert said in summary and "refused its input" in summary
    assert "cannot reach" not in summary
    assert _verdict_step(outputs) == 4


@pytest.mark.parametrize("shards", ["0", "x"])
def test_bad_shards_input_is_one_error_line(tmp_path: Path, shards: str) -> None:
    run, outputs, summary = _gate(tmp_path, TARGET_URL="http://127.0.0.1:9", SHARDS=shards)
    assert outputs["exit-code"] == "4" and "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: completions-conformance gate: "), (
        errors
    )
    assert "--shards" in summary and "NOT RUN" in summary  # never an empty summary
    assert _verdict_step(outputs) == 4
