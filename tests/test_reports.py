"""The report writers: JUnit structure, HTML contents and escaping, JSON schema, baseline."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import API_KEY, MODEL, Targets, capability_table, set_meta

from conformance import reports
from conformance.front.catalogue import render_catalogue
from conformance.judging.requirements import Level, Requirement
from conformance.judging.verdict.baseline import compare_to_baseline
from conformance.judging.verdict.latency import StreamLatency
from conformance.judging.verdict.outcomes import MEANINGS
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.verdict.run_info import BaselineDiff
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers, SSEEvent
from conformance.reports.html import render_html
from conformance.reports.junit import build_junit
from conformance.reports.schema import results_schema, schema_errors
from conformance.reports.summary import by_area_and_level, scores

ROOT = Path(__file__).resolve().parent.parent
XSS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']


def _req(rid: str, level: Level, area: str) -> Requirement:
    return Requirement(
        rid, level, area, f"statement of {rid}", f"source of {rid}", lambda _: None, lambda _: True
    )


REQS = [
    _req("MUST-PASS", Level.MUST, "schema"),
    _req("MUST-FAIL", Level.MUST, "streaming"),
    _req("SHOULD-FAIL", Level.SHOULD, "semantics"),
    _req("CAP-DECLINED", Level.CAPABILITY, "semantics"),
    _req("MUST-UNTESTED", Level.MUST, "auth"),
]


def _exchange(*, stream: bool = False, body: bytes = b'{"id":"x"}', text: str = "hi") -> Exchange:
    case = Case({"model": "m", "prompt": text, "max_tokens": 4, "stream": stream}, label="gen")
    events = [SSEEvent('{"choices":[]}', at=0.012), SSEEvent("[DONE]", at=0.05)] if stream else None
    return Exchange(
        case=case,
        url="https://target.example/v1/completions",
        request_headers={"Content-Type": "application/json", "Authorization": "[REDACTED]"},
        request_body=json.dumps(case.body).encode(),
        status=200,
        headers=Headers([("content-type", "text/event-stream" if stream else "application/json")]),
        body=body,
        events=events,
        elapsed=0.05,
    )


def make_results(**meta: object) -> Results:
    """One of each status: pass, MUST fail (streamed), SHOULD fail, declined, untested."""
    results = Results.for_requirements(REQS)
    results.record(_exchange(), [Finding("MUST-PASS", "passed")])
    for _ in range(5):
        results.record(
            _exchange(stream=True),
            [Finding("MUST-PASS", "passed"), Finding("MUST-FAIL", "failed", "no [DONE] at end")],
        )
    results.record(_exchange(), [Finding("SHOULD-FAIL", "failed", "id is empty")])
    results.record(_exchange(), [Finding("CAP-DECLINED", "unsupported", "declined with 400")])
    results.capabilities = capability_table(
        {
            "echo": {"outcome": "declined", "detail": "400 with the error envelope"},
            "best_of": {"outcome": "broken", "detail": "status 500"},
        }
    )
    results.latency = [
        StreamLatency("stream", 3, ttfb_s=0.012, total_s=0.05),
        StreamLatency("late", 5, p95_gap_s=0.3, buffered=True),
    ]
    set_meta(
        results,
        **{
            "target": "https://target.example",
            "spec": "aihubmix",
            "spec_title": "AIHubMix 1.0",
            "errata": [{"id": "ERRATUM-1", "title": "Erratum title", "detail": "Erratum detail"}],
            "model": "m",
            "seed": 0,
            "wall_time": 1.5,
            "verdict": "failed",
            "observed_statuses": {"200": 7, "400": 1},
            **meta,
        },
    )
    return results


def test_all_is_sorted_and_public() -> None:
    assert reports.__all__ == sorted(reports.__all__)
    for name in reports.__all__:
        assert hasattr(reports, name), name


def test_write_all_writes_every_report(tmp_path: Path) -> None:
    written = reports.write_all(make_results(), tmp_path / "out")
    names = ["junit.xml", "report.html", "results.json", "summary.md"]
    assert sorted(p.name for p in written) == names
    assert all(p.stat().st_size > 0 for p in written)


# --- JUnit -------------------------------------------------------------------------------


def _cases(results: Results) -> dict[str, ET.Element]:
    """The testcases by requirement ID (the ``requirement`` property: a name may say more)."""
    root = ET.fromstring(ET.tostring(build_junit(results)))
    return {
        next((p.get("value", "") for p in case.iter("property") if p.get("name") == "requirement"),
             case.get("name", "")): case
        for case in root.iter("testcase")
    }  # fmt: skip


def test_junit_parses_and_has_one_testcase_per_requirement(tmp_path: Path) -> None:
    path = reports.write_junit(make_results(), tmp_path / "junit.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "MUST-PASS",
        "SHOULD-FAIL (SHOULD failed, advisory)",
        "CAP-DECLINED",
        "MUST-FAIL",
        "MUST-UNTESTED",
        "untested",  # the coverage testcase: passes when nothing was left untested
    ]  # grouped by area in requirements.AREAS order
    assert {c.get("name"): c.get("classname") for c in cases}["MUST-FAIL"] == "streaming"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "1", "1")
    assert root.get("failures") == "1"
    props = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    assert props["level"] == "MUST"
    assert props["source"] == "source of MUST-PASS"


def test_junit_must_failure_carries_statement_evidence_and_curl() -> None:
    failure = _cases(make_results())["MUST-FAIL"].find("failure")
    assert failure is not None
    assert failure.get("type") == "MUST"
    assert "failed on 5 of 5" in failure.get("message", "")
    text = failure.text or ""
    assert "statement of MUST-FAIL" in text
    assert "problem: no [DONE] at end" in text
    assert '"max_tokens": 4' in text  # the request body
    assert '+0.012s data: {"choices":[]}' in text  # the SSE transcript with timings
    assert "$CONFORMANCE_API_KEY" in text
    # Five failures with one fingerprint are one finding: one example, not five.
    assert text.count("--- example") == 1


def test_junit_should_failure_is_named_and_warned_unless_strict() -> None:
    """Issue 32: a failed SHOULD was a testcase with only <properties> and <system-out>,
    green in every JUnit view. Its name, the one field every view shows of a passing test,
    says it failed; <system-err> warns; no <failure> (a gate reading JUnit stays green)."""
    root = build_junit(make_results())
    lenient = _cases(make_results())["SHOULD-FAIL"]
    assert lenient.get("name") == "SHOULD-FAIL (SHOULD failed, advisory)"
    assert [child.tag for child in lenient] == ["properties", "system-err"]
    warning = lenient.findtext("system-err") or ""
    assert warning.startswith(
        "WARNING: SHOULD requirement failed on 1 of 1 exchange(s): id is empty "
        "(advisory: it fails the run only with --strict-should)"
    )
    assert "problem: id is empty" in warning and "$CONFORMANCE_API_KEY" in warning
    assert root.get("failures") == "1"  # MUST-FAIL's alone
    suite_props = {p.get("name"): p.get("value") for p in root.find("testsuite/properties") or ()}
    assert suite_props["advisory"] == "SHOULD-FAIL"
    strict = _cases(make_results(strict=True))["SHOULD-FAIL"]
    assert strict.get("name") == "SHOULD-FAIL"
    assert strict.find("failure") is not None and strict.find("system-err") is None


def test_junit_of_a_real_should_failure(targets: Targets, tmp_path: Path) -> None:
    """The reference target without X-Request-Id under aihubmix: REQUEST-ID-HEADER (a
    SHOULD) fails on every exchange; the run passes and its JUnit says both."""
    from conformance.front.runner import run_suite
    from conformance.run.session import Settings, Setup

    url = targets.get("aihubmix", "missing-request-id-header").server.url
    settings = Settings(model=MODEL, max_examples=2, concurrency=4)
    outcome = run_suite(Setup(target_url=url, api_key=API_KEY, settings=settings))
    assert outcome.verdict.word == "passed"
    root = ET.parse(reports.write_junit(outcome.results, tmp_path / "junit.xml")).getroot()
    case = _cases(outcome.results)["REQUEST-ID-HEADER"]
    assert case.get("name") == "REQUEST-ID-HEADER (SHOULD failed, advisory)"
    assert case.find("failure") is None and case.find("skipped") is None
    assert "has no X-Request-Id header" in (case.findtext("system-err") or "")
    assert root.get("failures") == "0"
    # A MUST that does not apply under aihubmix is skipped as not applicable, with why.
    headers = _cases(outcome.results)["RESP-HEADERS-REQUIRED"]
    assert headers.get("name") == "RESP-HEADERS-REQUIRED (not applicable)"
    skipped = headers.find("skipped")
    assert skipped is not None
    why = "not applicable: the spec requires no response header"
    assert skipped.get("message") == skipped.text == why  # Jenkins reads one, GitLab the other
    # The HTML requirements table badges it "not applicable", the reason as its tooltip.
    table = render_html(outcome.results).split("<h2>Requirements", 1)[1]
    row = table.split('<td class="mono id">RESP-HEADERS-REQUIRED</td>', 1)[1].split("</tr>", 1)[0]
    badge = '<span class="badge s-not-applicable" title="the spec requires no response header">'
    assert f"{badge}not applicable</span>" in row and "not tested" not in row


def test_junit_untested_is_skipped_and_declined_capability_is_not_a_failure() -> None:
    cases = _cases(make_results())
    assert cases["MUST-UNTESTED"].find("skipped") is not None
    assert cases["MUST-UNTESTED"].get("name") == "MUST-UNTESTED"  # not "not applicable"
    declined = cases["CAP-DECLINED"]
    assert declined.find("failure") is None and declined.find("skipped") is None
    assert "declined with 400" in (declined.findtext("system-out") or "")
    assert cases["MUST-PASS"].find("failure") is None


def test_a_must_declined_on_every_exchange_is_not_applicable_in_every_report() -> None:
    """A MUST whose feature the target declined with a proper 4xx (coverage: not
    applicable) was "unsupported" in JUnit, counted "not tested" and scored as failed."""
    results = Results.for_requirements(REQS)
    results.record(_exchange(), [Finding("MUST-PASS", "passed")])
    results.record(_exchange(), [Finding("MUST-UNTESTED", "unsupported", "declined with 400")])
    why = "the target declined the feature with a proper 4xx (1x)"
    coverage = {"untested": [], "not_applicable": [{"id": "MUST-UNTESTED", "reason": why}]}
    set_meta(results, verdict="passed", coverage=coverage)
    case = _cases(results)["MUST-UNTESTED"]
    assert case.get("name") == "MUST-UNTESTED (not applicable)"
    assert case.findtext("skipped") == f"not applicable: {why}"
    assert case.find("system-out") is None
    page = render_html(results)
    assert f'title="{why}">not applicable</span>' in page
    assert scores(results)["MUST"].text() == "100% (1/1)"  # not tested, so no score
    assert by_area_and_level(results)["total"]["MUST"].not_applicable == 1


def test_junit_survives_characters_xml_cannot_carry(tmp_path: Path) -> None:
    results = Results.for_requirements(REQS)
    results.record(
        _exchange(body=b"\x00\x1b[31mboom\x07 <&>"),
        [Finding("MUST-FAIL", "failed", "bad \x0c byte")],
    )
    path = reports.write_junit(results, tmp_path / "junit.xml")
    failure = ET.parse(path).getroot().find(".//failure")
    assert failure is not None
    text = failure.text or ""
    assert "\\x00\\x1b[31mboom\\x07 <&>" in text
    assert "bad \\x0c byte" in text


# --- HTML --------------------------------------------------------------------------------


def test_html_shows_run_summary_failures_and_tables() -> None:
    page = render_html(make_results())
    for expected in [
        "https://target.example",
        "aihubmix",
        "AIHubMix 1.0",
        "ERRATUM-1",
        "Erratum title",
        "Erratum detail",
        'class="word">failed<',
        "Summary by area and level",
        "statement of MUST-FAIL",
        "no [DONE] at end",
        "+0.012s data: {&#34;choices&#34;:[]}",
        "$CONFORMANCE_API_KEY",
        "content-type: text/event-stream",
        "best_of",
        "Streaming latency",
        "<th>p95_gap_s</th>",  # every figure is a column, measured or not
        '<td class="num">0.012</td>',
        "<td>no</td>",
        "<td>yes</td>",
        "<td>—</td>",
        "200 ×7, 400 ×1",
    ]:
        assert expected in page, expected
    for area in ("transport", "schema", "semantics", "streaming", "errors", "auth", "sdk"):
        assert f"<td>{area}</td>" in page
    # Requests, tokens, retries and wall time.
    assert re.search(r"Requests</div><div class=\"v\">8<", page)
    assert "1.5 s" in page


def test_html_is_self_contained() -> None:
    page = render_html(make_results())
    assert not re.search(
        r"<(script|link|img|iframe)\b", page.replace('<link rel="icon" href="data:,">', "")
    )
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<style>" in page


def test_html_without_latency_has_no_latency_table() -> None:
    results = make_results()
    results.latency = []
    assert "Streaming latency" not in render_html(results)


def test_html_escapes_everything_the_target_supplies() -> None:
    bad = " ".join(XSS)
    results = Results.for_requirements(REQS)
    case = Case({"model": bad, "prompt": bad, "stream": True}, label=bad, breaks=bad)
    exchange = Exchange(
        case=case,
        url="https://target.example/" + bad,
        request_headers={bad: bad},
        request_body=bad.encode(),
        status=200,
        headers=Headers([(bad, bad)]),
        body=bad.encode(),
        events=[SSEEvent(bad, at=0.1)],
        stream_error=bad,
        transport_error=bad,
    )
    plain = Exchange(
        case=case,
        url="https://target.example/",
        request_headers={},
        request_body=bad.encode(),
        status=400,
        headers=Headers([(bad, bad)]),
        body=json.dumps({"error": {"message": bad}}).encode(),  # pretty-printed, then escaped
    )
    results.record(exchange, [Finding("MUST-FAIL", "failed", bad)])
    results.record(plain, [Finding("SHOULD-FAIL", "failed", bad)])
    results.capabilities = capability_table({bad: {"outcome": "ignored", "detail": bad}})
    results.latency = [StreamLatency(bad, 1)]
    set_meta(
        results,
        target=bad,
        spec=bad,
        spec_title=bad,
        model=bad,
        seed=bad,
        verdict="failed",
        errata=[{"id": bad, "title": bad, "detail": bad}],
        baseline={"known": [bad], "new": [bad], "fixed": [bad]},
    )
    page = render_html(results)
    assert "<script" not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&#34;message&#34;: &#34;&lt;script&gt;" in page  # the JSON body excerpt
    assert "+0.100s data: &lt;script&gt;" in page  # the transcript


def test_html_shows_the_baseline_diff() -> None:
    diff = BaselineDiff(known=("A",), new=("B-NEW",), fixed=("C-FIXED",))
    page = render_html(make_results(baseline=diff.to_json()))
    assert "Compared with the baseline" in page
    assert "B-NEW" in page and "C-FIXED" in page


# --- JSON --------------------------------------------------------------------------------


def test_results_json_validates_against_the_schema(tmp_path: Path) -> None:
    path = reports.write_json(make_results(strict=False), tmp_path / "results.json")
    data = json.loads(path.read_text())
    assert schema_errors(data) == []
    assert Results.from_json(data).to_json() == data


def test_the_schema_rejects_what_is_not_results() -> None:
    data = make_results().to_json()
    data["requirements"][0]["level"] = "MAY"
    del data["spent"]["tokens"]
    errors = schema_errors(data)
    assert any("MAY" in e for e in errors) and any("tokens" in e for e in errors)
    assert schema_errors({**make_results().to_json(), "schema_version": 1})
    assert results_schema()["properties"]["schema_version"] == {"const": 2}


def test_the_documented_example_validates() -> None:
    doc = (ROOT / "docs" / "results-schema.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", doc, re.S)
    assert blocks, "docs/results-schema.md has no ```json example"
    assert schema_errors(json.loads(blocks[0])) == []


# --- baseline ----------------------------------------------------------------------------


def _tallied(**outcomes: str) -> Results:
    results = Results.for_requirements([_req(rid, Level.MUST, "schema") for rid in "ABCDE"])
    for rid, outcome in outcomes.items():
        results.record(_exchange(), [Finding(rid, outcome, "why")])
    return results


def test_baseline_known_new_fixed() -> None:
    baseline = _tallied(A="failed", B="failed", C="passed", E="failed")
    current = _tallied(A="failed", B="passed", C="failed", D="passed")
    diff = compare_to_baseline(current, baseline)
    assert diff == BaselineDiff(
        known=("A|non-stream||why",),
        new=("C|non-stream||why",),
        fixed=("B|non-stream||why",),
        unverified=("E|non-stream||why",),
        new_failures=("C",),
    )
    assert diff.to_json()["new_failures"] == ["C"]


def test_baseline_of_a_clean_run_against_itself_is_empty() -> None:
    run = _tallied(A="passed")
    assert compare_to_baseline(run, run) == BaselineDiff()


# --- catalogue ---------------------------------------------------------------------------


def test_requirement_catalogue_is_up_to_date() -> None:
    path = ROOT / "docs" / "requirements.md"
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    assert current == render_catalogue(), (
        "docs/requirements.md is out of date with the requirement registry: "
        "run `python -m conformance.front.catalogue --write` from the repository root"
    )


def test_catalogue_lists_every_registered_requirement() -> None:
    from conformance.judging.document.contract import Contract
    from conformance.judging.document.spec import load_spec
    from conformance.judging.requirements import REGISTRY

    text = render_catalogue()
    aihubmix, nscale = load_spec("aihubmix"), load_spec("nscale")
    alone = load_spec("nscale", contract=Contract.DOCUMENT)
    for rid, req in REGISTRY.items():
        cells = [
            f"{r.level.value} ({r.evidence})" for r in (req.under(aihubmix), req.under(nscale))
        ]
        if req.under(alone).level != req.under(nscale).level:
            cells[1] += f"; document contract: {req.under(alone).level.value}"
        assert f"| `{rid}` | {' | '.join(cells)} |" in text
    # Both contracts side by side: Nscale declares `total_tokens` under OpenAI's name, so
    # OpenAI's meaning binds (MUST); by the document alone, which says nothing, a SHOULD.
    assert (
        "| `USAGE-TOTAL` | MUST (spec-text) | MUST (openai-contract); document contract: SHOULD |"
        in text
    )


@pytest.mark.parametrize("text", ["a|b", "two\nlines"])
def test_catalogue_cells_keep_the_table_intact(text: str) -> None:
    from conformance.reports.requirement_table import _cell

    assert "\n" not in _cell(text)
    assert "|" not in _cell(text).replace("\\|", "")


@pytest.mark.parametrize(
    ("verdict", "css"),
    [
        ("error", "error"),
        ("no-verdict", "unknown"),
        ("incomplete", "incomplete"),
    ],
)
def test_other_verdicts_are_explained_and_valid(verdict: str, css: str) -> None:
    results = make_results(verdict=verdict)
    results.tallies["MUST-FAIL"].failed = 0
    page = render_html(results)
    assert f'class="verdict {css}">\n  <div class="word">{verdict}<' in page
    assert MEANINGS[verdict] in page
    assert schema_errors(results.to_json()) == []


@pytest.mark.parametrize(
    ("text", "pretty"),
    [
        ('{"a": 1, "b": [2]}', True),
        ('{"a":1,"b":"\\u00e9"}', True),
        ('{"a": 1, "a": 2}', False),  # duplicate keys are evidence: shown verbatim
        ('{"a": 1.0e2}', False),  # number spelling is evidence too
        ('{"a":  1}', False),
        ('{"a": 1', False),  # a cut-off excerpt
        ("data: [DONE]", False),
    ],
)
def test_bodies_are_indented_only_when_nothing_is_lost(text: str, pretty: bool) -> None:
    from conformance.reports.summary import pretty_body

    assert (pretty_body(text) != text) == pretty


def test_catalogue_command_writes_and_checks(tmp_path: Path) -> None:
    from conformance.front.catalogue import main

    path = tmp_path / "requirements.md"
    assert main(["--check", "--path", str(path)]) == 1  # missing counts as out of date
    assert main(["--write", "--path", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == render_catalogue()
    assert main(["--check", "--path", str(path)]) == 0


def test_demo_command_writes_every_report(tmp_path: Path) -> None:
    from conformance.front.demo import main

    assert main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "junit.xml",
        "report.html",
        "results.json",
        "summary.md",
    ]
    assert schema_errors(json.loads((tmp_path / "results.json").read_text())) == []
