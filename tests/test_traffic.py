"""``completions-conformance judge FILE...``: recorded traffic judged offline.

HAR as devtools and mitmproxy write it, JSONL exchanges and the suite's transcripts, built
by hand from conformant answers (tests/synthetic.py) with one defect where a test needs
one. What traffic cannot show is named, never passed; an invalid request is judged as
one; a bad entry is one error line naming the file and the entry, and never loses the
entries judged before or after it; no key reaches any output.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from synthetic import chunks_for, completion_for, req

from conformance.front.traffic_cli import main
from conformance.judging.traffic_judge import NOT_OBSERVABLE, UNOBSERVABLE
from tools.real_targets import transcript

ROOT = Path(__file__).resolve().parents[1]
URL = "https://api.example.test/v1/completions"
KEY = "sk-live-abcdef0123456789"


def sse(payloads: list[Any]) -> str:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads) + "data: [DONE]\n\n"


def har_entry(
    body: dict[str, Any],
    status: int,
    text: str,
    *,
    content_type: str = "application/json",
    headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    request_headers: list[tuple[str, str]] | None = None,
    base64_body: bool = False,
    url: str = URL,
) -> dict[str, Any]:
    sent = request_headers if request_headers is not None else [("Authorization", f"Bearer {KEY}")]
    content: dict[str, Any] = {"size": len(text), "mimeType": content_type, "text": text}
    if base64_body:
        content |= {"text": base64.b64encode(text.encode()).decode(), "encoding": "base64"}
    return {
        "startedDateTime": "2025-01-01T00:00:00.000Z",
        "time": 12.5,
        "request": {
            "method": "POST",
            "url": url,
            "headers": [
                {"name": k, "value": v} for k, v in [("Content-Type", "application/json"), *sent]
            ],
            "postData": {"mimeType": "application/json", "text": json.dumps(body)},
        },
        "response": {
            "status": status,
            "headers": [
                {"name": k, "value": v}
                for k, v in [("Content-Type", content_type), ("X-Request-Id", "req_1"), *headers]
            ],
            "content": content,
        },
        "timings": {"send": 0.1, "wait": 10.0, "receive": 2.4},
    }


def completion_entry(**kw: Any) -> dict[str, Any]:
    case = req(**kw)
    return har_entry(case.body, 200, json.dumps(completion_for(case)))


def stream_entry(**kw: Any) -> dict[str, Any]:
    case = req(stream=True, **kw)
    return har_entry(case.body, 200, sse(chunks_for(case)), content_type="text/event-stream")


def write_har(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}), encoding="utf-8")
    return path


def judge(
    tmp_path: Path, *files: Path, spec: str = "aihubmix"
) -> tuple[int, str, str, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    reports = tmp_path / "reports"
    code = main([*map(str, files), "--spec", spec, "--report-dir", str(reports)], out=out, err=err)
    verdict = json.loads((reports / "verdict.json").read_text()) if reports.exists() else {}
    return code, out.getvalue(), err.getvalue(), verdict


def rows(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in verdict["requirements"]}


def failed(verdict: dict[str, Any]) -> set[str]:
    return {rid for rid, r in rows(verdict).items() if r["failed"]}


def test_conformant_traffic_is_incomplete_never_passed(tmp_path: Path) -> None:
    har = write_har(tmp_path / "session.har", [completion_entry(), stream_entry(logprobs=1)])
    code, out, err, verdict = judge(tmp_path, har)
    assert (code, err) == (7, "")
    assert verdict["verdict"] == "incomplete" and failed(verdict) == set()
    assert "2 exchange(s) judged of 2 entries" in out
    by_id = rows(verdict)
    for rid, reason in UNOBSERVABLE.items():
        assert by_id[rid]["status"] == "not-observable" and by_id[rid]["reason"] == reason
    musts = [r for r in verdict["untested"] if r["id"] in UNOBSERVABLE]
    assert musts and all(r["reason"].startswith("not observable from traffic") for r in musts)
    unobserved = [r for r in verdict["reasons"] if "not observable from traffic: " in r]
    assert unobserved and "MODEL-NOT-FOUND" in unobserved[0]
    # Issue 32: a MUST that cannot apply under the document is "not applicable", with why.
    headers = by_id["RESP-HEADERS-REQUIRED"]
    assert (headers["status"], headers["reason"]) == (
        "not-applicable",
        "the spec requires no response header",
    )
    page = (tmp_path / "reports" / "traffic.html").read_text(encoding="utf-8")
    badge = '<span class="badge s-not-applicable" title="the spec requires no response header">'
    assert f"{badge}not applicable</span>" in page
    assert by_id["RESP-SCHEMA"]["status"] == "passed"
    for name in ("junit.xml", "report.html", "results.json", "summary.md", "traffic.html"):
        assert (tmp_path / "reports" / name).is_file()


def test_a_defect_fails_its_requirement_with_evidence(tmp_path: Path) -> None:
    case = req(max_tokens=2)
    body = completion_for(case)
    body["usage"]["total_tokens"] += 5
    har = write_har(tmp_path / "s.har", [har_entry(case.body, 200, json.dumps(body))])
    code, _, _, verdict = judge(tmp_path, har)
    assert code == 1 and failed(verdict) == {"USAGE-TOTAL"}
    finding = rows(verdict)["USAGE-TOTAL"]["findings"][0]
    assert "total_tokens" in finding["message"] and finding["case"] == "s.har entry 1"
    assert finding["curl"].startswith("curl") and "$CONFORMANCE_API_KEY" in finding["curl"]
    assert verdict["models"]["reference-model"]["verdict"] == "failed"


def test_an_invalid_request_is_judged_as_invalid(tmp_path: Path) -> None:
    case = req(max_tokens=-3)  # served with a 200: the request oracle says it breaks a rule
    har = write_har(
        tmp_path / "s.har", [har_entry(case.body, 200, json.dumps(completion_for(req())))]
    )
    _, _, _, verdict = judge(tmp_path, har)
    assert failed(verdict) == {"INVALID-REJECTED"}
    assert "max_tokens" in rows(verdict)["INVALID-REJECTED"]["findings"][0]["message"]


def test_a_request_without_credentials_is_an_auth_probe(tmp_path: Path) -> None:
    case = req()
    served = har_entry(case.body, 200, json.dumps(completion_for(case)), request_headers=[])
    _, _, _, verdict = judge(tmp_path, write_har(tmp_path / "s.har", [served]))
    assert failed(verdict) == {"AUTH-REQUIRED"}


def test_devtools_and_mitmproxy_bodies_are_read_decoded(tmp_path: Path) -> None:
    # Devtools keep the body decoded and the Content-Encoding header: no false alarm.
    gzipped = completion_entry()
    gzipped["response"]["headers"].append({"name": "Content-Encoding", "value": "gzip"})
    base64ed = stream_entry()
    base64ed["response"]["content"]["text"] = base64.b64encode(
        base64ed["response"]["content"]["text"].encode()
    ).decode()
    base64ed["response"]["content"]["encoding"] = "base64"
    pseudo = completion_entry()
    pseudo["request"]["headers"].append({"name": ":authority", "value": "api.example.test"})
    har = write_har(tmp_path / "s.har", [gzipped, base64ed, pseudo])
    code, _, err, verdict = judge(tmp_path, har)
    assert (code, err, failed(verdict)) == (7, "", set())
    assert verdict["traffic"]["judged"] == 3


def test_other_operations_are_counted_not_judged(tmp_path: Path) -> None:
    other = completion_entry()
    other["request"]["url"] = "https://api.example.test/v1/chat/completions"
    models = completion_entry()
    models["request"]["method"] = "GET"
    models["request"]["url"] = "https://api.example.test/v1/models"
    models["response"]["status"] = 0  # not ours: not a bad entry either
    har = write_har(tmp_path / "s.har", [other, completion_entry(), models])
    code, out, err, verdict = judge(tmp_path, har)
    assert (code, err) == (7, "")
    assert verdict["traffic"]["judged"] == 1
    assert verdict["traffic"]["unjudged"] == {"a request to another operation": 2}
    assert "not judged: 2 a request to another operation" in out


def test_a_truncated_har_keeps_the_entries_before_the_cut(tmp_path: Path) -> None:
    case = req()
    bad = completion_for(case)
    bad["object"] = "chat.completion"
    whole = json.dumps(
        {"log": {"entries": [har_entry(case.body, 200, json.dumps(bad)), completion_entry()]}}
    )
    path = tmp_path / "cut.har"
    path.write_text(whole[: len(whole) - 200], encoding="utf-8")
    code, _, err, verdict = judge(tmp_path, path)
    assert code == 4
    assert err.splitlines()[0].startswith("ERROR: cut.har entry 2: the HAR is truncated")
    assert verdict["traffic"]["judged"] == 1 and failed(verdict) == {"RESP-OBJECT"}


def test_an_entry_without_its_answer_is_named_and_the_others_judged(tmp_path: Path) -> None:
    cancelled = completion_entry()
    cancelled["response"] = {
        "status": 0,
        "headers": [],
        "content": {"size": 0},
        "_error": "net::ERR_ABORTED",
    }
    unrecorded = completion_entry()
    del unrecorded["response"]["content"]["text"]
    har = write_har(tmp_path / "s.har", [cancelled, completion_entry(), unrecorded, stream_entry()])
    code, _, err, verdict = judge(tmp_path, har)
    assert code == 4
    lines = err.splitlines()
    assert (
        lines[0] == "ERROR: s.har entry 1: the entry has no answer (response missing or status 0)"
    )
    assert (
        lines[1]
        == "ERROR: s.har entry 3: the answer's body was not recorded (content.text missing)"
    )
    assert verdict["traffic"]["judged"] == 2 and verdict["traffic"]["unjudged"] == {"unreadable": 2}


def jsonl_line(case_body: dict[str, Any], response: dict[str, Any], **request: Any) -> str:
    return json.dumps(
        {
            "request": {
                "url": URL,
                "headers": {"Authorization": f"Bearer {KEY}"},
                "body": case_body,
                **request,
            },
            "response": response,
        }
    )


def test_jsonl_with_raw_bytes_and_a_line_that_is_not_json(tmp_path: Path) -> None:
    streamed = req(stream=True)
    raw = sse(chunks_for(streamed)).encode()
    writes = [raw[i : i + 7] for i in range(0, len(raw), 7)]  # tiny TCP writes are legal
    plain = req()
    coded = gzip.compress(json.dumps(completion_for(plain)).encode())
    lines = [
        jsonl_line(
            streamed.body,
            {
                "status": 200,
                "headers": [["Content-Type", "text/event-stream"], ["X-Request-Id", "r"]],
                "writes_base64": [base64.b64encode(w).decode() for w in writes],
                "times": [0.01 * i for i in range(len(writes))],
            },
        ),
        "{not json",
        jsonl_line(
            plain.body,
            {
                "status": 200,
                "headers": [
                    ["Content-Type", "application/json"],
                    ["Content-Encoding", "gzip"],
                    ["X-Request-Id", "r"],
                ],
                "body_base64": base64.b64encode(coded).decode(),
            },
        ),
        jsonl_line(plain.body, {"headers": []}),
    ]
    path = tmp_path / "traffic.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err, verdict = judge(tmp_path, path)
    assert code == 4
    assert err.splitlines()[:2] == [
        "ERROR: traffic.jsonl line 2: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        "ERROR: traffic.jsonl line 4: the exchange has no answer (response, status missing)",
    ]
    assert verdict["traffic"]["judged"] == 2 and failed(verdict) == set()


def test_a_transcript_is_judged_as_the_transcript_tool_judges_it(tmp_path: Path) -> None:
    # Recorded from FastChat: usage one short, so FINISH-LENGTH (counted by usage) is withheld.
    path = ROOT / "tests" / "transcripts" / "fastchat" / "finish-length-usage-off-by-one.json"
    data = transcript.load(path)
    _, _, _, verdict = judge(tmp_path, path, spec=data["spec"])
    assert failed(verdict) == set(transcript.judge(data))


def test_no_key_reaches_any_output(tmp_path: Path) -> None:
    case = req()
    echoed = {
        "error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}
    }
    secret_header = ("X-Api-Key", "tenant-secret-value-42")
    entries = [
        har_entry(
            case.body,
            401,
            json.dumps(echoed),
            request_headers=[("Authorization", f"Bearer {KEY}"), secret_header],
        ),
        completion_entry(),
    ]
    code, out, err, _ = judge(tmp_path, write_har(tmp_path / "s.har", entries))
    assert code == 7
    for path in (tmp_path / "reports").iterdir():
        text = path.read_text(encoding="utf-8")
        assert KEY not in text and "tenant-secret-value-42" not in text, path.name
    assert KEY not in out + err


def test_target_text_is_escaped_in_the_page(tmp_path: Path) -> None:
    case = req(max_tokens=-1)
    answer = {"error": {"message": "<script>alert(1)</script>", "type": "x"}}
    entry = har_entry(case.body, 200, json.dumps(answer))
    judge(tmp_path, write_har(tmp_path / "s.har", [entry]))
    page = (tmp_path / "reports" / "traffic.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)" in page and "<script>alert" not in page


def test_a_judge_that_breaks_is_a_suite_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import conformance.judging.traffic_judge as traffic_judge

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(traffic_judge, "judge_into", broken)
    har = write_har(tmp_path / "s.har", [completion_entry()])
    code, _, err, verdict = judge(tmp_path, har)
    assert err.startswith(
        "ERROR: suite error: the judge failed on s.har entry 1: RuntimeError: boom"
    )
    assert verdict["verdict"] == "error" and code == 4


UNREADABLE = {
    "missing.har": (None, "cannot be read: No such file or directory"),
    "binary.har": (b"\x00\xff\xfe junk", "cannot be read: not UTF-8 text"),
    "notes.txt": (b"hello world\n", "not a HAR, JSONL or transcript file: not JSON"),
    "list.json": (b"[1, 2]", "not a HAR, JSONL or transcript file: JSON with neither"),
    "junk.jsonl": (b"x\ny\n", "not a HAR, JSONL or transcript file: no line is JSON"),
    "cut.har": (b'{"log": {"entries": [', "not a HAR, JSONL or transcript file: not JSON"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_that_cannot_be_read_is_bad_input_and_nothing_else(
    tmp_path: Path, name: str
) -> None:
    """Issue 32: ``judge nope.har`` wrote six reports and printed ``verdict: incomplete
    (60 MUST requirement(s) untested)`` before its ERROR. Now: one ERROR line naming the
    file, no verdict, no report, exit 4; a readable file beside it changes nothing."""
    content, said = UNREADABLE[name]
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    good = write_har(tmp_path / "good.har", [completion_entry()])
    where = path if said.startswith("cannot be read") else name  # the path as given
    for files in ((path,), (good, path)):
        code, out, err, _ = judge(tmp_path, *files)
        assert (code, out) == (4, "")
        assert err.count("\n") == 1 and err.startswith(f"ERROR: {where}: {said}"), err
        assert not (tmp_path / "reports").exists()


def test_unreadable_file_and_unknown_spec(tmp_path: Path) -> None:
    code, _, err, _ = judge(tmp_path, tmp_path / "missing.har")
    assert code == 4 and err.startswith("ERROR: ") and "missing.har: cannot be read" in err
    out, err2 = io.StringIO(), io.StringIO()
    assert main([str(tmp_path / "x.har"), "--spec", "nope"], out=out, err=err2) == 4
    assert err2.getvalue().startswith("ERROR: --spec nope")


def test_every_unobservable_requirement_is_registered() -> None:
    from conformance.judging.checks import load_checks
    from conformance.judging.requirements import REGISTRY

    load_checks()
    assert {rid for ids, _ in NOT_OBSERVABLE.values() for rid in ids} <= set(REGISTRY)


@pytest.mark.parametrize("contract", ["openai-compatible", "document"])
def test_traffic_is_judged_under_the_contract_asked_for(tmp_path: Path, contract: str) -> None:
    # The same levels as a run: under Nscale's document, echo ignored is a MUST failure by
    # the openai-compatible contract, advisory by the document alone; the reports say which.
    har = write_har(tmp_path / "session.har", [completion_entry()])
    out, err = io.StringIO(), io.StringIO()
    reports = tmp_path / "reports"
    argv = [str(har), "--spec", "nscale", "--contract", contract, "--report-dir", str(reports)]
    assert main(argv, out=out, err=err) in (1, 7), err.getvalue()
    results = json.loads((reports / "results.json").read_text())
    assert results["meta"]["contract"] == contract
    tallies = {t["id"]: t for t in results["requirements"]}
    want = "MUST" if contract == "openai-compatible" else "SHOULD"
    assert tallies["USAGE-TOTAL"]["level"] == want
