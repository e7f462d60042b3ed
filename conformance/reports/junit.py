"""Requirement-centric JUnit XML: one testcase per requirement, evidence on failures.

Layout, chosen for what CI systems (Jenkins, GitLab, dorny/test-reporter,
mikepenz/action-junit-report) show; docs/results-schema.md ("junit.xml") says why.
``<testsuites>`` holding one ``<testsuite>``; each requirement is a ``<testcase>`` named by
its stable ID with ``classname`` = its area, so runs line up across deploys (the
``requirement`` property always holds the bare ID). Failures that decide the verdict are
``<failure>``. A finding that does not (SHOULD without ``--strict-should``, CAPABILITY)
passes, so that a gate reading JUnit stays green, but its name says so (``STOP-PROBE
(SHOULD failed, advisory)``: the name is the one field every one of those views shows for
a passing test) and ``<system-err>`` holds the warning and its evidence. A requirement not
exercised is ``<skipped>`` with the reason as message and text: a MUST with a stated
reason not to apply is named ``ID (not applicable)``, never mistaken for "not tested". A
check that raised is an ``<error>`` (a suite defect). When MUST requirements were left
untested, one more testcase, ``coverage``, fails and lists them, so that a CI view never
shows an incomplete run as all green.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.judging.verdict.examples import Example, Outcome
from conformance.judging.verdict.results import Results, Tally
from conformance.judging.verdict.verdict import Coverage
from conformance.reports.summary import (
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    NOT_TESTED,
    UNSUPPORTED,
    WARNED,
    coverage_of,
    evidence_label,
    is_strict,
    ordered,
    policies_of,
    pretty_body,
    status_of,
    transcript_lines,
    verdict_of,
)

MAX_SHOWN = 3
MESSAGE_CHARS = 300

# Characters XML 1.0 cannot carry at all, not even escaped: a target's body may hold them.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` with characters that XML cannot carry shown as ``\\xNN`` escapes."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def example_text(example: Example) -> str:
    """One exchange as plain text: problem, request, response or transcript, reproducer."""
    shown = example.evidence
    request = shown.request
    label = shown.case or shown.mode or "exchange"
    parts = [f"problem: {example.message}", f"case: {label} ({shown.mode})"]
    if shown.breaks:
        parts.append(f"breaks: {shown.breaks}")
    parts.append(f"request: {request.method} {request.url}")
    parts.append(pretty_body(request.body))
    if shown.transport_error:
        parts.append(f"transport error: {shown.transport_error}")
    parts.append(f"status: {shown.status}")
    headers = shown.response_headers
    if headers:
        parts.append("response headers:")
        parts += [f"  {name}: {value}" for name, value in headers.items()]
    if shown.transcript is not None:
        parts.append("SSE transcript:")
        parts += [f"  {line}" for line in transcript_lines(example)]
        if shown.stream_error:
            parts.append(f"stream error: {shown.stream_error}")
    else:
        parts.append(f"response body: {shown.body_excerpt}")
    parts.append(f"reproduce:\n  {shown.curl}")
    return "\n".join(parts)


def finding_text(tally: Tally, outcome: Outcome) -> str:
    """The requirement, how often it failed (or was declined), and the first examples."""
    examples = [ex for ex in tally.examples if ex.outcome == outcome]
    count = {"failed": tally.failed, "error": tally.errored}.get(outcome, tally.unsupported)
    verb = {"failed": "failed", "error": "raised in the suite"}.get(outcome, "was declined")
    parts = [
        f"{tally.id} [{tally.level}] {tally.statement}",
        f"source: {tally.source}",
        f"{verb} on {count} of {tally.checked} exchange(s); "
        f"{min(len(examples), MAX_SHOWN)} example(s) below",
    ]
    for i, example in enumerate(examples[:MAX_SHOWN], 1):
        parts.append(f"\n--- example {i} ---\n{example_text(example)}")
    return "\n".join(parts)


def _first_message(tally: Tally) -> str:
    for example in tally.examples:
        if example.outcome == Outcome.FAILED:
            return example.message
    return ""


def _failure_message(tally: Tally) -> str:
    """The one-line message CI shows next to the test name."""
    first = " ".join(_first_message(tally).split())
    text = f"failed on {tally.failed} of {tally.checked} exchange(s)"
    text += f": {first}" if first else f": {tally.statement}"
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _property(parent: ET.Element, name: str, value: object) -> None:
    ET.SubElement(parent, "property", name=name, value=xml_safe(str(value)))


def _skip_reason(tally: Tally, coverage: Coverage) -> tuple[str, str]:
    """Why ``tally`` was not exercised: its bucket (as summary.Buckets names it) and why."""
    for label, pairs in (
        ("not applicable", coverage.not_applicable),
        ("untested", coverage.untested),
    ):
        why = next((u.reason for u in pairs if u.id == tally.id), None)
        if why is not None:
            return label, why
    if tally.id in coverage.deselected:
        return "deselected", "--checks / --skip-checks"
    return "not exercised", "no exchange in this run was judged by it"


def _skipped(case: ET.Element, reason: str) -> None:
    """``<skipped>`` with the reason twice: Jenkins shows the ``message`` attribute, GitLab
    the element's text."""
    skipped = ET.SubElement(case, "skipped", message=xml_safe(reason))
    skipped.text = xml_safe(reason)


def advisory_name(tally: Tally) -> str:
    """The testcase name of a failure that does not decide the verdict."""
    return f"{tally.id} ({tally.level} failed, advisory)"


def _testcase(suite: ET.Element, tally: Tally, *, strict: bool, coverage: Coverage) -> str:
    """Append the testcase of ``tally`` and return its status."""
    status = status_of(tally, strict=strict, coverage=coverage)
    name = {
        WARNED: advisory_name(tally),
        NOT_APPLICABLE: f"{tally.id} (not applicable)",
    }.get(status, tally.id)
    case = ET.SubElement(suite, "testcase", classname=tally.area, name=name, time="0")
    props = ET.SubElement(case, "properties")
    _property(props, "requirement", tally.id)
    for key in ("level", "source", "area", "statement", "checked", "failed", "unsupported"):
        _property(props, key, getattr(tally, key))
    if tally.evidence:
        _property(props, "evidence", evidence_label(tally))
    if tally.why_level:
        _property(props, "level_why", tally.why_level)
    if tally.fingerprints:
        _property(props, "fingerprints", "\n".join(tally.fingerprints))
    if status == ERROR:
        first = next((ex for ex in tally.examples if ex.outcome == Outcome.ERROR), None)
        said = "the check raised" if first is None else first.message
        error = ET.SubElement(
            case, "error", message=xml_safe(said[:MESSAGE_CHARS]), type="suite defect"
        )
        error.text = xml_safe(finding_text(tally, Outcome.ERROR))
    elif status == FAILED:
        failure = ET.SubElement(
            case, "failure", message=xml_safe(_failure_message(tally)), type=tally.level
        )
        failure.text = xml_safe(finding_text(tally, Outcome.FAILED))
    elif status == WARNED:
        why = (
            "it fails the run only with --strict-should"
            if tally.level == "SHOULD"
            else f"{tally.level} findings do not fail the run"
        )
        err = ET.SubElement(case, "system-err")
        err.text = xml_safe(
            f"WARNING: {tally.level} requirement {_failure_message(tally)} "
            f"(advisory: {why})\n\n{finding_text(tally, Outcome.FAILED)}"
        )
    elif status == UNSUPPORTED:
        out = ET.SubElement(case, "system-out")
        out.text = xml_safe(
            f"capability not offered by the target (not a failure):\n"
            f"{finding_text(tally, Outcome.UNSUPPORTED)}"
        )
    elif status in (NOT_APPLICABLE, NOT_TESTED):
        bucket, why = _skip_reason(tally, coverage)
        _property(props, "coverage", bucket)
        _skipped(case, f"{bucket}: {why}" if why else bucket)
    return status


def _coverage_case(suite: ET.Element, coverage: Coverage) -> bool:
    """The ``coverage`` testcase: fails listing the untested requirements; True if it failed."""
    case = ET.SubElement(suite, "testcase", classname="coverage", name="untested", time="0")
    if not coverage.untested:
        return False
    failure = ET.SubElement(
        case,
        "failure",
        message=f"{len(coverage.untested)} requirement(s) left untested: incomplete, not passed",
        type="incomplete",
    )
    failure.text = xml_safe("\n".join(f"{u.id}: {u.reason}" for u in coverage.untested))
    return True


def build_junit(results: Results) -> ET.Element:
    """The JUnit XML tree of ``results``."""
    info = results.info
    strict = is_strict(results)
    name = f"conformance {info.spec or ''} @ {info.target or ''}".strip()
    root = ET.Element("testsuites", name="completions conformance")
    suite = ET.SubElement(root, "testsuite", name=xml_safe(name))
    props = ET.SubElement(suite, "properties")
    keys = ("target", "spec", "spec_title", "spec_source", "spec_sha256", "operation", "model")
    for key in (*keys, "contract", "seed", "strict", "strict_spec"):
        if info.is_set(key):
            _property(props, key, getattr(info, key))
    _property(props, "verdict", verdict_of(results).word)
    _property(props, "errata", ", ".join(e.id for e in info.errata or ()))
    _property(props, "policies", ", ".join(p.id for p in policies_of(info)))
    if info.conventions:
        _property(props, "conventions", ", ".join(c.id for c in info.conventions))
    _property(props, "spent", json.dumps(results.spent.to_json(), sort_keys=True))
    coverage = coverage_of(results)
    if coverage.untested:
        _property(props, "untested", ", ".join(u.id for u in coverage.untested))
    if coverage.not_applicable:
        _property(props, "not_applicable", ", ".join(u.id for u in coverage.not_applicable))
    tallies = ordered(results.tallies.values())
    statuses = [_testcase(suite, t, strict=strict, coverage=coverage) for t in tallies]
    advisory = [t.id for t, s in zip(tallies, statuses, strict=True) if s == WARNED]
    if advisory:
        _property(props, "advisory", ", ".join(advisory))
    incomplete = _coverage_case(suite, coverage)
    counts = {
        "tests": str(len(statuses) + 1),
        "failures": str(statuses.count(FAILED) + incomplete),
        "errors": str(statuses.count(ERROR)),
        "skipped": str(statuses.count(NOT_TESTED) + statuses.count(NOT_APPLICABLE)),
        "time": str(info.wall_time if info.is_set("wall_time") else 0),
    }
    for element in (root, suite):
        element.attrib.update(counts)
    return root


def write_junit(results: Results, path: Path) -> Path:
    """Write ``results`` as JUnit XML at ``path``."""
    root = build_junit(results)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path
