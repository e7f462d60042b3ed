"""Requirement-centric JUnit XML: one testcase per requirement, evidence on failures."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.results import Results, Tally

MAX_SHOWN = 3


def _failure_text(tally: Tally) -> str:
    parts = [
        f"{tally.id} [{tally.level}] {tally.statement}",
        f"source: {tally.source}",
        f"failed on {tally.failed} of {tally.checked} exchange(s)",
    ]
    for i, ex in enumerate(tally.examples[:MAX_SHOWN], 1):
        parts.append(f"\n--- example {i}: {ex.get('case') or ex.get('mode')} ---")
        parts.append(f"problem: {ex['message']}")
        parts.append(f"request: {ex['request']['body']}")
        parts.append(f"status: {ex.get('status')}")
        if ex.get("transcript") is not None:
            lines = [f"  +{ev['at']:.3f}s data: {ev['data']}" for ev in ex["transcript"]]
            parts.append("SSE transcript:\n" + "\n".join(lines))
        else:
            parts.append(f"response: {ex.get('body_excerpt', '')}")
        parts.append(f"reproduce: {ex['curl']}")
    return "\n".join(parts)


def write_junit(results: Results, path: Path) -> Path:
    """Write ``results`` as JUnit XML at ``path``."""
    tallies = list(results.tallies.values())
    meta = results.meta
    suite = ET.Element(
        "testsuite",
        name=f"conformance {meta.get('spec', '')}",
        tests=str(len(tallies)),
        failures=str(sum(1 for t in tallies if t.failed and t.level != "CAPABILITY")),
        skipped=str(sum(1 for t in tallies if not t.checked)),
        time=str(meta.get("wall_time", 0)),
    )
    props = ET.SubElement(suite, "properties")
    for key in ("target", "spec", "spec_title", "model", "seed", "verdict"):
        ET.SubElement(props, "property", name=key, value=str(meta.get(key, "")))
    ET.SubElement(
        props, "property", name="errata", value=", ".join(e["id"] for e in meta.get("errata", []))
    )
    ET.SubElement(props, "property", name="spent", value=json.dumps(results.spent))
    for tally in tallies:
        case = ET.SubElement(
            suite, "testcase", classname=f"conformance.{tally.area}", name=tally.id, time="0"
        )
        case_props = ET.SubElement(case, "properties")
        for key in ("level", "area", "source", "statement"):
            ET.SubElement(case_props, "property", name=key, value=str(getattr(tally, key)))
        ET.SubElement(case_props, "property", name="checked", value=str(tally.checked))
        if tally.failed and tally.level == "MUST":
            failure = ET.SubElement(
                case, "failure", message=f"{tally.id}: {tally.statement}", type=tally.level
            )
            failure.text = _failure_text(tally)
        elif tally.failed:
            # SHOULD findings are reported without failing the CI job.
            out = ET.SubElement(case, "system-out")
            out.text = _failure_text(tally)
        elif not tally.checked:
            ET.SubElement(case, "skipped", message="not tested in this run")
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
