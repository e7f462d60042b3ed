"""Run the conformance suite against real third-party servers, all on 127.0.0.1.

    python tools/real_targets/run.py [--work-dir DIR] [--targets a,b,...] [--specs ...]

Installs or builds each server into a work folder outside the repository (default
``/tmp/real-targets``, or ``$REAL_TARGETS_DIR``; cached there, so a second run is fast),
writes a tiny random-weight GGUF model (tiny_model.py; the same model in Hugging Face format,
tiny_hf_model.py, for mlx-lm and FastChat), starts each server on a free port
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

Spec profiles: ``aihubmix`` and ``nscale`` for every target that is not a mock of one
document; ``openai`` (OpenAI's own document) for the LiteLLM targets; ``target`` (the
document the server publishes at ``/openapi.json``) for llama-cpp-python.

Results: ``WORK/results/<target>-<spec>/{results.json,report.html,junit.xml}``, the
server logs beside them, ``WORK/results/matrix.{html,md}`` and ``WORK/results/summary.json``.
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
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay
from procs import (
    Server,
    StepError,
    free_port,
    install_signal_handlers,
    log,
    run_logged,
    stop_all,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# Pinned versions: the doc's findings are about these.
LLAMA_CPP_PYTHON = "0.3.36"
LITELLM = "1.108.7"  # newest whose [proxy] extra resolves on PyPI here (1.108.8+ pin litellm-proxy-extras releases PyPI lacks; avoid 1.107.0, a compromised release)
GGUF = "0.19.0"
PRISM = "5.16.0"
MLX = "0.32.4"  # mlx[cpu]: Linux x86_64 CPU wheels (mlx-cpu) on PyPI
MLX_LM = "0.32.2"
FSCHAT = "0.2.36"
TORCH = "2.13.0"  # CPU wheel
# fschat 0.2.36 (2024) reads config.rope_scaling["factor"] whenever rope_scaling is set;
# transformers 5 always sets it ({"rope_type": "default", ...}) and the worker dies (KeyError).
# Its API server calls pydantic-1 methods (chunk.json(ensure_ascii=False)): under pydantic 2
# every stream dies with a TypeError after the headers. pydantic 1 needs a FastAPI of its time.
FASTCHAT_PINS = ["transformers<4.50", "pydantic<2", "fastapi<0.111"]
HF_MODEL_PACKAGES = ["numpy", "safetensors", "tokenizers", "transformers"]
MLX_MODEL = "default_model"  # mlx-lm's name for the model given by --model

MODEL_ALIAS = "tiny"  # the model name the llama servers and the forwarding proxy serve
MOCK_MODEL = "mock-model"
SPECS = ("aihubmix", "nscale")
# Beyond the vendored two: OpenAI's own document (--spec openai), and the document the
# target publishes itself (--spec target: its /openapi.json, read from the base URL).
ALL_SPECS = (*SPECS, "openai", "target")

# The two llama.cpp compiles took 25-30 min at load 5-40 on 2 shared cores (2026-12-01) and
# were killed at 1500 s / 1800 s: allow an hour each.
PIP_TIMEOUT = 3600.0
BUILD_TIMEOUT = 3600.0
SUITE_TIMEOUT = 900.0


# -- preparation: venvs, builds, the model -------------------------------------------------


@dataclass
class Work:
    root: Path
    python: str = sys.executable
    results_dir: Path | None = None  # default WORK/results; --results-dir keeps earlier runs apart
    # --tuned-concurrency: each target's own --concurrency (a one-slot server at 1). The
    # default is the suite's default, as a user runs it: verdicts must not depend on it.
    tuned_concurrency: bool = False
    # --suite-timeout: how long one suite run may take before it is killed (no results).
    suite_timeout: float = SUITE_TIMEOUT

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def results(self) -> Path:
        return self.results_dir or self.root / "results"

    @property
    def llama_venv(self) -> Path:
        return self.root / "venv-llama"

    @property
    def litellm_venv(self) -> Path:
        return self.root / "venv-litellm"

    @property
    def model(self) -> Path:
        return self.root / "models" / "tiny.gguf"

    @property
    def gguf_venv(self) -> Path:
        return self.root / "venv-gguf"

    @property
    def llama_server_bin(self) -> Path:
        return self.root / f"llama-server-{LLAMA_CPP_PYTHON}" / "build" / "bin" / "llama-server"

    @property
    def mlx_venv(self) -> Path:
        return self.root / "venv-mlx"

    @property
    def fastchat_venv(self) -> Path:
        return self.root / "venv-fastchat"

    @property
    def hf_model_venv(self) -> Path:
        return self.root / "venv-hf-model"

    @property
    def hf_model(self) -> Path:
        return self.root / "models" / "tiny-hf"

    @property
    def prism_bin(self) -> Path:
        return self.root / f"prism-{PRISM}" / "node_modules" / ".bin" / "prism"


def _venv(work: Work, venv: Path, packages: list[str], stamp: str, log_name: str) -> Path:
    """A venv with ``packages``; skipped when ``stamp`` says it is already there."""
    marker = venv / f".installed-{stamp}"
    py = venv / "bin" / "python"
    if marker.exists() and py.exists():
        return py
    if not py.exists():
        run_logged([sys.executable, "-m", "venv", venv], work.logs / log_name, timeout=300)
    run_logged(
        [py, "-m", "pip", "install", "--disable-pip-version-check", *packages],
        work.logs / log_name,
        timeout=PIP_TIMEOUT,
    )
    marker.write_text(" ".join(packages) + "\n")
    return py


def prepare_model(work: Work) -> Path:
    """The gguf package in a small venv of its own (quick), then the tiny model."""
    py = _venv(work, work.gguf_venv, [f"gguf=={GGUF}"], f"gguf-{GGUF}", "install-gguf.log")
    if not work.model.exists():
        run_logged(
            [py, HERE / "tiny_model.py", work.model], work.logs / "tiny-model.log", timeout=300
        )
    return work.model


def prepare_hf_model(work: Work) -> Path:
    """The tiny model again, in the Hugging Face format (tiny_hf_model.py; no torch needed)."""
    if not (work.hf_model / "model.safetensors").exists():
        py = _venv(work, work.hf_model_venv, HF_MODEL_PACKAGES, "hf-model", "install-hf-model.log")
        run_logged(
            [py, HERE / "tiny_hf_model.py", work.hf_model],
            work.logs / "tiny-hf-model.log",
            timeout=300,
        )
    return work.hf_model


def prepare_mlx_lm(work: Work) -> Path:
    """mlx-lm with mlx's CPU build (``mlx[cpu]``: prebuilt Linux x86_64 wheels, no compile)."""
    return _venv(
        work,
        work.mlx_venv,
        [f"mlx[cpu]=={MLX}", f"mlx-lm=={MLX_LM}"],
        f"mlx-lm-{MLX_LM}",
        "install-mlx.log",
    )


def prepare_fastchat(work: Work) -> Path:
    """FastChat (fschat[model_worker]) with the CPU build of torch."""
    return _venv(
        work,
        work.fastchat_venv,
        [f"torch=={TORCH}", f"fschat[model_worker]=={FSCHAT}", *FASTCHAT_PINS],
        f"fastchat-{FSCHAT}",
        "install-fastchat.log",
    )


def prepare_llama_cpp_python(work: Work) -> Path:
    """llama-cpp-python[server], built from its sdist (about 4 minutes; pip caches the wheel)."""
    return _venv(
        work,
        work.llama_venv,
        [f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON}"],
        f"llama-cpp-python-{LLAMA_CPP_PYTHON}",
        "install-llama-cpp-python.log",
    )


def prepare_llama_server(work: Work) -> Path:
    """llama.cpp's llama-server, built with cmake from the vendor tree of the same sdist."""
    binary = work.llama_server_bin
    if binary.exists():
        return binary
    base = binary.parents[2]
    log_path = work.logs / "build-llama-server.log"
    sdist_dir = base / "sdist"
    sdist_dir.mkdir(parents=True, exist_ok=True)
    tarballs = list(sdist_dir.glob("llama_cpp_python-*.tar.gz"))
    if not tarballs:
        run_logged(
            [
                sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                "--no-deps", "--no-binary", ":all:", "-d", sdist_dir,
                f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
            ],
            log_path,
            timeout=PIP_TIMEOUT,
        )  # fmt: skip
        tarballs = list(sdist_dir.glob("llama_cpp_python-*.tar.gz"))
    src = base / "src"
    vendor = src / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    if not vendor.exists():
        with tarfile.open(tarballs[0]) as tar:
            tar.extractall(src, filter="data")
    build = base / "build"
    run_logged(
        [
            "cmake", "-S", vendor, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
            # No web UI: neither built (needs npm) nor fetched prebuilt (needs the internet).
            "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
            "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
        ],
        log_path,
        timeout=600,
    )  # fmt: skip
    jobs = str(os.cpu_count() or 2)
    run_logged(
        ["cmake", "--build", build, "--target", "llama-server", "-j", jobs],
        log_path,
        timeout=BUILD_TIMEOUT,
    )
    if not binary.exists():
        raise StepError(f"the build left no {binary} (log: {log_path})")
    return binary


def prepare_litellm(work: Work) -> Path:
    return _venv(
        work,
        work.litellm_venv,
        [f"litellm[proxy]=={LITELLM}"],
        f"litellm-{LITELLM}",
        "install-litellm.log",
    )


def prepare_prism(work: Work) -> Path:
    binary = work.prism_bin
    if binary.exists():
        return binary
    base = binary.parents[2]
    base.mkdir(parents=True, exist_ok=True)
    (base / "package.json").write_text('{"name": "real-targets-prism", "private": true}\n')
    run_logged(
        ["npm", "install", "--no-audit", "--no-fund", f"@stoplight/prism-cli@{PRISM}"],
        work.logs / "install-prism.log",
        timeout=PIP_TIMEOUT,
        cwd=base,
    )
    return binary


def nscale_for_prism(work: Work) -> Path:
    """specs/nscale.yaml with the `type: object` beside `anyOf` removed (see the doc).

    As written, PromptValue and StopSequence say `type: object` next to an anyOf of string
    and array branches, so no prompt validates and Prism answers every request 400. The
    suite applies the same erratum in code (conformance/spec.py); Prism needs it in the file.
    """
    import yaml

    doc = yaml.safe_load((REPO / "specs" / "nscale.yaml").read_text(encoding="utf-8"))
    patched = []
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        if isinstance(schema, dict) and schema.get("type") == "object" and "anyOf" in schema:
            del schema["type"]
            patched.append(name)
    out = work.root / "specs" / "nscale-prism.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    log(f"prism-nscale: patched copy of specs/nscale.yaml ({', '.join(patched)}) -> {out}")
    return out


# -- targets --------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    needs: tuple[str, ...]  # preparation steps
    specs: tuple[str, ...]
    model: str
    start: Callable[[Work, dict[str, Path], str], list[Server]]
    vocab_size: int | None = None
    version: Callable[[Work], str] = field(default=lambda _w: "?")
    # Called after each suite run, before the servers stop (e.g. to read their logs).
    after: Callable[[Work, list[Server], str], None] | None = None
    # --concurrency for the suite with --tuned-concurrency (None: the suite's default, which is
    # also what every target gets without that flag). llama-cpp-python serves one
    # request at a time and, by default (interrupt_requests), cuts a running stream short
    # when the next request arrives: at the suite's default concurrency (16) 40 of 150
    # requests timed out queueing or were cut (docs/real-targets.md, second re-run).
    concurrency: int | None = None


def _pkg_version(py: Path, dist: str) -> str:
    out = subprocess.run(
        [py, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip() or "?"


def _llama_cpp_python_server(work: Work, prep: dict[str, Path], key: str) -> Server:
    port = free_port()
    return Server(
        "llama-cpp-python",
        [
            prep["llama-cpp-python"], "-m", "llama_cpp.server",
            "--model", prep["model"], "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port),
            "--api_key", key, "--n_ctx", "2048", "--n_threads", "1", "--seed", "0",
        ],
        port=port,
        log_path=work.logs / "server-llama-cpp-python.log",
        ready_path="/v1/models",
        headers={"Authorization": f"Bearer {key}"},
    )  # fmt: skip


def start_llama_cpp_python(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    server = _llama_cpp_python_server(work, prep, key)
    server.start(ready_timeout=120)
    return [server]


def start_llama_server(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    port = free_port()
    server = Server(
        "llama-server",
        [
            prep["llama-server"], "--model", prep["model"], "--alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--api-key", key,
            "--ctx-size", "2048", "--threads", "1", "--parallel", "1", "--no-webui",
        ],
        port=port,
        log_path=work.logs / "server-llama-server.log",
        ready_path="/health",
    )  # fmt: skip
    server.start(ready_timeout=120)
    return [server]


def _litellm_env(key: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        LITELLM_MASTER_KEY=key,
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # no fetch of the cost map at start
        LITELLM_TELEMETRY="False",
        NO_DOCS="True",
        DISABLE_ADMIN_UI="True",
        **extra,
    )
    env.pop("DATABASE_URL", None)
    return env


def _litellm(
    work: Work, prep: dict[str, Path], name: str, config: str, env: dict[str, str]
) -> Server:
    port = free_port()
    litellm = prep["litellm"].parent / "litellm"
    return Server(
        name,
        [litellm, "--config", HERE / config, "--host", "127.0.0.1", "--port", str(port),
         "--num_workers", "1"],
        port=port,
        log_path=work.logs / f"server-{name}.log",
        ready_path="/health/liveliness",
        env=env,
        cwd=work.root,
    )  # fmt: skip


def start_litellm_mock(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    server = _litellm(work, prep, "litellm-mock", "litellm-mock.yaml", _litellm_env(key))
    server.start(ready_timeout=180)
    return [server]


def start_litellm_forward(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    upstream_key = "sk-upstream-" + secrets.token_hex(8)
    upstream = _llama_cpp_python_server(work, prep, upstream_key)
    upstream.name = "llama-cpp-python (upstream of litellm-forward)"
    upstream.log_path = work.logs / "server-litellm-forward-upstream.log"
    upstream.start(ready_timeout=120)
    env = _litellm_env(key, LLAMA_API_BASE=upstream.url + "/v1", LLAMA_API_KEY=upstream_key)
    proxy = _litellm(work, prep, "litellm-forward", "litellm-forward.yaml", env)
    try:
        proxy.start(ready_timeout=180)
    except BaseException:
        upstream.stop()
        raise
    return [proxy, upstream]


def _prism(work: Work, prep: dict[str, Path], name: str, spec: Path) -> list[Server]:
    port = free_port()
    server = Server(
        name,
        [prep["prism"], "mock", spec, "--host", "127.0.0.1", "--port", str(port)],
        port=port,
        log_path=work.logs / f"server-{name}.log",
        ready_path="/",  # Prism answers 404 (no route) once it listens
        cwd=work.root,
    )
    server.start(ready_timeout=120)
    return [server]


def start_prism_aihubmix(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    return _prism(work, prep, "prism-aihubmix", REPO / "specs" / "aihubmix.yaml")


def start_prism_nscale(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    return _prism(work, prep, "prism-nscale", nscale_for_prism(work))


def start_prism_proxy(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    """Prism as a validating proxy (the patched Nscale doc) in front of llama-cpp-python.

    Prism forwards every request unchanged and reports what it finds wrong in each answer
    (its `sl-violations` header and its log): an independent validator to hold the suite's
    schema findings against.
    """
    upstream = _llama_cpp_python_server(work, prep, key)
    upstream.name = "llama-cpp-python (upstream of prism-proxy)"
    upstream.log_path = work.logs / "server-prism-proxy-upstream.log"
    upstream.start(ready_timeout=120)
    port = free_port()
    proxy = Server(
        "prism-proxy",
        [prep["prism"], "proxy", nscale_for_prism(work), upstream.url,
         "--host", "127.0.0.1", "--port", str(port)],
        port=port,
        log_path=work.logs / "server-prism-proxy.log",
        ready_path="/",
        cwd=work.root,
    )  # fmt: skip
    try:
        proxy.start(ready_timeout=120)
    except BaseException:
        upstream.stop()
        raise
    return [proxy, upstream]


def _offline_env(**extra: str) -> dict[str, str]:
    """No model or tokenizer is fetched from a hub at run time: the tiny model is local."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


NICE = ["nice", "-n", "10"]  # the machine is shared: servers yield the CPU to others


def start_mlx_lm(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    """mlx-lm's OpenAI-compatible server on the tiny HF model, on mlx's CPU backend.

    It has no API key option: every request is served with or without credentials.
    """
    port = free_port()
    server = Server(
        "mlx-lm",
        [*NICE, prep["mlx-lm"], "-m", "mlx_lm", "server", "--model", prep["hf-model"],
         "--host", "127.0.0.1", "--port", str(port)],
        port=port,
        log_path=work.logs / "server-mlx-lm.log",
        ready_path="/health",
        env=_offline_env(),
    )  # fmt: skip
    server.start(ready_timeout=180)
    return [server]


def start_fastchat(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    """FastChat: controller, one model worker (the tiny HF model on CPU), OpenAI API server.

    The API server is up before the worker has registered; it is ready once /v1/models
    lists the model.
    """
    py = prep["fastchat"]
    env = _offline_env(PYTHONUNBUFFERED="1")
    c_port, w_port, port = free_port(), free_port(), free_port()
    controller_url = f"http://127.0.0.1:{c_port}"
    controller = Server(
        "fastchat-controller",
        [*NICE, py, "-m", "fastchat.serve.controller", "--host", "127.0.0.1", "--port", str(c_port)],
        port=c_port, log_path=work.logs / "server-fastchat-controller.log",
        ready_path="/", env=env, cwd=work.root,
    )  # fmt: skip
    worker = Server(
        "fastchat-model-worker",
        [*NICE, py, "-m", "fastchat.serve.model_worker", "--model-path", prep["hf-model"],
         "--model-names", MODEL_ALIAS, "--device", "cpu", "--host", "127.0.0.1",
         "--port", str(w_port), "--worker-address", f"http://127.0.0.1:{w_port}",
         "--controller-address", controller_url],
        port=w_port, log_path=work.logs / "server-fastchat-model-worker.log",
        ready_path="/", env=env, cwd=work.root,
    )  # fmt: skip
    api = Server(
        "fastchat",
        [*NICE, py, "-m", "fastchat.serve.openai_api_server", "--host", "127.0.0.1",
         "--port", str(port), "--controller-address", controller_url, "--api-keys", key],
        port=port, log_path=work.logs / "server-fastchat-api.log",
        ready_path="/", env=env, cwd=work.root,
        headers={"Authorization": f"Bearer {key}"},
    )  # fmt: skip
    started: list[Server] = []
    try:
        for server, timeout in ((controller, 120), (worker, 300), (api, 120)):
            server.start(ready_timeout=timeout)
            started.append(server)
        _wait_for_model(api, key, MODEL_ALIAS, timeout=120)
    except BaseException:
        for server in reversed(started):
            server.stop()
        raise
    return [api, worker, controller]


def _wait_for_model(server: Server, key: str, model: str, timeout: float) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    req = urllib.request.Request(
        server.url + "/v1/models", headers={"Authorization": f"Bearer {key}"}
    )
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                if model in resp.read().decode("utf-8", "replace"):
                    return
        except OSError:
            pass
        time.sleep(1)
    raise StepError(f"{server.name}: /v1/models never listed {model!r} (log: {server.log_path})")


def prism_violations(work: Work, servers: list[Server], spec: str) -> None:
    """Tally the violations Prism's log reports, for comparison with the suite's findings."""
    import re
    from collections import Counter

    text = servers[0].log_path.read_text(encoding="utf-8", errors="replace")
    found = Counter(
        re.sub(r"\d+", "N", m.group(1).strip()) for m in re.finditer(r"Violation: (.*)", text)
    )
    out = work.results / f"prism-proxy-{spec}" / "prism-violations.txt"
    lines = [f"{n:5d}  {msg}" for msg, n in found.most_common()]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log(
        f"prism-proxy: {sum(found.values())} violations reported by Prism, {len(found)} kinds -> {out}"
    )
    for line in lines[:8]:
        log(f"prism-proxy:   {line.strip()[:150]}")


def _version_llama_cpp_python(work: Work) -> str:
    return "llama-cpp-python " + _pkg_version(
        work.llama_venv / "bin" / "python", "llama-cpp-python"
    )


def _version_llama_server(work: Work) -> str:
    try:
        out = subprocess.run(
            [work.llama_server_bin, "--version"], capture_output=True, text=True, timeout=60
        )
        lines = (out.stdout + out.stderr).splitlines()
        line = next((x for x in lines if "version" in x), "?")
    except OSError:
        line = "?"
    return (
        f"llama-server ({line.strip()}) from the vendor tree of llama-cpp-python {LLAMA_CPP_PYTHON}"
    )


def _version_litellm(work: Work) -> str:
    return "litellm " + _pkg_version(work.litellm_venv / "bin" / "python", "litellm")


def _version_litellm_forward(work: Work) -> str:
    return f"{_version_litellm(work)} -> {_version_llama_cpp_python(work)}"


def _version_prism(work: Work) -> str:
    try:
        out = subprocess.run(
            [work.prism_bin, "--version"], capture_output=True, text=True, timeout=60
        )
        return "@stoplight/prism-cli " + out.stdout.strip()
    except OSError:
        return "@stoplight/prism-cli ?"


def _version_mlx_lm(work: Work) -> str:
    py = work.mlx_venv / "bin" / "python"
    return f"mlx-lm {_pkg_version(py, 'mlx-lm')} (mlx {_pkg_version(py, 'mlx')}, CPU)"


def _version_fastchat(work: Work) -> str:
    py = work.fastchat_venv / "bin" / "python"
    return (
        f"fschat {_pkg_version(py, 'fschat')} (torch {_pkg_version(py, 'torch')}, "
        f"transformers {_pkg_version(py, 'transformers')}, pydantic {_pkg_version(py, 'pydantic')})"
    )


TARGETS = [
    # Ordered by how soon each is ready on a fresh machine: the pip and npm installs take
    # about a minute; the two llama.cpp builds take several.
    Target("litellm-mock", ("litellm",), (*SPECS, "openai"), MOCK_MODEL, start_litellm_mock,
           version=_version_litellm),
    Target("prism-aihubmix", ("prism",), ("aihubmix",), "any-model", start_prism_aihubmix,
           version=_version_prism),
    Target("prism-nscale", ("prism",), ("nscale",), "any-model", start_prism_nscale,
           version=_version_prism),
    Target("llama-cpp-python", ("model", "llama-cpp-python"), (*SPECS, "target"), MODEL_ALIAS,
           start_llama_cpp_python, vocab_size=512, version=_version_llama_cpp_python,
           concurrency=1),
    Target("litellm-forward", ("model", "llama-cpp-python", "litellm"), (*SPECS, "openai"),
           MODEL_ALIAS,
           start_litellm_forward, vocab_size=512, version=_version_litellm_forward,
           concurrency=1),
    Target("llama-server", ("model", "llama-server"), SPECS, MODEL_ALIAS, start_llama_server,
           vocab_size=512, version=_version_llama_server),
    Target("prism-proxy", ("model", "llama-cpp-python", "prism"), ("nscale",), MODEL_ALIAS,
           start_prism_proxy, vocab_size=512,
           version=lambda w: f"{_version_prism(w)} proxy -> {_version_llama_cpp_python(w)}",
           after=prism_violations, concurrency=1),
    # Not built from source: prebuilt wheels only (mlx-cpu, torch CPU).
    Target("mlx-lm", ("hf-model", "mlx-lm"), SPECS, MLX_MODEL, start_mlx_lm, vocab_size=512,
           version=_version_mlx_lm, concurrency=2),
    Target("fastchat", ("hf-model", "fastchat"), SPECS, MODEL_ALIAS, start_fastchat,
           vocab_size=512, version=_version_fastchat, concurrency=2),
]  # fmt: skip

# The server family each target's transcripts belong to (tests/transcripts/<family>/).
FAMILY = {
    "litellm-mock": "litellm",
    "litellm-forward": "litellm",
    "prism-aihubmix": "prism",
    "prism-nscale": "prism",
    "prism-proxy": "prism",
    "llama-server": "llama.cpp",
}

PREPARE: dict[str, Callable[[Work], Path]] = {
    # Slow CPU-bound steps first: they start at once, in the background.
    "llama-cpp-python": prepare_llama_cpp_python,
    "llama-server": prepare_llama_server,
    "litellm": prepare_litellm,
    "prism": prepare_prism,
    "model": prepare_model,
    "mlx-lm": prepare_mlx_lm,
    "fastchat": prepare_fastchat,
    "hf-model": prepare_hf_model,
}


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
        work.python, "-m", "reports.compare", *[str(path) for _, path in done],
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
