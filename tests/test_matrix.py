"""The conformance matrix of real servers (tools/real_targets/matrix.py) and its workflow.

The results are made here, fast and offline: the suite run against the embedded reference
target with a fault (error bodies that are bare strings: ERROR-ENVELOPE fails) and with a
capability switch (``suffix`` declined: VALID-ACCEPTED declined, the suffix requirements not
applicable), each laid out as run.py lays out a run folder.
"""

from __future__ import annotations

import configparser
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.front.runner import run_suite
from conformance.reference.server import ReferenceServer
from conformance.run.session import Settings, Setup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "real_targets"))

import matrix  # noqa: E402
from targets import TARGETS  # noqa: E402

KEY = "sk-matrix-test"
EVIL = '<script>alert(1)</script> | "><img src=x onerror=alert(1)>'
#: (run folder, reference flavor, spec, fault): two servers of the tier, two specs.
RUNS = (
    ("vllm-aihubmix", "aihubmix", "aihubmix", "errors-string"),
    ("litellm-mock-openai", "aihubmix", "openai", "decline-suffix"),
)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    for folder, flavor, spec, fault in RUNS:
        with ReferenceServer(flavor, api_key=KEY, faults=frozenset({fault})) as server:
            settings = Settings(model="reference-model", max_examples=2, concurrency=4)
            setup = Setup(settings, spec=spec, target_url=server.url, api_key=KEY)
            outcome = run_suite(setup)
        run = root / folder
        run.mkdir()
        (run / "results.json").write_text(outcome.results.dumps(), encoding="utf-8")
    # One run says how it was made as run.py now does; the other predates provenance.json.
    provenance = {
        "target": "vllm",
        "spec": "aihubmix",
        "server_version": "reference target with errors-string",
        "server_command": "python -m conformance.reference --fault errors-string",
        "command": "python -m pytest conformance --spec aihubmix",
        "date": "2026-12-03T18:00:00Z",
        "suite_commit": "0123456789ab",
    }
    (root / "vllm-aihubmix" / matrix.PROVENANCE).write_text(json.dumps(provenance))
    return root


@pytest.fixture(scope="module")
def built(results_dir: Path) -> matrix.Matrix:
    return matrix.build(matrix.load_runs([results_dir]), "not run in this test")


def _raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _requirement(path: Path, rid: str) -> dict[str, Any]:
    return next(r for r in _raw(path)["requirements"] if r["id"] == rid)


def test_every_cell_traces_to_its_columns_results_json(built: matrix.Matrix) -> None:
    assert [(r.target, r.spec) for r in built.runs] == [
        ("litellm-mock", "openai"),
        ("vllm", "aihubmix"),
    ]  # the tier's order (targets.TARGETS)
    kinds = set()
    for row in built.rows:
        for run, cell in zip(built.runs, row.cells, strict=True):
            kinds.add(cell.kind)
            assert cell.results == matrix.shown_path(run.results_path)
            ids = {r["id"] for r in _raw(run.results_path)["requirements"]}
            if cell.kind in (matrix.PASSED, matrix.FAILED, matrix.DECLINED):
                req = _requirement(run.results_path, row.id)
                assert (cell.checked, cell.failed) == (req["checked"], req["failed"])
                assert (cell.kind == matrix.FAILED) == (req["failed"] > 0)
                assert (cell.kind == matrix.DECLINED) == (req["unsupported"] > 0 == req["failed"])
            else:
                assert cell.kind != matrix.SUITE_ERROR
                assert row.id not in ids or _requirement(run.results_path, row.id)["failed"] == 0
    assert {matrix.PASSED, matrix.FAILED, matrix.DECLINED, matrix.NOT_APPLICABLE} <= kinds
    assert matrix.UNTESTED in kinds
    # Each column names its file, in both formats.
    text, page = matrix.markdown(built), matrix.html(built)
    for run in built.runs:
        assert matrix.shown_path(run.results_path) in text
        assert matrix.shown_path(run.results_path) in page


def test_a_failed_cell_carries_the_curl_results_json_kept(built: matrix.Matrix) -> None:
    failed = [
        (run, row, cell)
        for row in built.rows
        for run, cell in zip(built.runs, row.cells, strict=True)
        if cell.kind == matrix.FAILED
    ]
    assert any(row.id == "ERROR-ENVELOPE" for _, row, _ in failed)
    text, page = matrix.markdown(built), matrix.html(built)
    for run, row, cell in failed:
        first = next(
            e
            for e in _requirement(run.results_path, row.id)["examples"]
            if e["outcome"] == "failed"
        )
        assert cell.curl == first["curl"] and cell.curl.startswith("curl ")
        assert built.notes[cell.note] == cell.curl
        assert f"failed {cell.failed}/{cell.checked} [{cell.note}]" in text
        assert cell.curl in text  # the reproducer, in its fenced block
        assert f'href="#{cell.note.lower()}"' in page and f'id="{cell.note.lower()}"' in page


def test_declined_not_applicable_and_untested_carry_their_reasons(built: matrix.Matrix) -> None:
    text = matrix.markdown(built)
    reasons = {}
    for row in built.rows:
        for run, cell in zip(built.runs, row.cells, strict=True):
            if cell.kind in (matrix.DECLINED, matrix.NOT_APPLICABLE, matrix.UNTESTED):
                assert cell.reason and built.notes[cell.note] == cell.reason
                assert f"{cell.kind} [{cell.note}]" in text
                assert f"**{cell.note}**: {matrix.md_text(cell.reason)}" in text
                reasons[cell.kind, run.target, row.id] = cell.reason
    declined = reasons[matrix.DECLINED, "litellm-mock", "VALID-ACCEPTED"]
    assert "declined with a proper 4xx" in declined and "suffix" in declined
    recorded = _raw(built.runs[0].results_path)["meta"]["coverage"]["not_applicable"]
    for entry in recorded:
        if (matrix.NOT_APPLICABLE, "litellm-mock", entry["id"]) in reasons:
            assert reasons[matrix.NOT_APPLICABLE, "litellm-mock", entry["id"]] == entry["reason"]
    assert any("suffix" in r for (k, _, _), r in reasons.items() if k == matrix.NOT_APPLICABLE)


def test_runs_name_version_command_date_spec_commit_and_coverage(built: matrix.Matrix) -> None:
    text = matrix.markdown(built)
    assert text.startswith("# Conformance matrix of real servers")
    assert "regenerated, never edited by hand" in text.splitlines()[2]
    facts = dict(matrix.facts(built.runs[1], built.verdicts[1]))
    assert facts["server version"] == "reference target with errors-string"
    assert facts["start command"].startswith("python -m conformance.reference")
    assert facts["date"] == "2026-12-03T18:00:00Z"
    assert facts["suite"].endswith("commit 0123456789ab")
    assert facts["spec"].startswith("aihubmix")
    older = dict(matrix.facts(built.runs[0], built.verdicts[0]))
    assert older["server version"] == matrix.NOT_RECORDED  # no provenance.json, no transcripts
    assert "## Capability tables" in text and "| suffix |" in text
    assert "declined" in text.split("| suffix |")[1].splitlines()[0]
    missing = {t.name for t in TARGETS} - {"vllm", "litellm-mock"}
    assert {s for s, _ in built.not_covered} == missing
    assert all(why == "not run in this test" for _, why in built.not_covered)
    assert "vllm: no run under nscale, openai" in text


def test_target_text_is_escaped_in_html_and_inert_in_markdown(
    results_dir: Path, tmp_path: Path
) -> None:
    evil = tmp_path / "evil"
    for folder, *_ in RUNS:
        (evil / folder).mkdir(parents=True)
        data = _raw(results_dir / folder / "results.json")
        data["capabilities"]["suffix"]["detail"] = EVIL
        for req in data["requirements"]:
            for example in req["examples"]:
                example["message"] = EVIL
                example["curl"] += " # " + EVIL
        for entry in data["meta"]["coverage"]["not_applicable"]:
            entry["reason"] = EVIL
        (evil / folder / "results.json").write_text(json.dumps(data))
    (evil / "vllm-aihubmix" / matrix.PROVENANCE).write_text(
        json.dumps({"server_version": EVIL, "server_command": EVIL})
    )
    assert matrix.main([str(evil), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "matrix.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    text = (tmp_path / "out" / "matrix.md").read_text(encoding="utf-8")
    outside_fences = text.split("```")[::2]
    assert all("<script" not in part and "<img" not in part for part in outside_fences)
    header = next(line for line in text.splitlines() if line.startswith("| requirement |"))
    for line in text.splitlines():
        if line.startswith("| ") and " | MUST | " in line:
            assert line.count(" | ") == header.count(" | ")  # no cell broke the table


def test_the_same_results_give_the_same_files(results_dir: Path, tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert matrix.main([str(results_dir), "--out", str(tmp_path / out)]) == 0
    for name in ("matrix.md", "matrix.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_run_given_twice_is_refused(
    results_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert matrix.main([str(results_dir), str(results_dir / "vllm-aihubmix"), "--out", "x"]) == 4
    assert "vllm under aihubmix twice" in capsys.readouterr().err


# -- the workflow and the local command --------------------------------------------------------

WORKFLOW = ROOT / ".github" / "workflows" / "real-targets.yml"


def test_the_workflow_runs_the_tier_per_server_and_merges_with_matrix_py() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    jobs = flow["jobs"]
    tier = next(j for j in jobs.values() if "strategy" in j)
    assert tier["strategy"]["matrix"]["target"] == [t.name for t in TARGETS]
    assert tier["strategy"]["fail-fast"] is False
    tier_runs = "\n".join(s.get("run", "") for s in tier["steps"])
    assert "tools/real_targets/run.py" in tier_runs and '--targets "$TARGET"' in tier_runs
    assert any("upload-artifact" in s.get("uses", "") for s in tier["steps"])
    (merge,) = [j for j in jobs.values() if j.get("needs")]
    assert merge["if"] == "always()"
    merge_runs = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "python tools/real_targets/matrix.py" in merge_runs
    assert "conformance.front.compare" in merge_runs
    assert '>> "$GITHUB_STEP_SUMMARY"' in merge_runs
    assert any("download-artifact" in s.get("uses", "") for s in merge["steps"])
    published = [s for s in merge["steps"] if "upload-artifact" in s.get("uses", "")]
    assert published and "docs/matrix.md" in published[0]["with"]["path"]
    for job in jobs.values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step  # values reach scripts by env only


def test_tox_matrix_runs_the_tier_and_writes_the_matrix() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    assert "python tools/real_targets/run.py --matrix" in tox["testenv:matrix"]["commands"]
    assert "testenv:real-targets" in tox
