"""``conformance-compare``: the matrix, capabilities, scores, escaping and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.front.compare import main
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.verdict.results import Results
from conformance.reports.markdown import cell
from conformance.reports.matrix import (
    DESELECTED,
    FAIL,
    MISSING,
    NOT_APPLIES,
    PASS,
    UNTESTED,
    compare,
    differences,
)


def _tally(
    rid: str, level: str, area: str, checked: int, failed: int = 0, unsupported: int = 0
) -> dict[str, Any]:
    return {
        "id": rid,
        "level": level,
        "area": area,
        "statement": f"statement of {rid}",
        "source": "spec",
        "checked": checked,
        "failed": failed,
        "evidence": "spec-schema",
        "unsupported": unsupported,
        "errored": 0,
        "fingerprints": [f"{rid}|gen|"] if failed else [],
        "fingerprints_dropped": 0,
        "examples": [],
    }


def _run(target: str, *, failing: bool, **meta: Any) -> dict[str, Any]:
    """A results document: the failing target breaks a MUST and lacks a capability."""
    requirements = [
        _tally("RESP-SCHEMA", "MUST", "schema", 10),
        _tally("STREAM-DONE-LAST", "MUST", "streaming", 4, failed=3 if failing else 0),
        _tally("RESP-ID", "SHOULD", "semantics", 5),
        _tally("CAP-ECHO", "CAPABILITY", "semantics", 2, unsupported=2 if failing else 0),
    ]
    if not failing:
        requirements.append(_tally("AUTH-401", "MUST", "auth", 1))
    return {
        "schema_version": 2,
        "meta": {
            "target": target,
            "spec": "aihubmix",
            "model": "m",
            "verdict": "failed" if failing else "passed",
            **meta,
        },
        "spent": {"requests": 20, "tokens": 100, "retries": 0},
        "requirements": requirements,
        "capabilities": {"echo": {"outcome": "declined", "detail": "400 with the error envelope"}}
        if failing
        else {"echo": {"outcome": "offered", "detail": "200"}},
        "latency": [],
    }


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    paths = []
    for name, failing in (("good", False), ("bad", True)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_run(f"https://{name}.example", failing=failing)))
        paths.append(path)
    return paths


def test_matrix_cells() -> None:
    runs = [(n, Results.from_json(_run(n, failing=f))) for n, f in (("good", False), ("bad", True))]
    rows = {row.id: [c.outcome for c in row.cells] for row in compare(runs).rows}
    assert rows["RESP-SCHEMA"] == [PASS, PASS]
    assert rows["STREAM-DONE-LAST"] == [PASS, FAIL]
    assert rows["CAP-ECHO"] == [PASS, MISSING]
    assert rows["AUTH-401"] == [PASS, UNTESTED]  # absent from the second run


def test_a_stated_reason_is_its_own_cell() -> None:
    """Issue 32: a not-applicable MUST showed as "➖ not tested"."""
    coverage = {
        "untested": [],
        "not_applicable": [{"id": "AUTH-401", "reason": "the spec declares no auth"}],
        "deselected": ["RESP-SCHEMA"],
    }
    bad = Results.from_json(_run("bad", failing=True, coverage=coverage))
    del bad.tallies["RESP-SCHEMA"]  # a deselected requirement has no tally
    runs = [("good", Results.from_json(_run("good", failing=False))), ("bad", bad)]
    rows = {row.id: row.cells for row in compare(runs).rows}
    assert [c.outcome for c in rows["AUTH-401"]] == [PASS, NOT_APPLIES]
    assert rows["AUTH-401"][1].reason == "the spec declares no auth"
    assert [c.outcome for c in rows["RESP-SCHEMA"]] == [PASS, DESELECTED]


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two real runs of the embedded reference target: aihubmix (where
    RESP-HEADERS-REQUIRED does not apply) and nscale with --max-tokens 4."""
    from conformance.front.runner import run_suite
    from conformance.run.session import Settings, Setup

    folder = tmp_path_factory.mktemp("runs")
    paths = []
    for spec, max_tokens in (("aihubmix", 8), ("nscale", 4)):
        settings = Settings(max_examples=2, max_tokens=max_tokens, concurrency=4)
        outcome = run_suite(Setup(spec=spec, settings=settings))
        paths.append(folder / f"{spec}.json")
        paths[-1].write_text(outcome.results.dumps(), encoding="utf-8")
    return paths


def test_not_applicable_is_never_not_tested(real_runs: list[Path], tmp_path: Path) -> None:
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    assert main([*map(str, real_runs), "--names", "a,n", "--md", str(md), "--html", str(html)]) == 0
    text = md.read_text()
    assert "| `RESP-HEADERS-REQUIRED` | MUST | schema | ○ not applicable | ✅ pass |" in text
    assert "| `FINISH-ENUM` | MUST | semantics | ✅ pass | ○ not applicable |" in text
    assert "| `RESP-HEADERS-REQUIRED` | a | the spec requires no response header |" in text
    assert "| Not applicable | 1: RESP-HEADERS-REQUIRED | 3: " in text
    badge = '<span class="badge s-not-applicable" title="the spec requires no response header">'
    assert f"{badge}not applicable</span>" in html.read_text()


def test_runs_that_differ_say_so_in_every_format(
    real_runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32: runs under different specs stood side by side without a word; --html and
    --md said nothing of what they wrote."""
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    assert main([*map(str, real_runs), "--names", "a,n", "--md", str(md), "--html", str(html)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"report: {html.resolve()}", f"report: {md.resolve()}"]
    warning = "conformance-compare: warning: the runs differ in spec, --max-tokens: "
    assert err == warning + "not directly comparable\n"
    text = md.read_text()
    assert "> ⚠️ **Not directly comparable.** These runs differ in what was sent or judged" in text
    assert "| --max-tokens | 8 | 4 |" in text
    spec_row = next(line for line in text.splitlines() if line.startswith("| spec |"))
    assert "aihubmix (sha256 " in spec_row and "nscale (sha256 " in spec_row
    page = html.read_text()
    assert "Not directly comparable" in page and "<td>--max-tokens</td>" in page
    # The terminal: the Markdown on stdout, the caveat in it and on stderr.
    assert main([*map(str, real_runs)]) == 0
    out, err = capsys.readouterr()
    assert "**Not directly comparable.**" in out and err.startswith(warning)


def test_runs_alike_say_nothing_and_both_formats_share_the_caveat(
    two_runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    assert main([*map(str, two_runs), "--md", str(md), "--html", str(html)]) == 0
    assert capsys.readouterr().err == ""
    caveat = "runs that tested (or probed) different requirements (or features) are not directly"
    for page in (md.read_text(), html.read_text()):
        assert "Not directly comparable" not in page
        assert caveat in " ".join(page.split()), page[:300]


def test_only_recorded_settings_are_compared() -> None:
    old, new = (Results.from_json(_run("t", failing=False, **m)) for m in ({}, {"max_tokens": 8}))
    assert differences([old, new]) == ()  # an older results.json did not record it
    lenient, strict = (
        Results.from_json(_run("t", failing=False, strict=s, contract=c))
        for s, c in ((False, "openai-compatible"), (True, "document"))
    )
    found = {d.setting: d.values for d in differences([lenient, strict, old])}
    assert found == {
        "contract (--contract)": ("openai-compatible", "document", "not recorded"),
        "--strict-should": ("no", "yes", "not recorded"),
    }


def test_markdown_matrix_capabilities_and_scores(two_runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.md"
    assert main([*map(str, two_runs), "--md", str(out), "--names", "Good,Bad"]) == 0
    md = out.read_text()
    assert "| Requirement | Level | Area | Good | Bad |" in md
    assert "| `STREAM-DONE-LAST` | MUST | streaming | ✅ pass | ❌ fail 3/4 |" in md
    assert "| `CAP-ECHO` | CAPABILITY | semantics | ✅ pass | ⊘ unsupported |" in md
    assert "| `AUTH-401` | MUST | auth | ✅ pass | ➖ not tested |" in md
    assert "| echo | ✅ offered | ⊘ declined (400 with the error envelope) |" in md
    assert "| MUST passed | 100% (3/3) | 50% (1/2) |" in md
    assert "| SHOULD passed | 100% (1/1) | 100% (1/1) |" in md
    assert "| Verdict | ✅ passed | ❌ failed |" in md


def _with_capabilities(target: str, outcomes: dict[str, str]) -> dict[str, Any]:
    run = _run(target, failing=False)  # its one CAPABILITY requirement held
    run["capabilities"] = {f: {"outcome": o, "detail": "x"} for f, o in outcomes.items()}
    return run


def test_the_capability_figure_is_the_capability_tables(tmp_path: Path) -> None:
    """Issue 27, item 3: "Capabilities 100% (1/1)" counted the one CAPABILITY requirement,
    beside a broken include_usage; a target declining half the features showed 0% (0/1)."""
    broken = {"echo": "offered", "n": "offered", "seed": "offered", "logprobs": "offered",
              "include_usage": "broken"}  # fmt: skip
    declining = {f"f{i}": ("declined" if i % 2 else "offered") for i in range(8)}
    declining["suffix"] = "ignored"
    paths = []
    for name, outcomes in (("broken", broken), ("declining", declining)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_with_capabilities(name, outcomes)))
        paths.append(str(path))
    md_out, html_out = tmp_path / "cmp.md", tmp_path / "cmp.html"
    assert main([*paths, "--md", str(md_out), "--html", str(html_out)]) == 0
    md = md_out.read_text()
    assert (
        "| Capabilities offered | 80% (4/5; 1 broken) | 44% (4/9; 4 declined, 1 ignored) |" in md
    ), md
    assert "Capabilities offered: the share of the features of the capability table" in md
    page = html_out.read_text()
    row = page.split("<tr><td>Capabilities offered</td>", 1)[1].split("</tr>", 1)[0]
    assert "80%" in row and "(4/5; 1 broken)" in row and "100%" not in row, row
    # The single run's HTML headline and summary.md say the same.
    from conformance.reports.html import render_html
    from conformance.reports.run_summary import summary_markdown

    one = Results.from_json(_with_capabilities("broken", broken))
    figure = render_html(one).split('Capabilities offered</div><div class="v">', 1)[1]
    figure = figure.split("</div>", 1)[0]  # the headline's figure
    assert "80%" in figure and "(4/5; 1 broken)" in figure, figure
    assert "Capabilities offered: 80% (4/5; 1 broken)" in summary_markdown(one)


def test_html_matrix_capabilities_and_scores(two_runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.html"
    assert main([*map(str, two_runs), "--html", str(out)]) == 0
    page = out.read_text()
    assert "https://good.example" in page and "https://bad.example" in page
    assert "STREAM-DONE-LAST" in page
    assert '>fail</span> <span class="muted">3/4</span>' in page
    assert ">unsupported</span>" in page and ">not tested</span>" in page
    assert "100%" in page and "50%" in page
    assert 'c-offered">offered</span>' in page and 'c-declined">declined</span>' in page
    assert "<script" not in page


def test_without_outputs_prints_markdown(
    two_runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(p) for p in two_runs]) == 0
    assert "# Completions conformance comparison" in capsys.readouterr().out


def test_names_default_to_files_when_targets_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_run("same", failing=False)))
        paths.append(str(path))
    assert main(paths) == 0
    assert "| same (a.json) | same (b.json) |" in capsys.readouterr().out


def test_target_text_is_escaped_in_markdown_and_html(tmp_path: Path) -> None:
    bad = 'evil|name\n<script>alert(1)</script> "><img src=x onerror=alert(1)>'
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(_run(bad, failing=True, spec=bad, model=bad)))
    md, html = tmp_path / "o.md", tmp_path / "o.html"
    assert main([str(path), "--md", str(md), "--html", str(html)]) == 0
    text = md.read_text()
    assert "evil\\|name<br>&lt;script&gt;" in text
    assert "<script" not in text and "<img" not in text
    for line in text.splitlines():
        if line.startswith("| Verdict"):
            assert line.count(" | ") == 1  # two cells: the table is intact
    page = html.read_text()
    assert "<script" not in page and "<img" not in page


def test_baseline_diff_is_shown(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    baseline = {"known": ["RESP-ID"], "new": ["STREAM-DONE-LAST"], "fixed": ["AUTH-401"]}
    path.write_text(json.dumps(_run("t", failing=True, baseline=baseline)))
    md, html = tmp_path / "o.md", tmp_path / "o.html"
    assert main([str(path), "--md", str(md), "--html", str(html)]) == 0
    assert "| STREAM-DONE-LAST | RESP-ID | AUTH-401 |" in md.read_text()
    assert "Baseline diff" in html.read_text()


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON object is expected"),
        ('{"schema_version": 1}', "schema_version 1, this tool reads 2"),
        ('{"schema_version": 2, "meta": {}}', "not a conformance results file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, error: str
) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    assert main([str(path)]) == BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("conformance-compare: error: ") and error in lines[0]
    assert "Traceback" not in captured.err


def test_names_must_match_the_files(
    two_runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*map(str, two_runs), "--names", "only-one"]) == BAD_INPUT
    assert "--names gives 1 name(s) for 2 file(s)" in capsys.readouterr().err


def test_unwritable_output_is_bad_input(
    two_runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(two_runs[0]), "--md", str(tmp_path / "missing-dir" / "o.md")]) == BAD_INPUT
    assert "cannot write it" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a|b", "a\\|b"), ("x\ny", "x<br>y"), ("<b>&", "&lt;b&gt;&amp;"), ("", " ")],
)
def test_markdown_cell_escaping(text: str, expected: str) -> None:
    assert cell(text) == expected


def test_runs_against_any_document_compare_and_name_it(tmp_path: Path) -> None:
    """Vendors judged against OpenAI's own contract (``--spec openai``) or a document by
    URL: the matrix is the same, and the Spec row names each document with its digest."""
    digest = "db5d7478feae10b4d331834c60d9765a8aa042e38419f9b1694288c11aa8ebc8"
    paths = []
    for name, failing in (("vendor-a", False), ("vendor-b", True)):
        path = tmp_path / f"{name}.json"
        run = _run(f"https://{name}.example", failing=failing, spec="openai", spec_sha256=digest)
        path.write_text(json.dumps(run))
        paths.append(path)
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    assert main([*map(str, paths), "--md", str(md), "--html", str(html)]) == 0
    spec_row = next(line for line in md.read_text().splitlines() if line.startswith("| Spec"))
    assert spec_row.count("openai (sha256 db5d7478feae)") == 2
    assert "sha256 db5d7478feae" in html.read_text()
