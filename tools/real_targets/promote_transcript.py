"""Promote a transcript saved by a real-targets run into the test corpus, with its findings.

    python tools/real_targets/promote_transcript.py SAVED.json NAME \
        [--expect ID,ID,...] [--why ID="reason" ...] [--gap "what the judge gets wrong"] \
        [--title "..."] [--family FAMILY] [--corpus tests/transcripts]

SAVED.json is a file from ``WORK/results/<target>-<spec>/transcripts/`` (record_transcripts.py).
``expect_failed`` is what the contract says must fail on this exchange: by default the IDs
today's judge failed on it, re-judged now; ``--expect`` replaces that set when the judge is
wrong (then give ``--gap`` too, which makes the replay test a strict xfail until the judge
is fixed). Every expected ID needs a ``--why``: a finding nobody explained is not evidence.
The file lands in ``<corpus>/<family>/NAME.json``; tests/test_transcripts.py replays it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import transcript

from conformance.judging.document.spec import SpecError

REPO = Path(__file__).resolve().parents[2]


def promote(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved", type=Path)
    parser.add_argument("name")
    parser.add_argument("--expect", help="comma-separated requirement IDs that must fail")
    parser.add_argument("--why", action="append", default=[], metavar="ID=REASON")
    parser.add_argument("--gap", help="what today's judge gets wrong on this transcript")
    parser.add_argument("--title")
    parser.add_argument("--family", help="default: the source family recorded in the file")
    parser.add_argument("--corpus", type=Path, default=REPO / "tests" / "transcripts")
    args = parser.parse_args(argv)

    try:
        data = transcript.load(args.saved)
    except (OSError, ValueError) as exc:
        print(f"ERROR: cannot read {args.saved}: {exc}", file=sys.stderr)
        return 4
    data.pop("judged_failed", None)
    problems = transcript.provenance_problems(data)
    if problems:
        print(f"ERROR: {args.saved}: {'; '.join(problems)}", file=sys.stderr)
        return 4
    try:
        judged = set(transcript.judge(data, where=args.saved.parent))
    except SpecError as exc:
        print(f"ERROR: {args.saved}: {exc}", file=sys.stderr)
        return 4
    expected = set(filter(None, args.expect.split(","))) if args.expect is not None else judged
    why = dict(item.split("=", 1) for item in args.why if "=" in item)
    missing = sorted(expected - set(why))
    if missing:
        print(f"ERROR: give --why for each expected finding: {', '.join(missing)}", file=sys.stderr)
        return 4
    if expected != judged and not args.gap:
        print(
            f"ERROR: today's judge fails {sorted(judged)}, you expect {sorted(expected)}: "
            "say what the judge gets wrong with --gap",
            file=sys.stderr,
        )
        return 4
    data["expect_failed"] = sorted(expected)
    data["why"] = {k: why[k] for k in sorted(expected)}
    if args.gap:
        data["judge_gap"] = args.gap
    if args.title:
        data["title"] = args.title
    family = args.family or data["source"].get("family") or "unknown"
    data["source"]["family"] = family
    out = args.corpus / family / f"{args.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = data.get("spec_document")
    if isinstance(document, dict):  # the document it was judged by moves with it
        transcript.keep_document(
            args.saved.parent / document["file"], out.parent, document["origin"]
        )
    transcript.dump(data, out)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(promote())
