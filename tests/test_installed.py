"""The product as users install it: a built wheel in a fresh venv, run from an empty directory.

The venv holds nothing of the checkout: the wheel is installed into it without its
dependencies, which it finds through a ``.pth`` line naming this interpreter's own
site-packages (no download: tests reach no registry). A ``.pth`` line adds a folder to
``sys.path`` without processing the ``.pth`` files inside it, so the editable install's
line that puts the checkout on ``sys.path`` stays out: a top-level ``reports`` or
``strategies`` cannot be imported there, as on a user's machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest
from support import API_KEY, MODEL

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ("junit.xml", "report.html", "results.json", "summary.md")


class Venv:
    """A fresh venv with the wheel installed, and an empty directory to run it from."""

    def __init__(self, path: Path, empty: Path) -> None:
        self.path, self.empty = path, empty
        self.bin = path / "bin"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
        }

    def run(
        self, *args: str, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=cwd or self.empty, env={**self.env, **env},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    home = tmp_path_factory.mktemp("installed")
    path = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         "--disable-pip-version-check", str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    deps = sysconfig.get_paths()["purelib"]
    Path(purelib, "_dependencies.pth").write_text(deps + "\n", encoding="utf-8")
    empty = home / "empty"
    empty.mkdir()
    return Venv(path, empty)


def _no_traceback(run: subprocess.CompletedProcess[str]) -> str:
    out = run.stdout + run.stderr
    assert "Traceback" not in out, out
    return out


def test_the_venv_holds_nothing_of_the_checkout(venv: Venv) -> None:
    probe = (
        "import sys, importlib.util, conformance;"
        "print(conformance.__file__);"
        "print(importlib.util.find_spec('reports'), importlib.util.find_spec('strategies'));"
        "print('\\n'.join(sys.path))"
    )
    run = venv.run(str(venv.bin / "python"), "-c", probe)
    assert run.returncode == 0, run.stderr
    where, missing, *path = run.stdout.splitlines()
    assert where.startswith(str(venv.path)), where
    assert missing == "None None"  # no top-level reports/strategies to lean on
    # The checkout is not on sys.path (the dependencies' folder may sit inside it: .venv-ci).
    inside = {p for p in path if p and Path(p).resolve().is_relative_to(ROOT)}
    assert inside <= {sysconfig.get_paths()["purelib"]}, path


def test_installed_main_job_passes_with_its_four_reports(venv: Venv) -> None:
    run = venv.run("completions-conformance", "--report-dir", "out", "--max-examples", "2")
    out = _no_traceback(run)
    assert run.returncode == 0, out
    assert "verdict: passed" in run.stdout
    for name in REPORTS:
        assert (venv.empty / "out" / name).stat().st_size > 0, name
    assert json.loads((venv.empty / "out" / "results.json").read_text())["meta"]["verdict"] == (
        "passed"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(venv: Venv, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``completions-conformance ARGS`` in the background, once it answers on its port."""
    port = _free_port()
    proc = subprocess.Popen(
        ["completions-conformance", *args, *(("--port", str(port)) if args[0] == "serve" else
         ("--listen", f"127.0.0.1:{port}"))],
        cwd=venv.empty, env=venv.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{args[0]} did not listen on {port}")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return out


@pytest.mark.exhaustive  # three shards and a served target: about 15 s
def test_installed_action_gate_passes_with_three_shards_and_a_quoted_header(venv: Venv) -> None:
    server, url = _serve(venv, "serve", "--api-key", API_KEY)
    summary, output = venv.empty / "summary.md", venv.empty / "output.txt"
    try:
        run = venv.run(
            str(ROOT / ".github" / "action" / "gate.sh"),
            GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(output),
            TARGET_URL=url, MODEL=MODEL, SHARDS="3", REPORT_DIR="gate",
            CONFORMANCE_API_KEY=API_KEY,
            EXTRA_ARGS="--header 'X-Team: my team' --max-examples 2",
        )  # fmt: skip
    finally:
        _stop(server)
    out = _no_traceback(run)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["verdict"] == "passed" and outputs["exit-code"] == "0", out
    assert "PASSED" in summary.read_text(encoding="utf-8")
    for name in REPORTS:
        assert (venv.empty / "gate" / name).is_file(), name
    assert API_KEY not in out + summary.read_text() + (venv.empty / "gate/report.html").read_text()


@pytest.mark.exhaustive  # a target and a proxy started: about 10 s
def test_installed_proxy_writes_a_har_that_judge_judges(venv: Venv) -> None:
    server, upstream = _serve(venv, "serve", "--api-key", API_KEY)
    try:
        proxy, url = _serve(venv, "proxy", "--upstream", upstream, "--har", "traffic.har",
                            "--report-dir", "proxied")  # fmt: skip
        body = {"model": MODEL, "prompt": "Say hi", "max_tokens": 3}
        auth = {"Authorization": f"Bearer {API_KEY}"}
        with httpx.Client(base_url=url, headers=auth, timeout=30) as client:
            assert client.post("/v1/completions", json=body).status_code == 200
            streamed = client.post("/v1/completions", json={**body, "stream": True})
            assert streamed.text.rstrip().endswith("data: [DONE]")
        proxied = _stop(proxy)
    finally:
        _stop(server)
    assert "Traceback" not in proxied and API_KEY not in proxied, proxied
    assert (venv.empty / "proxied" / "results.json").is_file(), proxied
    run = venv.run("completions-conformance", "judge", "traffic.har", "--report-dir", "judged")
    out = _no_traceback(run)
    assert "2 exchange(s) judged" in out and API_KEY not in out, out
    # Two requests leave most MUSTs unobserved: incomplete, never passed, with its reports.
    assert run.returncode == 7 and "verdict: incomplete" in run.stdout, out
    for name in REPORTS:
        assert (venv.empty / "judged" / name).is_file(), name
