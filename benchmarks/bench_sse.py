"""Benchmark: our SSEParser against the openai SDK's SSE decoder on a recorded stream.

    python benchmarks/bench_sse.py [--runs N] [--json OUT] [--chunk-size BYTES] [--seed S]

Builds, deterministically from a seeded RNG, a /v1/completions event stream of at least
10 MB: mostly small token events, some large ones (~64 KB and ~1 MB of text, logprobs
objects), comment keep-alives and a final ``data: [DONE]``. The body is cut into
socket-sized chunks and fed, on the same list of chunks, to

* (a) ``conformance.judging.wire.sse.SSEParser.feed`` / ``close``, and
* (b) ``openai._streaming.SSEDecoder().iter_bytes(iter(chunks))``, which is exactly how
  ``openai.Stream`` consumes ``response.iter_bytes()``.

Runs alternate A B A B ... Each run reports events/s and MB/s; the summary gives median
and min-max per decoder and the ratio ours/openai of the medians (> 1: ours is faster).
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
from openai._streaming import SSEDecoder

from conformance.judging.wire.sse import SSEParser

MIN_BYTES = 10 * 1024 * 1024

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "it",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
    "or",
    "had",
    "by",
    "word",
    "but",
    "what",
    "some",
    "we",
    "can",
    "out",
    "other",
    "were",
    "all",
    "there",
    "when",
    "up",
    "use",
    "your",
    "how",
    "said",
    "an",
    "each",
    "she",
    "which",
    "do",
    "their",
    "time",
    "if",
    "will",
    "way",
    "about",
    "many",
    "then",
    "them",
    "write",
    "would",
    "café",
    "naïve",
    "façade",
    "über",
    "straße",
    "日本語",
    "テキスト",
    "中文",
    "한국어",
    "Ελληνικά",
    "русский",
    "🙂",
    "🚀",
]


def _chunk(rng: random.Random, created: int, text: str, finish: str | None = None) -> str:
    return json.dumps(
        {
            "id": f"cmpl-{rng.getrandbits(96):024x}",
            "object": "text_completion",
            "created": created,
            "model": "m",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
        },
        separators=(",", ":"),
        ensure_ascii=rng.random() < 0.5,
    )


def _logprobs_chunk(rng: random.Random, created: int, n_tokens: int) -> str:
    tokens = [" " + rng.choice(_WORDS) for _ in range(n_tokens)]
    offsets, pos = [], 0
    for tok in tokens:
        offsets.append(pos)
        pos += len(tok)
    logprobs = {
        "tokens": tokens,
        "token_logprobs": [round(-rng.random() * 5, 6) for _ in tokens],
        "top_logprobs": [
            {" " + rng.choice(_WORDS): round(-rng.random() * 8, 6) for _ in range(5)}
            for _ in tokens
        ],
        "text_offset": offsets,
    }
    return json.dumps(
        {
            "id": f"cmpl-{rng.getrandbits(96):024x}",
            "object": "text_completion",
            "created": created,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "text": "".join(tokens),
                    "logprobs": logprobs,
                    "finish_reason": None,
                }
            ],
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = " " + rng.choice(_WORDS)
        out.append(w)
        n += len(w)
    return "".join(out)


def build_stream(seed: int = 20240501, min_bytes: int = MIN_BYTES) -> tuple[bytes, dict[str, int]]:
    """Return the recorded body and a tally of what it holds."""
    rng = random.Random(seed)
    created = 1_714_000_000
    parts: list[bytes] = []
    size = 0
    tally = {"small": 0, "large_64k": 0, "large_1m": 0, "logprobs": 0, "keepalive": 0}

    def add(payload: str) -> None:
        nonlocal size
        b = b"data: " + payload.encode("utf-8") + b"\n\n"
        parts.append(b)
        size += len(b)

    i = 0
    while size < min_bytes:
        i += 1
        r = rng.random()
        if i % 15_000 == 0:
            add(_chunk(rng, created, _text(rng, 1_000_000)))
            tally["large_1m"] += 1
        elif i % 2_000 == 0:
            add(_chunk(rng, created, _text(rng, 64 * 1024)))
            tally["large_64k"] += 1
        elif r < 0.01:
            add(_logprobs_chunk(rng, created, rng.randint(1, 64)))
            tally["logprobs"] += 1
        elif r < 0.015:
            b = b": keep-alive\n\n"
            parts.append(b)
            size += len(b)
            tally["keepalive"] += 1
        else:
            add(_chunk(rng, created, " " + rng.choice(_WORDS)))
            tally["small"] += 1
        if i % 1000 == 0:
            created += 1
    add(_chunk(rng, created, "", finish="length"))
    tally["small"] += 1
    parts.append(b"data: [DONE]\n\n")
    tally["done"] = 1
    return b"".join(parts), tally


def split(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def run_ours(chunks: list[bytes]) -> int:
    parser = SSEParser()
    n = 0
    for chunk in chunks:
        n += len(parser.feed(chunk, 0.0))
    problem = parser.close()
    assert problem is None, problem
    return n


def run_openai(chunks: list[bytes]) -> int:
    n = 0
    for _ in SSEDecoder().iter_bytes(iter(chunks)):
        n += 1
    return n


def _timed(fn: Callable[[list[bytes]], int], chunks: list[bytes]) -> tuple[float, int]:
    gc.collect()
    t0 = time.perf_counter()
    n = fn(chunks)
    return time.perf_counter() - t0, n


def _payloads_ours(chunks: list[bytes]) -> Iterator[str]:
    parser = SSEParser()
    for chunk in chunks:
        for ev in parser.feed(chunk, 0.0):
            yield ev.data


def _summary(times: list[float], events: int, nbytes: int) -> dict[str, float]:
    eps = [events / t for t in times]
    mbs = [nbytes / t / 1e6 for t in times]
    return {
        "median_s": statistics.median(times),
        "events_per_s_median": statistics.median(eps),
        "events_per_s_min": min(eps),
        "events_per_s_max": max(eps),
        "mb_per_s_median": statistics.median(mbs),
        "mb_per_s_min": min(mbs),
        "mb_per_s_max": max(mbs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__, runs=7)
    ap.add_argument("--chunk-size", type=int, default=4096, help="bytes per chunk (default 4096)")
    ap.add_argument("--seed", type=int, default=20240501)
    args = ap.parse_args(argv)
    runs = max(5, args.runs)

    body, tally = build_stream(args.seed)
    chunks = split(body, args.chunk_size)
    info = bench.machine()
    bench.print_machine(info)
    print(
        f"stream: {len(body):,} bytes ({len(body) / 1e6:.2f} MB) in {len(chunks):,} chunks of "
        f"{args.chunk_size} B; {tally}"
    )

    # Correctness first, untimed: same payloads in the same order.
    ours_data = list(_payloads_ours(chunks))
    theirs_data = [ev.data for ev in SSEDecoder().iter_bytes(iter(chunks))]
    assert ours_data == theirs_data, "decoders disagree on the event payloads"
    n_events = len(ours_data)
    print(f"events: {n_events:,} (identical payloads from both decoders)")

    decoders: dict[str, Callable[[list[bytes]], int]] = {
        "ours": run_ours,
        "openai": run_openai,
    }
    times: dict[str, list[float]] = {name: [] for name in decoders}
    run_ours(chunks)  # warm-up, untimed
    run_openai(chunks)
    for i in range(runs):
        for name, fn in decoders.items():  # A B A B ...
            t, n = _timed(fn, chunks)
            assert n == n_events, f"{name} produced {n} events, expected {n_events}"
            times[name].append(t)
            print(
                f"  run {i + 1:2d} {name:6s} {t * 1000:8.1f} ms  "
                f"{n / t:12,.0f} events/s  {len(body) / t / 1e6:7.1f} MB/s"
            )

    results = {name: _summary(ts, n_events, len(body)) for name, ts in times.items()}
    ratio = results["ours"]["mb_per_s_median"] / results["openai"]["mb_per_s_median"]
    print()
    print(f"{'decoder':8s} {'events/s median (min-max)':>40s} {'MB/s median (min-max)':>30s}")
    for name, r in results.items():
        ev = (
            f"{r['events_per_s_median']:,.0f} "
            f"({r['events_per_s_min']:,.0f}-{r['events_per_s_max']:,.0f})"
        )
        mb = f"{r['mb_per_s_median']:.1f} ({r['mb_per_s_min']:.1f}-{r['mb_per_s_max']:.1f})"
        print(f"{name:8s} {ev:>40s} {mb:>30s}")
    print(f"ratio ours/openai (median throughput): {ratio:.2f}x")

    stream = {"bytes": len(body), "chunks": len(chunks), "chunk_size": args.chunk_size}
    stream.update(events=n_events, seed=args.seed, tally=tally)
    data = {"machine": info, "stream": stream, "runs": runs, "times_s": times}
    data.update(results=results, ratio_ours_over_openai=ratio)
    return bench.finish(args.json, data)


if __name__ == "__main__":
    sys.exit(main())
