"""A realistic synthetic run, to preview the reports without a target.

``python -m conformance.front.demo OUTDIR`` writes every report of a made-up run against a faulty
gateway. The exchanges go through ``Results.record`` as in a real run, so the evidence
has the shape the suite produces (curl command, transcript timings, redacted headers).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformance.judging.requirements import Context, Level, Requirement
from conformance.judging.verdict.decision import decide
from conformance.judging.verdict.examples import Outcome
from conformance.judging.verdict.latency import StreamLatency
from conformance.judging.verdict.record import RunRecord
from conformance.judging.verdict.results import Capability, CapabilityOutcome, Finding, Results
from conformance.judging.verdict.run_info import SpecNote
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers, SSEEvent

URL = "https://gateway.example/v1/completions"


def _nothing(_: Context) -> None:
    return None


def _always(_: Context) -> bool:
    return True


def _req(rid: str, level: Level, area: str, statement: str, source: str) -> Requirement:
    return Requirement(rid, level, area, statement, source, _nothing, _always)


REQUIREMENTS = [
    _req(
        "HTTP-COMPLETE",
        Level.MUST,
        "transport",
        "The target answers every request with a complete HTTP response within bounds.",
        "universal HTTP client behaviour",
    ),
    _req(
        "RESP-SCHEMA",
        Level.MUST,
        "schema",
        "A non-streamed 200 body validates against the spec's response schema.",
        "spec: responses.200.content.*.schema",
    ),
    _req(
        "RESP-ID-NONEMPTY",
        Level.SHOULD,
        "semantics",
        "The completion `id` is a non-empty string.",
        "OpenAI behaviour",
    ),
    _req(
        "STREAM-DONE-LAST",
        Level.MUST,
        "streaming",
        "A stream ends with exactly one `data: [DONE]`, and nothing follows it.",
        "spec text: stream; openai-python",
    ),
    _req(
        "ERR-ENVELOPE",
        Level.MUST,
        "errors",
        "Every 4xx body is the declared error envelope `{error: {message, type, ...}}`.",
        "spec: components.schemas.ErrorResponse",
    ),
    _req(
        "AUTH-MISSING-401",
        Level.MUST,
        "auth",
        "A request without credentials is answered 401 with the error envelope.",
        "spec: securitySchemes",
    ),
    _req(
        "CAP-ECHO",
        Level.CAPABILITY,
        "semantics",
        "`echo: true` returns the prompt before the completion, or is declined with a 4xx.",
        "spec: CreateCompletionRequest.echo",
    ),
    _req(
        "SDK-OPENAI-PYTHON",
        Level.MUST,
        "sdk",
        "The official openai-python client parses every answer without raising.",
        "openai-python 1.x",
    ),
]


def _exchange(
    body: dict[str, object],
    *,
    status: int,
    response: bytes = b"",
    events: list[SSEEvent] | None = None,
    content_type: str = "application/json",
) -> Exchange:
    case = Case(body, label="generated", mode="valid")
    return Exchange(
        case=case,
        url=URL,
        request_headers={"Content-Type": "application/json", "Authorization": "[REDACTED]"},
        request_body=json.dumps(body).encode(),
        status=status,
        headers=Headers([("content-type", content_type), ("x-request-id", "req_8f2c1d")]),
        body=response,
        events=events,
        elapsed=0.412,
    )


def demo_results(*, target: str = URL, failing: bool = True) -> Results:
    """A run with passes, MUST and SHOULD failures, a declined capability, untested rules."""
    results = Results.for_requirements(REQUIREMENTS)
    body = {"model": "m-small", "prompt": "Say hi", "max_tokens": 8}
    ok = _exchange(
        body,
        status=200,
        response=b'{"id":"cmpl-1","object":"text_completion","created":1767225600,'
        b'"model":"m-small","choices":[{"index":0,"text":" hi","finish_reason":"stop",'
        b'"logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}',
    )
    for _ in range(6):
        results.record(
            ok, [Finding(rid, Outcome.PASSED) for rid in ("HTTP-COMPLETE", "RESP-SCHEMA")]
        )
    chunk = '{"id":"cmpl-2","object":"text_completion","choices":[{"index":0,"text":"%s"}]}'
    stream = _exchange(
        {**body, "stream": True},
        status=200,
        content_type="text/event-stream",
        events=[
            SSEEvent(chunk % " hel", at=0.183),
            SSEEvent(chunk % "lo", at=0.201),
            SSEEvent(chunk % "!", at=0.236),
        ],
    )
    done = Outcome.PASSED
    message = "the stream ended after 3 events without `data: [DONE]`"
    if failing:
        done = Outcome.FAILED
    for _ in range(4):
        results.record(
            stream,
            [Finding("HTTP-COMPLETE", Outcome.PASSED), Finding("STREAM-DONE-LAST", done, message)],
        )
    empty_id = _exchange(body, status=200, response=b'{"id":"","object":"text_completion"}')
    results.record(
        empty_id,
        [
            Finding(
                "RESP-ID-NONEMPTY",
                Outcome.FAILED if failing else Outcome.PASSED,
                "id is '', expected a non-empty string",
            )
        ],
    )
    echo = _exchange(
        {**body, "echo": True},
        status=400,
        response=b'{"error":{"message":"echo is not supported","type":"invalid_request_error"}}',
    )
    results.record(
        echo,
        [
            Finding("CAP-ECHO", Outcome.UNSUPPORTED, "declined with 400: echo is not supported"),
            Finding("ERR-ENVELOPE", Outcome.PASSED),
        ],
    )
    offered, declined = CapabilityOutcome.OFFERED, CapabilityOutcome.DECLINED
    results.capabilities = {
        "echo": Capability(declined, "400 with the error envelope"),
        "best_of": Capability(offered, "200 (effect not observable)"),
        "logprobs": Capability(CapabilityOutcome.IGNORED, "no choice carries a logprobs object")
        if failing
        else Capability(offered, "200"),
        "n": Capability(offered, "200"),
        "suffix": Capability(declined, "400 with the error envelope"),
    }
    # What conformance/judging/verdict/latency.py records for each streamed 200.
    results.latency = [
        StreamLatency(
            case="stream n=1",
            events=4,
            ttfb_s=0.171,
            first_event_s=0.183,
            p50_gap_s=0.018,
            p95_gap_s=0.035,
            max_gap_s=0.035,
            total_s=0.236,
            buffered=False,
        ),
        StreamLatency(
            case="stream n=2, include_usage",
            events=7,
            ttfb_s=0.196,
            first_event_s=0.204,
            p50_gap_s=0.021,
            p95_gap_s=0.052,
            max_gap_s=0.052,
            total_s=0.311,
            buffered=False,
        ),
        StreamLatency(
            case="stream, long prompt",
            events=5,
            ttfb_s=1.902,
            first_event_s=1.93,
            p50_gap_s=0.0,
            p95_gap_s=0.001,
            max_gap_s=0.001,
            total_s=1.934,
            buffered=True,
        ),
    ]
    context = dict(
        concurrency=8,
        target=target,
        spec="aihubmix",
        spec_title="AIHubMix Completions API 1.0.0",
        strict_spec=False,
        strict=False,
        errata=(
            SpecNote(
                "AIHUBMIX-STREAM-MEDIA",
                "Streamed 200 is text/event-stream",
                "The document declares only application/json for 200; its stream "
                "description says data-only server-sent events ending in data: [DONE].",
            ),
            SpecNote(
                "AIHUBMIX-NULLABLE",
                "nullable: true read as 'null allowed'",
                "The document says openapi 3.1.0 but uses OpenAPI 3.0's nullable.",
            ),
        ),
        model="m-small",
        seed=0,
        wall_time=12.48,
        observed_statuses={"200": 11, "400": 1},
    )
    # The evidence tiers and coverage a real run records (the registry and the engine).
    tiers = {"MUST": "spec-schema", "SHOULD": "server-habit", "CAPABILITY": "spec-schema"}
    for tally in results.tallies.values():
        tally.evidence = tiers.get(tally.level, "")
    # The run record a budget-cut run keeps; the judge core decides its verdict.
    musts = tuple(t.id for t in results.tallies.values() if t.level == "MUST")
    note = "request budget spent (--budget-requests)"
    record = RunRecord(
        spec="aihubmix", model="m-small", seed=0, musts=musts,
        budget=note if any(not results.tallies[rid].checked for rid in musts) else None,
    )  # fmt: skip
    results.begin(context, record)  # the run state's one owner writes it, as in a run
    results.decided(decide(results))
    return results


def main(argv: list[str] | None = None) -> int:
    """Write the demo run's reports into OUTDIR."""
    from conformance.reports import write_all

    parser = argparse.ArgumentParser(prog="python -m conformance.front.demo", description=__doc__)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--passing", action="store_true", help="a run without failures")
    args = parser.parse_args(argv)
    for path in write_all(demo_results(failing=not args.passing), args.outdir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
