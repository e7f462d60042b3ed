"""``completions-conformance judge FILE...``: judge recorded traffic offline.

Reads HAR 1.2 files (browsers' devtools, mitmproxy's savehar, the proxy's --har), the
suite's transcript files and JSONL exchanges (docs/traffic.md), judges every request to
the document's operation with the suite's requirements (conformance.judging.traffic_judge), and
writes the run's reports plus verdict.json and traffic.html. An entry that cannot be read
is one ``ERROR:`` line naming the file and the entry; the others are still judged and
reported, and the exit status is then 4 (bad input). A file that cannot be read at all
(missing, not text, none of the formats) is bad input before anything is judged: one
``ERROR:`` line, no verdict, no report, exit 4. Otherwise the exit status is the verdict's.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from conformance.front import option_table
from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.verdict.outcomes import BAD_INPUT

if TYPE_CHECKING:
    from conformance.judging.traffic_judge import TrafficJudge
    from conformance.judging.wire.traffic import Entry

PROG = "completions-conformance judge"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Judge recorded traffic (HAR, transcripts, JSONL) with the suite's "
        "requirements; write junit.xml, report.html, results.json, summary.md, "
        "verdict.json and traffic.html.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="HAR, transcript (.json) or JSONL")
    option_table.add_arguments(p, option_table.JUDGE)
    return p


def judge_files(
    paths: list[Path],
    spec_name: str,
    strict: bool,
    err: TextIO,
    contract: Contract = DEFAULT_CONTRACT,
) -> tuple[TrafficJudge, int]:
    """Judge every entry of ``paths``; the judge, and how many entries went wrong. Raises
    the BadEntry of the first file that cannot be read at all, before judging anything."""
    from conformance.judging.traffic_judge import TrafficJudge
    from conformance.judging.wire.traffic import BadEntry, operation_of, read
    from conformance.run.fetch import load_spec

    spec = load_spec(spec_name, strict=strict, contract=contract)
    wanted = operation_of(spec)
    # A file unreadable as a whole says so in its first entry: look at every file's first
    # before judging, so that a run over files that are not there writes no report.
    readers: list[Iterator[Entry]] = []
    for path in paths:
        entries = read(path, wanted)
        first = next(entries, None)
        if isinstance(first, BadEntry) and first.whole:
            raise first
        readers.append(itertools.chain(() if first is None else (first,), entries))
    judge = TrafficJudge(spec, target=", ".join(p.name for p in paths))
    problems = 0
    for entries in readers:
        for entry in entries:
            line = judge.take(entry)
            if line is not None:
                problems += 1
                print(f"ERROR: {line}", file=err, flush=True)
    return judge, problems


def main(
    argv: list[str] | None = None, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    args = parser().parse_args(argv)
    from conformance.judging.document.spec import SpecError
    from conformance.judging.wire.traffic import BadEntry
    from conformance.reports.traffic import write_traffic_reports

    try:
        judge, problems = judge_files(
            [Path(f) for f in args.files], args.spec, args.strict_spec, err, Contract(args.contract)
        )
    except SpecError as exc:
        print(f"ERROR: --spec {args.spec}: {exc}", file=err)
        return BAD_INPUT
    except BadEntry as exc:  # a file unreadable as a whole: nothing was judged
        print(f"ERROR: {exc}", file=err)
        return BAD_INPUT
    snapshot = judge.snapshot()
    written = write_traffic_reports(snapshot, Path(args.report_dir))
    unjudged = ", ".join(f"{n} {why}" for why, n in sorted(judge.unjudged.items()))
    print(
        f"{judge.judged} exchange(s) judged of {judge.seen} entries"
        + (f" (not judged: {unjudged})" if unjudged else ""),
        file=out,
    )
    print(f"reports: {', '.join(str(p) for p in written)}", file=out)
    verdict = snapshot.verdict
    reasons = "; ".join(verdict.reasons)
    print(f"verdict: {verdict.word}" + (f" ({reasons})" if reasons else ""), file=out)
    if problems:
        print(
            f"ERROR: {problems} entr{'y' if problems == 1 else 'ies'} could not be judged "
            "(above); the others are in the reports",
            file=err,
        )
        return BAD_INPUT
    return verdict.exit_code
