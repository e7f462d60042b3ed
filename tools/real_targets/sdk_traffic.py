"""A user's traffic through the judging proxy: the openai SDK against a running target.

    python tools/real_targets/sdk_traffic.py --url http://127.0.0.1:P --model M \\
        [--spec aihubmix] [--out DIR]        # the key from $CONFORMANCE_API_KEY

Starts ``completions-conformance proxy --upstream URL`` (the command as a user runs it,
with ``--har``), sends through it what an application typically sends with the official
openai SDK (plain and streamed completions, logprobs, echo, stop, n, prompt lists, usage
in the stream, the default max_tokens, a request the document forbids), and one request
without credentials (httpx: the SDK always sends a key), then stops the proxy with
SIGTERM: its reports, verdict.json and session.har are in DIR. Replay the findings with
``tools/real_targets/replay.py DIR/results.json --url URL`` to classify them
(docs/real-targets.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx


def traffic(base: str, key: str, model: str) -> list[str]:
    """The SDK calls; what each one got (a line each)."""
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("plain", {"prompt": "Say hello", "max_tokens": 8}),
        ("default max_tokens", {"prompt": "Say hello"}),
        (
            "temperature 0, seed",
            {"prompt": "Count to three", "max_tokens": 6, "temperature": 0, "seed": 7},
        ),
        ("logprobs", {"prompt": "Say hello", "max_tokens": 5, "logprobs": 2}),
        ("echo", {"prompt": "Say hello", "max_tokens": 5, "echo": True}),
        ("stop", {"prompt": "Say hello", "max_tokens": 8, "stop": ["."]}),
        ("n=2", {"prompt": "Say hello", "max_tokens": 5, "n": 2}),
        ("two prompts", {"prompt": ["Say hello", "Say bye"], "max_tokens": 5}),
        ("stream", {"prompt": "Say hello", "max_tokens": 8, "stream": True}),
        (
            "stream with usage",
            {
                "prompt": "Say hello",
                "max_tokens": 8,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ),
        (
            "stream logprobs",
            {"prompt": "Say hello", "max_tokens": 5, "stream": True, "logprobs": 1},
        ),
        ("stream n=2", {"prompt": "Say hello", "max_tokens": 5, "stream": True, "n": 2}),
        ("forbidden: max_tokens -1", {"prompt": "Say hello", "max_tokens": -1}),
        ("forbidden: n 0", {"prompt": "Say hello", "max_tokens": 5, "n": 0}),
    ]
    lines = []
    for label, kwargs in calls:
        try:
            answer = client.completions.create(model=model, **kwargs)
            if kwargs.get("stream"):
                chunks = list(answer)
                lines.append(f"{label}: {len(chunks)} chunks")
            else:
                texts = [c.text for c in answer.choices]
                lines.append(f"{label}: {texts!r}")
        except openai.APIError as exc:
            lines.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
    keyless = httpx.post(
        base + "/v1/completions", json={"model": model, "prompt": "Hi", "max_tokens": 2}
    )
    lines.append(f"without credentials (httpx): {keyless.status_code}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--spec", default="aihubmix")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sdk-traffic"))
    args = parser.parse_args(argv)
    key = os.environ.get("CONFORMANCE_API_KEY", "")
    args.out.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "conformance",
        "proxy",
        "--upstream",
        args.url,
        "--listen",
        "127.0.0.1:0",
        "--spec",
        args.spec,
        "--report-dir",
        str(args.out),
        "--har",
        str(args.out / "session.har"),
    ]
    print("$", " ".join(command), flush=True)
    proxy = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None
        banner = proxy.stdout.readline()
        print(banner, end="", flush=True)
        base = banner.split(": ", 1)[1].split(" ", 1)[0]
        for line in traffic(base, key, args.model):
            print("  ", line, flush=True)
        proxy.send_signal(signal.SIGTERM)
        out, _ = proxy.communicate(timeout=300)
        print(out, end="")
    finally:
        if proxy.poll() is None:  # this script failed: the proxy still writes its reports
            proxy.send_signal(signal.SIGTERM)
            proxy.wait(300)
    return proxy.returncode


if __name__ == "__main__":
    sys.exit(main())
