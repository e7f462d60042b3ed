"""``completions-conformance gate``: a whole CI gate in one command (the GitHub Action's step).

    completions-conformance gate [--shards N] [--report-dir DIR] [--baseline FILE]
        [--summary FILE] [--output FILE] [--args TEXT] RUN-OPTIONS...

Runs the suite in N shards at once (each ``completions-conformance run --shard K/N`` in a
process and report directory of its own, ``DIR/shard-K``), merges their results into one
report and one verdict in DIR (``merge``), appends DIR/summary.md to the job summary
(``--summary``, default ``$GITHUB_STEP_SUMMARY``) and writes ``verdict=``, ``exit-code=``
and ``report-dir=`` to ``--output`` (default ``$GITHUB_OUTPUT``). A shard that wrote no
results (bad input, an unreachable target: exit 4) is named in the summary with its
``ERROR:`` line, instead of a merge failing on a missing file. Exits with the verdict's
status (verdict.EXIT_CODES); each shard's log is kept as DIR/shard-K/run.log.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conformance.front.arguments import PROG
from conformance.judging.outcomes import BAD_INPUT, ERROR, EXIT_CODES

#: What a heading says for a run that reached no verdict of its own.
NOT_RUN = "⛔ NOT RUN"


@dataclass(frozen=True, slots=True)
class Shard:
    """One process of the gate: its slice, report directory, exit status and log."""

    label: str  # "1/3", or "" for an unsharded run
    report_dir: Path
    code: int

    @property
    def log(self) -> Path:
        return self.report_dir / "run.log"

    @property
    def results(self) -> Path:
        return self.report_dir / "results.json"

    def error_line(self) -> str:
        """The shard's ``ERROR:`` line (why it wrote no results), or its last log line."""
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        errors = [line for line in lines if line.startswith("ERROR")]
        return (errors or [line for line in lines if line.strip()] or ["(empty log)"])[-1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} gate",
        description="Run the suite in shards, merge them, post the summary; exit with the "
        "verdict. Other options go to every shard (see completions-conformance --help).",
    )
    parser.add_argument("--shards", type=int, default=1, help="processes at once (default 1)")
    parser.add_argument("--report-dir", type=Path, default=Path("reports/out"))
    parser.add_argument("--baseline", help="results.json of an accepted earlier run")
    parser.add_argument(
        "--args",
        default="",
        metavar="TEXT",
        help="further options as one string, split as a shell splits a command line: quotes "
        "respected, nothing expanded (the Action's args input)",
    )
    parser.add_argument(
        "--summary",
        default=os.environ.get("GITHUB_STEP_SUMMARY") or None,
        help="Markdown file the summary is appended to (default $GITHUB_STEP_SUMMARY)",
    )
    parser.add_argument(
        "--output",
        default=os.environ.get("GITHUB_OUTPUT") or None,
        help="file verdict=, exit-code=, report-dir= are appended to (default $GITHUB_OUTPUT)",
    )
    return parser


def run_shards(run_args: list[str], report_dir: Path, n: int, baseline: str | None) -> list[Shard]:
    """Start every shard at once; wait for all; keep each one's output in its run.log."""
    started = []
    for k in range(1, n + 1):
        out = report_dir / f"shard-{k}" if n > 1 else report_dir
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").unlink(missing_ok=True)  # a stale one would pass for this run
        cmd = [sys.executable, "-m", "conformance", "run", *run_args, "--report-dir", str(out)]
        if n > 1:
            cmd += ["--shard", f"{k}/{n}"]
        elif baseline:
            cmd += ["--baseline", baseline]  # sharded, the merge judges the whole against it
        log = (out / "run.log").open("w", encoding="utf-8")
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        started.append((f"{k}/{n}" if n > 1 else "", out, process, log))
    shards = []
    for label, out, process, log in started:
        code = process.wait()
        log.close()
        shards.append(Shard(label, out, code))
    return shards


def show_logs(shards: list[Shard]) -> None:
    """Each shard's output in the job log, folded per shard on GitHub."""
    folding = os.environ.get("GITHUB_ACTIONS") == "true"
    for shard in shards:
        name = f"shard {shard.label}" if shard.label else "run"
        print(
            f"::group::{name} (exit {shard.code})" if folding else f"--- {name} (exit {shard.code})"
        )
        print(shard.log.read_text(encoding="utf-8", errors="replace"), end="", flush=True)
        if folding:
            print("::endgroup::")


def not_run_summary(shards: list[Shard], total: int, why: str = "") -> str:
    """The job summary when there is no verdict: which shard could not run, and why."""
    from conformance.reports.markdown import cell

    missing = [s for s in shards if not s.results.is_file()]
    lines = [f"## Completions conformance: {NOT_RUN}", ""]
    if missing:
        lines.append(
            f"{len(missing)} of {total} shard(s) wrote no results, so there is no verdict. "
            "The usual cause is a target the suite cannot reach or use (exit 4: wrong URL, "
            "model, key or spec); each shard's `ERROR:` line says which:"
        )
        lines.append("")
        for s in missing:
            name = f"shard {s.label}" if s.label else "the run"
            lines.append(f"- {name}: exit {s.code}: {cell(s.error_line())} (log: {cell(s.log)})")
    if why:
        lines += ["", cell(why)]
    return "\n".join(lines) + "\n"


def merge(shards: list[Shard], report_dir: Path, baseline: str | None) -> tuple[int, str]:
    """``merge`` the shards into report_dir; its exit status and its error line, if any."""
    cmd = [sys.executable, "-m", "conformance", "merge", *(str(s.results) for s in shards)]
    cmd += ["--report-dir", str(report_dir)]
    if baseline:
        cmd += ["--baseline", baseline]
    done = subprocess.run(cmd, capture_output=True, text=True)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    return done.returncode, (errors[-1] if errors else "")


def verdict_of(report_dir: Path) -> str:
    """The verdict word of the run whose results.json is in report_dir."""
    from conformance.reports.compare import load_results
    from conformance.reports.summary import verdict_of as recorded

    return recorded(load_results(report_dir / "results.json")).word


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(text)


def split_args(text: str) -> list[str]:
    """The Action's ``args`` input as words, as a shell user expects: ``--header 'X-Team: my
    team'`` is two words, quotes removed; no variable, glob or command is expanded (the text
    is never given to a shell). ValueError on an unbalanced quote."""
    return shlex.split(text, comments=False, posix=True)


def main(argv: list[str] | None = None) -> int:
    args, run_args = _parser().parse_known_args(argv)
    if args.shards < 1:
        print(f"ERROR: {PROG} gate: --shards {args.shards}: expected 1 or more", file=sys.stderr)
        return BAD_INPUT
    try:
        run_args += split_args(args.args)
    except ValueError as exc:
        print(f"ERROR: {PROG} gate: args {args.args!r}: {exc}", file=sys.stderr)
        _append(args.output, f"verdict=bad-input\nexit-code={BAD_INPUT}\n")
        return BAD_INPUT
    report_dir: Path = args.report_dir
    shards = run_shards(run_args, report_dir, args.shards, args.baseline)
    show_logs(shards)
    summary = ""
    if any(not s.results.is_file() for s in shards):
        word = (
            "bad-input"
            if all(s.code == BAD_INPUT for s in shards if not s.results.is_file())
            else "error"
        )
        summary = not_run_summary(shards, args.shards)
    else:
        why = ""
        if args.shards > 1:
            code, why = merge(shards, report_dir, args.baseline)
        if why:  # the merge refused the shards: no merged report to read
            word, summary = "error", not_run_summary(shards, args.shards, why)
        else:
            word = verdict_of(report_dir)
            summary = (report_dir / "summary.md").read_text(encoding="utf-8")
    code = EXIT_CODES.get(word, ERROR)
    _append(args.summary, summary)
    _append(args.output, f"verdict={word}\nexit-code={code}\nreport-dir={report_dir}\n")
    print(f"{PROG} gate: verdict {word} (exit {code}); reports in {report_dir}")
    return code
