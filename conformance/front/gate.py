"""``completions-conformance gate``: a whole CI gate in one command (the GitHub Action's step).

    completions-conformance gate [--shards N] [--report-dir DIR] [--baseline FILE]
        [--summary FILE] [--output FILE] [--args TEXT] RUN-OPTIONS...

Runs the suite in N shards at once (each ``completions-conformance run --shard K/N`` in a
process and report directory of its own, ``DIR/shard-K``), merges their results into one
report and one verdict in DIR (``merge``), appends DIR/summary.md to the job summary
(``--summary``, default ``$GITHUB_STEP_SUMMARY``) and writes ``verdict=``, ``exit-code=``
and ``report-dir=`` to ``--output`` (default ``$GITHUB_OUTPUT``). A shard that wrote no
results (bad input, an unreachable target: exit 4) is named in the summary with its
``ERROR:`` line, instead of a merge failing on a missing file; input the gate cannot use
(an unbalanced quote in ``--args``) is said there too, so the summary is never empty.
Exits with the verdict's status (verdict.EXIT_CODES); each shard's log is kept as
DIR/shard-K/run.log. Ctrl-C (SIGINT) is passed to every shard, once: each stops and
writes its partial results, which are merged (verdict ``interrupted``, exit 130); a second
Ctrl-C passes on again (the shards quit at once) and the gate quits too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from conformance.front import interrupt, option_table
from conformance.front.arguments import PROG
from conformance.judging.verdict.outcomes import BAD_INPUT, ERROR, EXIT_CODES, INTERRUPTED

#: What a heading says for a run that reached no verdict of its own.
NOT_RUN = "⛔ NOT RUN"
#: Why shards wrote no results, by the gate's word for it (the summary's first sentence).
NO_RESULTS = {
    # Said as the shards' ERROR line says it: a mistyped option is not an unreachable target.
    "bad-input": "The suite refused its input before sending a request (exit 4); each "
    "shard's `ERROR:` line says what was wrong:",
    "interrupted": "The run was interrupted (Ctrl-C) before they wrote any; each shard's "
    "last line:",
    "error": "They ended without a verdict; each shard's `ERROR:` (or last) line says why:",
}


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
    parser = _Parser(
        prog=f"{PROG} gate",
        description="Run the suite in shards, merge them, post the summary; exit with the "
        "verdict. Other options go to every shard (see completions-conformance --help).",
    )
    option_table.add_arguments(parser, option_table.GATE, first=(option_table.SHARDS,))
    return parser


class Shards:
    """The shard processes started so far, for a Ctrl-C to reach: each is in a process
    group of its own, so that a terminal's Ctrl-C reaches the gate alone, and the gate
    passes it on exactly once (twice would make each shard quit at once, without reports)."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []
        self.interrupted = False

    def interrupt(self) -> None:
        """Pass a Ctrl-C on to every shard still running (a signal handler's work)."""
        self.interrupted = True
        for process in self.processes:
            if process.returncode is None:
                with contextlib.suppress(OSError):  # it ended meanwhile
                    process.send_signal(signal.SIGINT)


def run_shards(
    run_args: list[str],
    report_dir: Path,
    n: int,
    baseline: str | None,
    running: Shards | None = None,
) -> list[Shard]:
    """Start every shard at once; wait for all; keep each one's output in its run.log."""
    running = running or Shards()
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
        process = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, text=True, process_group=0
        )
        running.processes.append(process)
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


def not_run_summary(shards: list[Shard], total: int, why: str = "", word: str = "error") -> str:
    """The job summary when there is no verdict: which shard could not run, and why
    (``word``: the gate's word for it, bad-input, interrupted or error)."""
    from conformance.reports.markdown import cell

    missing = [s for s in shards if not s.results.is_file()]
    lines = [f"## Completions conformance: {NOT_RUN}", ""]
    if missing:
        lines.append(
            f"{len(missing)} of {total} shard(s) wrote no results, so there is no verdict. "
            + NO_RESULTS.get(word, NO_RESULTS["error"])
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
    # In a group of its own, as the shards: a Ctrl-C now is the gate's to handle.
    done = subprocess.run(cmd, capture_output=True, text=True, process_group=0)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    return done.returncode, (errors[-1] if errors else "")


def verdict_of(report_dir: Path) -> str:
    """The verdict word of the run whose results.json is in report_dir."""
    from conformance.front.compare import load_results
    from conformance.reports.summary import verdict_of as recorded

    return recorded(load_results(report_dir / "results.json")).word


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(text)


def bad_input_summary(problem: str) -> str:
    """The job summary of input the gate itself could not use: nothing was run."""
    from conformance.reports.markdown import cell

    return (
        f"## Completions conformance: {NOT_RUN}\n\nThe gate's input was refused, so "
        f"nothing was run (exit {BAD_INPUT}): {cell(problem)}\n"
    )


def shared_error(shards: list[Shard]) -> str | None:
    """The one ``ERROR:`` line every shard ended with before writing results (the same
    bad input, seen by each), or None."""
    if any(s.results.is_file() or s.code != BAD_INPUT for s in shards):
        return None
    said = {s.error_line() for s in shards}
    line = said.pop() if len(said) == 1 else ""
    return line if line.startswith("ERROR") else None


def split_args(text: str) -> list[str]:
    """The Action's ``args`` input as words, as a shell user expects: ``--header 'X-Team: my
    team'`` is two words, quotes removed; no variable, glob or command is expanded (the text
    is never given to a shell). ValueError on an unbalanced quote."""
    return shlex.split(text, comments=False, posix=True)


def unbalanced(text: str) -> str:
    """What is wrong with ``args`` that shlex refused, without repeating it: a value in it
    may be a secret (a header's), so only an option's name before the quote is shown."""
    quote, start, i = "", 0, 0
    while i < len(text):  # as a POSIX shell reads quotes
        c = text[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1  # the next character is escaped (in double quotes too, near enough)
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote, start = c, i
        i += 1
    if not quote:
        return "a backslash at the end escapes nothing"
    words = text[:start].split()
    after = f" after {words[-1]}" if words and words[-1].startswith("-") else ""
    return (
        f"an unbalanced quote: the {quote}{after} is never closed (a value with spaces is "
        "written --header 'X-Name: two words')"
    )


class _Parser(argparse.ArgumentParser):
    """The gate's own options; a value it cannot read is bad input, said like any other."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def refuse(args: argparse.Namespace | None, problem: str) -> int:
    """Input the gate cannot use: one ERROR line, and the job summary and outputs say so."""
    print(f"ERROR: {PROG} gate: {problem}", file=sys.stderr)
    summary = args.summary if args else os.environ.get("GITHUB_STEP_SUMMARY")
    output = args.output if args else os.environ.get("GITHUB_OUTPUT")
    _append(summary, bad_input_summary(problem))
    _append(output, f"verdict=bad-input\nexit-code={BAD_INPUT}\n")
    return BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    try:
        args, run_args = _parser().parse_known_args(argv)
    except ValueError as exc:
        return refuse(None, str(exc))
    # The job's own files unless named (GitHub Actions sets both).
    args.summary = _or_env(args.summary, "GITHUB_STEP_SUMMARY")
    args.output = _or_env(args.output, "GITHUB_OUTPUT")
    if args.shards < 1:
        return refuse(args, f"--shards {args.shards}: expected 1 or more")
    try:
        run_args += split_args(args.args)
    except ValueError:
        return refuse(args, f"args: {unbalanced(args.args)}")
    running = Shards()
    # A Ctrl-C goes to the shards (once); the gate goes on to merge what they wrote.
    restore = interrupt.on_sigint(
        interrupt.first_then_quit(
            running.interrupt, again=interrupt.quit_at_once(before=running.interrupt)
        )
    )
    try:
        return _gate(args, run_args, running)
    finally:
        # Interrupted, the process only has to exit: a Ctrl-C now changes nothing.
        if running.interrupted:
            interrupt.ignore()
        else:
            restore()


def _or_env(given: str | None, name: str) -> str | None:
    return given if given is not None else os.environ.get(name) or None


def _gate(args: argparse.Namespace, run_args: list[str], running: Shards) -> int:
    report_dir = Path(args.report_dir)
    shards = run_shards(run_args, report_dir, args.shards, args.baseline, running)
    if (error := shared_error(shards)) is not None:
        print(error, file=sys.stderr)  # the same line from every shard: said once
    else:
        show_logs(shards)
    summary = ""
    if any(not s.results.is_file() for s in shards):
        unwritten = [s for s in shards if not s.results.is_file()]
        if running.interrupted or any(s.code == INTERRUPTED for s in unwritten):
            word = "interrupted"
        elif all(s.code == BAD_INPUT for s in unwritten):
            word = "bad-input"
        else:
            word = "error"
        summary = not_run_summary(shards, args.shards, word=word)
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
