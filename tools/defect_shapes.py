"""Held-out measurement: how the judge does on defect shapes taken from real bug trackers.

The shapes are the transcripts named ``tests/transcripts/<family>/bug-*.json`` (a defect a
server's own tracker reports, written as one exchange) and ``guard-*.json`` (a reported
"bug" that is legal under the contract: the judge must stay silent). Each names the exact
requirements that own the defect, written from the contract, not from the judge.

    python tools/defect_shapes.py                      # table of today's results
    python tools/defect_shapes.py --save before.json   # keep the results to compare later
    python tools/defect_shapes.py --before before.json --doc docs/defect-shapes.md

The figure to quote is the held-out set's (tests/transcripts/held-out.json): shapes written
after the judge's fixes, measured once, not to be tuned on (its `measured` history says
where a change knew a shape); this tool prints it last. The other
shapes were used to fix the judge, so their "after" column is not a held-out measure.

A shape's result is one of:
  caught          the judge fails exactly the expected requirements
  caught+extra    every expected requirement fails, and others too (a double count)
  partial         some expected requirements fail, not all
  missed          none of the expected requirements fails
  silent          a guard: nothing fails, as the contract says
  false-alarm     a guard on which the judge fails something
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "transcripts"
HELD_OUT = CORPUS / "held-out.json"
sys.path.insert(0, str(ROOT / "tools" / "real_targets"))

import transcript  # noqa: E402

RESULTS = ("caught", "caught+extra", "partial", "missed", "silent", "false-alarm")


def shape_files(corpus: Path = CORPUS) -> list[Path]:
    return sorted([*corpus.glob("*/bug-*.json"), *corpus.glob("*/guard-*.json")])


def classify(expected: set[str], failed: set[str]) -> str:
    if not expected:
        return "silent" if not failed else "false-alarm"
    hit = expected & failed
    if hit == expected:
        return "caught" if failed == expected else "caught+extra"
    return "partial" if hit else "missed"


def measure(files: list[Path]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in files:
        data = transcript.load(path)
        failed = set(transcript.judge(data))
        expected = set(data["expect_failed"])
        out[f"{path.parent.name}/{path.stem}"] = {
            "result": classify(expected, failed),
            "expected": sorted(expected),
            "extra": sorted(failed - expected),
            "missing": sorted(expected - failed),
            "source": data["source"]["obtained"].removeprefix("written from "),
        }
    return out


def summary(results: dict[str, dict[str, Any]]) -> str:
    counts = Counter(r["result"] for r in results.values())
    return ", ".join(f"{name} {counts[name]}" for name in RESULTS if counts[name])


def table(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]] | None) -> str:
    rows = [
        "| shape | source issue | owning requirement(s) | before | after |",
        "|---|---|---|---|---|",
    ]
    for name, r in after.items():
        was = (before or {}).get(name, {}).get("result", "–")
        owner = ", ".join(r["expected"]) or "none (legal: guard)"
        rows.append(f"| `{name}` | {r['source']} | {owner} | {was} | {r['result']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write the results as JSON")
    parser.add_argument("--before", type=Path, help="JSON saved earlier, for the before column")
    parser.add_argument(
        "--doc", type=Path, help="replace the table between the markers in this file"
    )
    args = parser.parse_args(argv)
    results = measure(shape_files())
    before = json.loads(args.before.read_text()) if args.before else None
    if args.save:
        args.save.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    text = table(results, before)
    if args.doc:
        doc = args.doc.read_text()
        head, _, rest = doc.partition("<!-- table -->")
        _, _, tail = rest.partition("<!-- /table -->")
        args.doc.write_text(f"{head}<!-- table -->\n{text}\n<!-- /table -->{tail}")
    print(text)
    for name, r in results.items():
        if r["result"] not in ("caught", "silent"):
            print(f"{r['result']:13} {name}: missing {r['missing']} extra {r['extra']}")
    if before is not None:
        print("before:", summary(before))
    print("now:   ", summary(results))
    held = json.loads(HELD_OUT.read_text(encoding="utf-8"))
    held_now = {name: results[name] for name in held["shapes"] if name in results}
    print(
        f"held-out ({len(held_now)} shapes, see held-out.json for what was tuned knowing them): {summary(held_now)}"
    )
    print(f"held-out as measured {held['measured']['date']}: {held['measured']['summary']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
