"""Tests of the embedded reference target: conformant behaviour, every fault, the SDK.

Conformant behaviour is tested over real sockets (one server per flavor for the module);
the fault catalogue in-process with Starlette's TestClient: each fault has a probe, a
request plus a detector of the one violation it should cause, which must stay silent on
the conformant target and fire on the faulted one.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.types import Message

from conformance.reference import (
    CAPABILITY,
    FAULTS,
    FLAVORS,
    TOLERATED,
    VOCAB_SIZE,
    ReferenceServer,
    check_faults,
    create_app,
)
from conformance.reference import model as fake
from conformance.reference.registry import REGISTRY, STAGES, ActiveFaults, also, fault
from conformance.reference.validation import CONTEXT_LENGTH

KEY = "sk-reference-test"
MODEL = "reference-model"
AUTH = {"Authorization": f"Bearer {KEY}"}
FINISH_REASONS = {"stop", "length", "content_filter"}


def _long_prompt(min_tokens: int = 12) -> str:
    """A prompt whose greedy completion runs at least ``min_tokens`` tokens."""
    for i in range(10_000):
        prompt = f"Probe prompt number {i}"
        completion = fake.generate(fake.Prompt.from_text(prompt), max_tokens=min_tokens)
        if completion.finish_reason == "length":
            return prompt
    raise AssertionError("no long prompt found")


LONG = _long_prompt()
LONG_TEXT = fake.generate(fake.Prompt.from_text(LONG), max_tokens=12).text


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def parse_sse(raw: str) -> list[str]:
    """Data payloads of an event stream (any line ending, optional space, comments)."""
    raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    payloads: list[str] = []
    data: list[str] | None = None
    for line in raw.split("\n"):
        if line == "":
            if data is not None:
                payloads.append("\n".join(data))
            data = None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data = (data or []) + [value[1:] if value.startswith(" ") else value]
    return payloads


def chunks_of(raw: str) -> list[dict[str, Any]]:
    """The JSON chunks of a stream (everything but ``[DONE]``); fails on bad JSON."""
    return [json.loads(p) for p in parse_sse(raw) if p != "[DONE]"]


def stream_texts(chunks: list[dict[str, Any]]) -> dict[int, str]:
    """Joined text per choice index."""
    texts: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
    return texts


def check_logprobs(choice: dict[str, Any], k: int, *, echo_prompt: str | None = None) -> None:
    """Assert the invariants of a non-streamed choice's logprobs object."""
    lp = choice["logprobs"]
    n = len(lp["tokens"])
    assert len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n
    assert "".join(lp["tokens"]) == choice["text"]
    offset = 0
    for token, offset_given in zip(lp["tokens"], lp["text_offset"], strict=True):
        assert offset_given == offset
        offset += len(token)
    for i, (token, logprob, top) in enumerate(
        zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True)
    ):
        if echo_prompt is not None and i == 0:
            assert logprob is None and top is None  # the first echoed token, as on OpenAI
            continue
        assert logprob <= 0
        assert token in top and top[token] == logprob
        assert 1 <= len(top) <= k + 1
        assert all(v <= 0 for v in top.values())


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


#: The vendor flavors these tests tell apart; "openai" has AIHubMix's wire habits and is
#: proven by whole runs (tests/test_spec_source.py).
VENDOR_FLAVORS = sorted(f for f in FLAVORS if f != "openai")


@pytest.fixture(scope="module", params=VENDOR_FLAVORS)
def server(request: pytest.FixtureRequest) -> Iterator[ReferenceServer]:
    with ReferenceServer(request.param, api_key=KEY, models=(MODEL, "other-model")) as srv:
        yield srv


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


Post = Callable[..., httpx.Response]


@pytest.fixture
def post(server: ReferenceServer, http: httpx.Client) -> Post:
    def send(
        body: Any = None, *, headers: dict[str, str] | None = None, raw: bytes | None = None
    ) -> httpx.Response:
        if raw is None:
            raw = json.dumps({"model": MODEL, **(body or {})}).encode()
        merged = {**AUTH, "Content-Type": "application/json", **(headers or {})}
        return http.post(server.url + "/v1/completions", content=raw, headers=merged)

    return send


def complete(post: Post, **body: Any) -> dict[str, Any]:
    response = post(body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


# --------------------------------------------------------------------------------------
# Conformant behaviour, both flavors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "prompts", "prompt_tokens"),
    [
        ("Hello there", ["Hello there"], 2),
        (["one", "two two", ""], ["one", "two two", ""], 3),
        ([5, 6, 7], [fake.decode([5, 6, 7])], 3),
        (
            [[1, 2], [3], [0, 999]],
            [fake.decode([1, 2]), fake.decode([3]), fake.decode([0, 999])],
            5,
        ),
    ],
    ids=["string", "strings", "tokens", "token-lists"],
)
def test_prompt_forms_give_n_choices_per_prompt_in_index_order(
    post: Post, prompt: Any, prompts: list[str], prompt_tokens: int
) -> None:
    body = complete(post, prompt=prompt, n=2, echo=True, max_tokens=3, temperature=0)
    choices = body["choices"]
    assert [c["index"] for c in choices] == list(range(2 * len(prompts)))
    for c in choices:
        assert c["text"].startswith(prompts[c["index"] // 2])
        assert c["finish_reason"] in FINISH_REASONS
    assert body["usage"]["prompt_tokens"] == prompt_tokens


def test_response_envelope_fields(post: Post) -> None:
    before = int(time.time())
    body = complete(post, prompt="Hi", max_tokens=2)
    assert body["id"].startswith("cmpl-") and len(body["id"]) > 5
    assert body["object"] == "text_completion"
    assert before <= body["created"] <= int(time.time()) + 1
    assert body["model"] == MODEL
    assert body["system_fingerprint"] == "fp_reference"


def test_usage_counts_prompts_once_and_returned_tokens(post: Post) -> None:
    body = complete(post, prompt=["a b c", "d"], n=3, max_tokens=4, logprobs=0, echo=True)
    usage = body["usage"]
    assert usage["prompt_tokens"] == 4
    completion = sum(len(c["logprobs"]["tokens"]) for c in body["choices"]) - 3 * 4
    assert usage["completion_tokens"] == completion
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_max_tokens_bounds_completion_and_finish_is_length(post: Post) -> None:
    body = complete(post, prompt=LONG, max_tokens=5, temperature=0)
    assert body["usage"]["completion_tokens"] == 5
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["text"] == "".join(fake.tokenize(LONG_TEXT)[:5])


def test_max_tokens_zero_returns_empty_text(post: Post) -> None:
    body = complete(post, prompt="Hi there", max_tokens=0)
    assert body["choices"][0]["text"] == ""
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 0
    echoed = complete(post, prompt="Hi there", max_tokens=0, echo=True)
    assert echoed["choices"][0]["text"] == "Hi there"


def test_natural_stop_ends_with_stop(post: Post) -> None:
    body = complete(post, prompt="short", max_tokens=200, temperature=0, n=1)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] < 200


def test_stop_cuts_before_the_earliest_occurrence(post: Post) -> None:
    word = fake.tokenize(LONG_TEXT)[4]
    body = complete(post, prompt=LONG, max_tokens=12, temperature=0, stop=["zzz", word])
    choice = body["choices"][0]
    assert choice["text"] == LONG_TEXT[: LONG_TEXT.index(word)]
    assert word not in choice["text"]
    assert choice["finish_reason"] == "stop"
    # A stop string starting inside a token cuts that token, logprobs included.
    partial = word[2:] + fake.tokenize(LONG_TEXT)[5][:2]
    body = complete(post, prompt=LONG, max_tokens=12, temperature=0, stop=partial, logprobs=1)
    choice = body["choices"][0]
    assert choice["text"] == LONG_TEXT[: LONG_TEXT.index(partial)]
    check_logprobs(choice, 1)


def test_echo_returns_prompt_then_completion(post: Post) -> None:
    plain = complete(post, prompt=LONG, max_tokens=3, temperature=0)["choices"][0]["text"]
    echoed = complete(post, prompt=LONG, max_tokens=3, temperature=0, echo=True)["choices"][0]
    assert echoed["text"] == LONG + plain
    tokens = complete(post, prompt=[7, 8], max_tokens=0, echo=True)["choices"][0]
    assert tokens["text"] == fake.decode([7, 8])


@pytest.mark.parametrize("k", [0, 2, 5])
def test_logprobs_invariants(post: Post, k: int) -> None:
    body = complete(post, prompt=LONG, max_tokens=6, logprobs=k, n=2)
    for choice in body["choices"]:
        check_logprobs(choice, k)
    echoed = complete(post, prompt=LONG, max_tokens=6, logprobs=k, echo=True)
    check_logprobs(echoed["choices"][0], k, echo_prompt=LONG)


def test_logprobs_absent_unless_requested(post: Post, server: ReferenceServer) -> None:
    choice = complete(post, prompt="Hi", max_tokens=2)["choices"][0]
    if server.flavor == "nscale":
        assert "logprobs" not in choice  # non-nullable in the Nscale schema: omitted
    else:
        assert choice["logprobs"] is None


def test_best_of_returns_the_n_best_candidates(post: Post) -> None:
    common = {
        "prompt": "Pick the best",
        "max_tokens": 6,
        "seed": 11,
        "logprobs": 0,
        "temperature": 1.0,
    }
    all_three = complete(post, n=3, **common)["choices"]

    def mean(choice: dict[str, Any]) -> float:
        values = choice["logprobs"]["token_logprobs"]
        return sum(values) / len(values) if values else -2.302585092994046

    best = max(all_three, key=mean)
    picked = complete(post, n=1, best_of=3, **common)["choices"]
    assert [c["index"] for c in picked] == [0]
    assert picked[0]["text"] == best["text"]


def test_seed_makes_sampling_reproducible(post: Post) -> None:
    common = {"prompt": "Seeded", "max_tokens": 8, "seed": 42, "temperature": 1.3, "n": 2}
    first = [c["text"] for c in complete(post, **common)["choices"]]
    second = [c["text"] for c in complete(post, **common)["choices"]]
    assert first == second


def test_temperature_zero_is_deterministic_across_choices(post: Post) -> None:
    texts = {c["text"] for c in complete(post, prompt=LONG, n=3, temperature=0)["choices"]}
    assert len(texts) == 1


def test_suffix_is_accepted(post: Post) -> None:
    assert post({"prompt": "def f(", "suffix": "):", "max_tokens": 2}).status_code == 200


def test_unknown_fields_are_ignored(post: Post) -> None:
    assert (
        post({"prompt": "Hi", "max_tokens": 1, "frobnicate": [1, {"x": None}]}).status_code == 200
    )


def test_null_optional_fields(post: Post, server: ReferenceServer) -> None:
    response = post({"prompt": "Hi", "max_tokens": None, "n": None, "stop": None, "logprobs": None})
    # AIHubMix declares these nullable (null means the default); Nscale does not.
    assert response.status_code == (200 if server.flavor == "aihubmix" else 400)


# --- streaming -------------------------------------------------------------------------


def test_stream_framing_and_include_usage(post: Post, server: ReferenceServer) -> None:
    response = post(
        {
            "prompt": ["one", "two"],
            "n": 2,
            "max_tokens": 4,
            "logprobs": 1,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == "text/event-stream"
    raw = response.text
    assert raw.startswith("data: ") and raw.endswith("data: [DONE]\n\n")
    payloads = parse_sse(raw)
    assert payloads.count("[DONE]") == 1 and payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert len({c["id"] for c in chunks}) == 1 and len({c["created"] for c in chunks}) == 1
    assert all(c["object"] == "text_completion" and c["model"] == MODEL for c in chunks)
    *content, usage_chunk = chunks
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    finishes: dict[int, list[str]] = {}
    for chunk in content:
        assert len(chunk["choices"]) == 1
        if server.flavor == "nscale":
            assert "usage" not in chunk
        else:
            assert chunk["usage"] is None
        choice = chunk["choices"][0]
        lp = choice["logprobs"]
        assert "".join(lp["tokens"]) == choice["text"]
        if choice.get("finish_reason") is not None:
            finishes.setdefault(choice["index"], []).append(choice["finish_reason"])
    assert sorted(finishes) == [0, 1, 2, 3]
    assert all(len(f) == 1 and f[0] in FINISH_REASONS for f in finishes.values())
    # The finish chunk of each index is its last.
    last_index_chunk = {c["choices"][0]["index"]: c for c in content}
    assert all(c["choices"][0].get("finish_reason") for c in last_index_chunk.values())


def test_non_final_chunks_null_or_omit_finish_reason(post: Post, server: ReferenceServer) -> None:
    # Temperature 0: a sampled early "stop" would make the last assertion flaky.
    body = {"prompt": LONG, "max_tokens": 4, "stream": True, "temperature": 0}
    chunks = chunks_of(post(body).text)
    for chunk in chunks[:-1]:
        choice = chunk["choices"][0]
        if server.flavor == "nscale":
            assert "finish_reason" not in choice and "logprobs" not in choice
        else:
            assert choice["finish_reason"] is None and choice["logprobs"] is None
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_stream_text_equals_non_streamed_text(post: Post) -> None:
    common = {"prompt": [LONG, "other"], "n": 2, "max_tokens": 6, "temperature": 0, "echo": True}
    body = complete(post, **common)
    response = post({**common, "stream": True})
    assert stream_texts(chunks_of(response.text)) == {
        c["index"]: c["text"] for c in body["choices"]
    }


def test_a_non_ascii_prompt_is_answered_with_accented_words(post: Post) -> None:
    # Multi-byte UTF-8 in answers, for a stream to break (fault stream-utf8-replaced); the
    # tokens are the ASCII prompt's, respelled, so the stream still equals the body.
    plain = complete(post, prompt="Describe the Rhone:", max_tokens=8, temperature=0)
    accented = complete(post, prompt="Describe the Rhône:", max_tokens=8, temperature=0)
    assert plain["choices"][0]["text"].isascii()
    assert not accented["choices"][0]["text"].isascii()
    response = post(
        {"prompt": "Describe the Rhône:", "max_tokens": 8, "temperature": 0, "stream": True}
    )
    assert stream_texts(chunks_of(response.text)) == {0: accented["choices"][0]["text"]}


def test_stream_echo_comes_first(post: Post) -> None:
    response = post({"prompt": LONG, "max_tokens": 2, "echo": True, "stream": True})
    first = chunks_of(response.text)[0]
    assert first["choices"][0]["text"] == LONG


def test_stream_without_include_usage_has_no_usage(post: Post) -> None:
    chunks = chunks_of(post({"prompt": "Hi", "max_tokens": 3, "stream": True}).text)
    assert all(c["choices"] for c in chunks)
    assert all(c.get("usage") is None for c in chunks)


# --- errors, auth, headers -----------------------------------------------------------------

COMMON_INVALID: list[tuple[dict[str, Any], str]] = [
    ({"prompt": "x", "n": 0}, "n"),
    ({"prompt": "x", "n": True}, "n"),
    ({"prompt": "x", "n": 1.5}, "n"),
    ({"prompt": "x", "max_tokens": "5"}, "max_tokens"),
    ({"prompt": "x", "logprobs": -1}, "logprobs"),
    ({"prompt": "x", "logprobs": 6}, "logprobs"),
    ({"prompt": "x", "best_of": -1}, "best_of"),
    ({"prompt": "x", "best_of": 1, "n": 2}, "best_of"),
    ({"prompt": "x", "best_of": 2, "stream": True}, "best_of"),
    ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
    ({"prompt": "x", "stream": "yes"}, "stream"),
    ({"prompt": "x", "echo": 1}, "echo"),
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "temperature": -0.5}, "temperature"),
    ({"prompt": "x", "top_p": 1.5}, "top_p"),
    ({"prompt": "x", "stop": 5}, "stop"),
    ({"prompt": "x", "stop": ["a", 1]}, "stop"),
    ({"prompt": "x", "suffix": 3}, "suffix"),
    ({"prompt": "x", "seed": 2**64}, "seed"),
    ({"prompt": "x", "logit_bias": [1]}, "logit_bias"),
    ({"prompt": [1, VOCAB_SIZE]}, "prompt"),
    ({"prompt": [-1]}, "prompt"),
    ({"prompt": [[1], []]}, "prompt"),
    ({"prompt": [1, "a"]}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": True}, "prompt"),
    ({}, "prompt"),
]
AIHUBMIX_ONLY_INVALID: list[tuple[dict[str, Any], str]] = [
    ({"prompt": "x", "max_tokens": -1}, "max_tokens"),
    ({"prompt": "x", "temperature": 2.5}, "temperature"),
    ({"prompt": "x", "presence_penalty": -3}, "presence_penalty"),
    ({"prompt": "x", "frequency_penalty": 2.1}, "frequency_penalty"),
    ({"prompt": "x", "n": 129}, "n"),
    ({"prompt": "x", "best_of": 21}, "best_of"),
    ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"prompt": "x", "stop": []}, "stop"),
    ({"prompt": "x", "logit_bias": {"1": 0.5}}, "logit_bias"),
    ({"prompt": "x", "user": 7}, "user"),
]


def check_envelope(response: httpx.Response, flavor: str, status: int, param: str | None) -> None:
    """Assert status, media type and the flavor's error envelope."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    if flavor == "nscale":
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert isinstance(error["code"], str) and isinstance(error["error_type"], str)
        assert error.get("param") == param
        assert None not in error.values()
    else:
        assert response.headers["content-type"] == "application/json"
        assert set(error) == {"message", "type", "param", "code"}
        assert error["param"] == param


@pytest.mark.parametrize(
    ("body", "param"), COMMON_INVALID, ids=[f"{p}-{i}" for i, (_, p) in enumerate(COMMON_INVALID)]
)
def test_invalid_requests_get_400_naming_the_field(
    post: Post, server: ReferenceServer, body: dict[str, Any], param: str
) -> None:
    check_envelope(post(body), server.flavor, 400, param)


@pytest.mark.parametrize(
    ("body", "param"), AIHUBMIX_ONLY_INVALID, ids=[p for _, p in AIHUBMIX_ONLY_INVALID]
)
def test_aihubmix_schema_bounds(
    post: Post, server: ReferenceServer, body: dict[str, Any], param: str
) -> None:
    if server.flavor == "aihubmix":
        check_envelope(post(body), "aihubmix", 400, param)
    elif param not in ("n", "best_of", "user", "stop"):
        assert post({**body, "max_tokens": 1}).status_code == 200  # Nscale declares no bound


def test_negative_max_tokens_is_no_limit_where_the_spec_sets_no_minimum(
    post: Post, server: ReferenceServer
) -> None:
    if server.flavor == "aihubmix":  # its schema sets max_tokens >= 0
        check_envelope(post({"prompt": LONG, "max_tokens": -1}), "aihubmix", 400, "max_tokens")
        return
    body = complete(post, prompt=LONG, max_tokens=-1, temperature=0)
    default = complete(post, prompt=LONG, temperature=0)
    assert body["choices"][0]["text"] == default["choices"][0]["text"]
    assert body["usage"]["completion_tokens"] == default["usage"]["completion_tokens"] <= 16


@pytest.mark.parametrize(
    "raw", [b"not json", b"[1, 2]", b'"text"', b"", b'{"model": "reference-model", "prompt": NaN}']
)
def test_bodies_that_are_not_json_objects(post: Post, server: ReferenceServer, raw: bytes) -> None:
    check_envelope(post(raw=raw), server.flavor, 400, None)


def test_context_length_is_enforced(post: Post, server: ReferenceServer) -> None:
    long_prompt = " word" * 8190
    check_envelope(post({"prompt": long_prompt}), server.flavor, 400, "prompt")
    check_envelope(post({"prompt": "x", "max_tokens": 10**9}), server.flavor, 400, "max_tokens")


def test_too_many_completions_is_400(post: Post, server: ReferenceServer) -> None:
    check_envelope(post({"prompt": ["x"] * 21, "n": 128}), server.flavor, 400, "n")


def test_missing_model_is_400(post: Post, server: ReferenceServer) -> None:
    check_envelope(post(raw=b'{"prompt": "x"}'), server.flavor, 400, "model")


def test_unknown_model_is_404(post: Post, server: ReferenceServer) -> None:
    check_envelope(post({"model": "no-such-model", "prompt": "x"}), server.flavor, 404, "model")
    assert post({"model": "other-model", "prompt": "x", "max_tokens": 1}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": ""},
        {"Authorization": f"Token {KEY}"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong"},
    ],
    ids=["empty", "scheme", "no-token", "wrong-key"],
)
def test_bad_credentials_are_401(
    post: Post, server: ReferenceServer, headers: dict[str, str]
) -> None:
    check_envelope(post({"prompt": "x"}, headers=headers), server.flavor, 401, None)


def test_missing_credentials_are_401(server: ReferenceServer, http: httpx.Client) -> None:
    response = http.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": "x"})
    check_envelope(response, server.flavor, 401, None)
    assert response.headers["www-authenticate"] == "Bearer"


def test_request_id_header_on_every_response(
    post: Post, server: ReferenceServer, http: httpx.Client
) -> None:
    name = FLAVORS[server.flavor].request_id_header
    responses = [
        post({"prompt": "x", "max_tokens": 1}),
        post({"prompt": "x", "max_tokens": 1, "stream": True}),
        post({"prompt": "x", "n": 0}),
        post({"prompt": "x"}, headers={"Authorization": "Bearer nope"}),
        http.get(server.url + "/nowhere"),
    ]
    for response in responses:
        assert response.headers.get(name, "").startswith("req_")


def test_content_types(post: Post, server: ReferenceServer) -> None:
    flavor = FLAVORS[server.flavor]
    assert post({"prompt": "x", "max_tokens": 1}).headers["content-type"] == flavor.json_type
    streamed = post({"prompt": "x", "max_tokens": 1, "stream": True})
    assert streamed.headers["content-type"] == flavor.sse_type


def test_models_endpoint(server: ReferenceServer, http: httpx.Client) -> None:
    listing = http.get(server.url + "/v1/models", headers=AUTH).json()
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == [MODEL, "other-model"]
    assert http.get(server.url + "/v1/models").status_code == 401
    assert http.get(server.url + f"/v1/models/{MODEL}", headers=AUTH).json()["id"] == MODEL
    assert http.get(server.url + "/v1/models/nope", headers=AUTH).status_code == 404


def test_wrong_method_and_path_get_envelopes(server: ReferenceServer, http: httpx.Client) -> None:
    check_envelope(http.get(server.url + "/v1/completions"), server.flavor, 405, None)
    check_envelope(http.post(server.url + "/v2/completions"), server.flavor, 404, None)


# --- the official SDK ------------------------------------------------------------------------


def test_openai_sdk_reads_non_streamed_responses(server: ReferenceServer) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    completion = client.completions.create(
        model=MODEL, prompt=["Say this", "and that"], n=2, logprobs=2, echo=True, max_tokens=4
    )
    assert completion.object == "text_completion"
    assert [c.index for c in completion.choices] == [0, 1, 2, 3]
    for choice in completion.choices:
        assert choice.finish_reason in FINISH_REASONS
        assert choice.logprobs is not None and choice.logprobs.tokens is not None
        assert "".join(choice.logprobs.tokens) == choice.text
        assert choice.logprobs.top_logprobs is not None
    assert completion.usage is not None
    assert (
        completion.usage.total_tokens
        == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert [m.id for m in client.models.list()] == [MODEL, "other-model"]
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="x", n=0)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url=server.url + "/v1", api_key="wrong", max_retries=0
        ).completions.create(model=MODEL, prompt="x")


def test_openai_sdk_reads_streams(server: ReferenceServer) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    common: dict[str, Any] = {
        "model": MODEL,
        "prompt": LONG,
        "n": 2,
        "logprobs": 2,
        "echo": True,
        "max_tokens": 5,
        "temperature": 0,
    }
    stream = client.completions.create(
        stream=True, stream_options={"include_usage": True}, **common
    )
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    usage = None
    for chunk in stream:
        assert chunk.object == "text_completion"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
            if choice.finish_reason is not None:
                finishes[choice.index] = choice.finish_reason
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert set(finishes) == {0, 1}
    plain = client.completions.create(**common)
    assert texts == {c.index: c.text for c in plain.choices}


# --------------------------------------------------------------------------------------
# The fault switch
# --------------------------------------------------------------------------------------


def test_unknown_fault_names_are_refused() -> None:
    with pytest.raises(ValueError, match=r"valid faults: .*status-201"):
        create_app(faults=frozenset({"no-such-fault"}))
    with pytest.raises(ValueError, match="no-such-fault"):
        ReferenceServer(faults=frozenset({"no-such-fault"}))
    with pytest.raises(ValueError, match="flavor"):
        create_app("gpt")
    assert check_faults(["status-201"]) == {"status-201"}


def test_catalogue_shape() -> None:
    assert set(TOLERATED) <= set(FAULTS)
    assert CAPABILITY <= TOLERATED
    assert all(isinstance(d, str) and d and "\n" not in d for d in FAULTS.values())


class Probe:
    """A request against an in-process app plus what the response would look like."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.client = TestClient(app, raise_server_exceptions=False)

    def post(self, body: dict[str, Any] | None = None, *, auth: bool = True, **fields: Any) -> Any:
        payload = {
            "model": MODEL,
            "prompt": LONG,
            "max_tokens": 5,
            "temperature": 0,
            **(body or {}),
            **fields,
        }
        return self.client.post("/v1/completions", json=payload, headers=AUTH if auth else {})

    def json(self, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.post(**fields).json()
        return result

    def stream(self, **fields: Any) -> str:
        text: str = self.post(stream=True, **fields).text
        return text

    def chunks(self, **fields: Any) -> list[Any]:
        """Stream payloads, JSON-decoded where they are JSON."""
        out: list[Any] = []
        for payload in parse_sse(self.stream(**fields)):
            try:
                out.append(json.loads(payload))
            except ValueError:
                out.append(payload)
        return out

    def asgi_body(self, body: dict[str, Any], timeout: float = 2.0) -> tuple[list[bytes], bool]:
        """The body messages the app sends for a request, and whether it timed out."""
        return asyncio.run(_asgi_body(self.app, body, timeout))


async def _asgi_body(
    app: Starlette, body: dict[str, Any], timeout: float
) -> tuple[list[bytes], bool]:
    data = json.dumps({"model": MODEL, **body}).encode()
    pieces: list[bytes] = []
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": data, "more_body": False}
        await asyncio.sleep(3600)  # the client never disconnects
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            pieces.append(message["body"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/completions",
        "raw_path": b"/v1/completions",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"content-type", b"application/json"),
            (b"authorization", AUTH["Authorization"].encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    try:
        await asyncio.wait_for(app(scope, receive, send), timeout)
    except TimeoutError:
        return pieces, True
    return pieces, False


def _content(items: list[Any]) -> list[dict[str, Any]]:
    return [c for c in items if isinstance(c, dict) and c.get("choices")]


def _finishes(items: list[Any]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for chunk in _content(items):
        choice = chunk["choices"][0]
        if choice.get("finish_reason") is not None:
            out.setdefault(choice["index"], []).append(choice["finish_reason"])
    return out


def _lp(p: Probe, k: int = 2, **fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = p.json(logprobs=k, **fields)["choices"][0]["logprobs"]
    return result


def _usage_chunks(items: list[Any]) -> list[int]:
    return [
        i
        for i, c in enumerate(items)
        if isinstance(c, dict) and c.get("choices") == [] and "usage" in c
    ]


def _text_after_finish(items: list[Any]) -> bool:
    finished: set[int] = set()
    for chunk in _content(items):
        choice = chunk["choices"][0]
        if choice["index"] in finished and choice["text"]:
            return True
        if choice.get("finish_reason") is not None:
            finished.add(choice["index"])
    return False


def _every_third_limited(p: Probe) -> bool:
    responses = [p.post() for _ in range(3)]
    return any(r.status_code == 429 and r.headers.get("retry-after") == "0" for r in responses)


def _fails_to_decode(post: Callable[[], Any]) -> bool:
    """The test client, which honours Content-Encoding, cannot decode the answer."""
    try:
        post()
    except Exception as exc:  # httpx's DecodingError, under whichever httpx the client uses
        return "decompressing" in str(exc)
    return False


def _is_envelope(response: Any) -> bool:
    try:
        error = response.json().get("error")
    except ValueError:
        return False
    return isinstance(error, dict) and isinstance(error.get("message"), str)


STOP_WORD = fake.tokenize(LONG_TEXT)[3]
#: The end of the third token and the start of the fourth: a stop across a token boundary.
STOP_ACROSS = fake.tokenize(LONG_TEXT)[2][-2:] + fake.tokenize(LONG_TEXT)[3][:3]
INCLUDE_USAGE = {"stream_options": {"include_usage": True}}

#: fault -> detector of the violation it causes; True means "violation observed".
PROBES: dict[str, Callable[[Probe], bool]] = {
    "status-201": lambda p: p.post().status_code == 201,
    "stream-status-201": lambda p: (
        p.post(stream=True).status_code == 201 and p.post().status_code == 200
    ),
    "json-content-type-text": lambda p: p.post().headers["content-type"].startswith("text/plain"),
    "schema-choices-not-array": lambda p: not isinstance(p.json()["choices"], list),
    "missing-request-id-header": lambda p: "x-request-id" not in p.post().headers,
    "object-chunk": lambda p: p.json()["object"] != "text_completion",
    "created-millis": lambda p: p.json()["created"] > time.time() * 100,
    "empty-id": lambda p: p.json()["id"] == "",
    "choice-text-null": lambda p: any(c["text"] is None for c in p.json()["choices"]),
    "choices-ignore-n": lambda p: len(p.json(n=3)["choices"]) != 3,
    "duplicate-index": lambda p: [c["index"] for c in p.json(n=2)["choices"]] != [0, 1],
    "usage-arithmetic": lambda p: (
        lambda u: u["total_tokens"] != u["prompt_tokens"] + u["completion_tokens"]
    )(p.json()["usage"]),
    "usage-prompt-zero": lambda p: (
        lambda u: (
            u["prompt_tokens"] == 0
            and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
        )
    )(p.json()["usage"]),
    "usage-completion-short": lambda p: (
        lambda b: (
            b["usage"]["completion_tokens"] == 0
            and b["choices"][0]["text"] != ""
            and b["usage"]["total_tokens"] == b["usage"]["prompt_tokens"]
        )
    )(p.json()),
    "usage-missing": lambda p: "usage" not in p.json(),
    "null-fields": lambda p: (lambda c: "logprobs" in c and c["logprobs"] is None)(
        p.json()["choices"][0]
    ),
    "exceed-max-tokens": lambda p: p.json(max_tokens=2)["usage"]["completion_tokens"] > 2,
    "finish-not-length": lambda p: p.json(max_tokens=2)["choices"][0]["finish_reason"] != "length",
    "finish-enum": lambda p: p.json()["choices"][0]["finish_reason"] not in FINISH_REASONS,
    "echo-ignored": lambda p: not p.json(echo=True)["choices"][0]["text"].startswith(LONG),
    "logprobs-ignored": lambda p: p.json(logprobs=2)["choices"][0]["logprobs"] is None,
    "logprobs-unrequested": lambda p: p.json()["choices"][0]["logprobs"] is not None,
    "logprobs-length-mismatch": lambda p: (lambda lp: len(lp["text_offset"]) != len(lp["tokens"]))(
        _lp(p)
    ),
    "logprobs-positive": lambda p: any(v > 0 for v in _lp(p)["token_logprobs"]),
    "top-logprobs-extra": lambda p: any(len(t) > 3 for t in _lp(p, 2)["top_logprobs"]),
    "text-offset-decreasing": lambda p: (lambda o: o != sorted(o))(_lp(p)["text_offset"]),
    "tokens-mismatch-text": lambda p: (lambda c: "".join(c["logprobs"]["tokens"]) != c["text"])(
        p.json(logprobs=1)["choices"][0]
    ),
    "logprobs-chat-shape": lambda p: "tokens" not in _lp(p),
    "stop-in-text": lambda p: (
        STOP_WORD in p.json(max_tokens=12, stop=STOP_WORD)["choices"][0]["text"]
    ),
    "stop-ignored": lambda p: (
        p.json(max_tokens=12, stop=[STOP_WORD])["choices"][0]["finish_reason"] != "stop"
    ),
    "stop-inside-one-token": lambda p: (
        STOP_ACROSS in p.json(max_tokens=12, stop=[STOP_ACROSS])["choices"][0]["text"]
        and p.json(max_tokens=12, stop=[STOP_WORD])["choices"][0]["finish_reason"] == "stop"
    ),
    "capability-500": lambda p: p.post(echo=True).status_code >= 500,
    "accepts-invalid": lambda p: (
        p.post(n=0).status_code == 200 and p.post(prompt=[VOCAB_SIZE]).status_code == 200
    ),
    "reject-token-prompts": lambda p: p.post(prompt=[1, 2, 3]).status_code == 400,
    "context-window-ignored": lambda p: (
        lambda r: (
            r.status_code == 200
            and r.json()["choices"][0]["text"] == ""
            and r.json()["choices"][0]["finish_reason"] == "length"
        )
    )(p.post(prompt=[15] * (CONTEXT_LENGTH + 1), max_tokens=1)),
    "models-no-window": lambda p: (
        "max_model_len" not in p.client.get("/v1/models", headers=AUTH).json()["data"][0]
        and p.post(prompt=[15] * (CONTEXT_LENGTH + 1), max_tokens=1).status_code == 400
    ),
    "stream-no-done": lambda p: parse_sse(p.stream())[-1] != "[DONE]",
    "stream-data-after-done": lambda p: (lambda s: "[DONE]" in s and s[-1] != "[DONE]")(
        parse_sse(p.stream())
    ),
    "stream-single-newline": lambda p: "\n\n" not in p.stream().rstrip("\n"),
    "stream-content-type-json": lambda p: (
        "text/event-stream" not in p.post(stream=True).headers["content-type"]
    ),
    "stream-usage-missing": lambda p: not _usage_chunks(p.chunks(**INCLUDE_USAGE)),
    "stream-usage-misplaced": lambda p: (lambda items: _usage_chunks(items) != [len(items) - 2])(
        p.chunks(**INCLUDE_USAGE)
    ),
    "stream-usage-every-chunk": lambda p: any(
        c.get("usage") for c in _content(p.chunks(**INCLUDE_USAGE))
    ),
    "stream-usage-empty-object": lambda p: any(
        c.get("usage") is not None for c in _content(p.chunks())
    ),
    "stream-usage-unrequested": lambda p: bool(_usage_chunks(p.chunks())),
    "stream-id-changes": lambda p: len({c["id"] for c in _content(p.chunks())}) > 1,
    "stream-not-json": lambda p: any(isinstance(c, str) and c != "[DONE]" for c in p.chunks()),
    "stream-no-finish-reason": lambda p: set(_finishes(p.chunks(n=2))) != {0, 1},
    "stream-finish-empty-string": lambda p: any(
        c["choices"][0].get("finish_reason") == "" for c in _content(p.chunks())
    ),
    "stream-double-finish": lambda p: any(len(f) > 1 for f in _finishes(p.chunks(n=2)).values()),
    "stream-text-after-finish": lambda p: _text_after_finish(p.chunks(n=2)),
    "stream-index-zero": lambda p: (
        {c["choices"][0]["index"] for c in _content(p.chunks(n=2))} != {0, 1}
    ),
    "stream-stall": lambda p: p.asgi_body({"prompt": LONG, "stream": True}, timeout=0.5)[1],
    "stream-error-event": lambda p: any(isinstance(c, dict) and "error" in c for c in p.chunks()),
    "stream-text-differs": lambda p: (
        stream_texts(_content(p.chunks())) != {0: p.json()["choices"][0]["text"]}
    ),
    "errors-fastapi": lambda p: not _is_envelope(p.post(n=0)),
    "errors-string": lambda p: not _is_envelope(p.post(n=0)),
    "errors-stringified-nulls": lambda p: p.post(auth=False).json()["error"]["param"] == "None",
    "errors-text-plain": lambda p: p.post(n=0).headers["content-type"] != "application/json",
    "errors-422": lambda p: p.post(n=0).status_code == 422,
    "auth-ignored": lambda p: p.post(auth=False).status_code == 200,
    "auth-missing-400": lambda p: p.post(auth=False).status_code == 400,
    "unknown-model-200": lambda p: p.post(model="no-such-model").status_code == 200,
    "unknown-model-400": lambda p: (lambda r: r.status_code == 400 and _is_envelope(r))(
        p.post(model="no-such-model")
    ),
    "rate-limit-every-third": _every_third_limited,
    "rate-limit-every-third-no-retry-after": lambda p: any(
        r.status_code == 429 and "retry-after" not in r.headers
        for r in [p.post() for _ in range(3)]
    ),
    "rate-limit-always": lambda p: (
        lambda r: r.status_code == 429 and r.headers["retry-after"] == "1"
    )(p.post()),
    "server-error-500": lambda p: any(p.post().status_code == 500 for _ in range(5)),
    "sse-comments": lambda p: ": keep-alive" in p.stream(),
    "sse-crlf": lambda p: "\r\n" in p.stream(),
    "sse-no-space": lambda p: "data:{" in p.stream(),
    "sse-tiny-writes": lambda p: (
        max(len(b) for b in p.asgi_body({"prompt": LONG, "stream": True})[0]) <= 3
    ),
    "sse-retry-lines": lambda p: "retry: 1000" in p.stream(),
    "stream-event-type": lambda p: "event: completion" in p.stream(),
    "finish-on-empty-chunk": lambda p: any(
        c["choices"][0]["text"] == ""
        for c in _content(p.chunks())
        if c["choices"][0].get("finish_reason")
    ),
    "vendor-fields": lambda p: "x_vendor" in p.json() and "x_vendor" in _content(p.chunks())[0],
    # -- the misses of issue 20 --
    "usage-prompt-per-choice": lambda p: (
        p.json(n=2)["usage"]["prompt_tokens"] == 2 * p.json()["usage"]["prompt_tokens"]
    ),
    "stream-usage-counts-more": lambda p: (
        next(c for c in p.chunks(**INCLUDE_USAGE) if c.get("choices") == [])["usage"][
            "completion_tokens"
        ]
        == p.json()["usage"]["completion_tokens"] + 1
    ),
    "stream-usage-counts-less": lambda p: (
        next(c for c in p.chunks(**INCLUDE_USAGE) if c.get("choices") == [])["usage"][
            "completion_tokens"
        ]
        == p.json()["usage"]["completion_tokens"] - 1
    ),
    "rate-limit-bare-body": lambda p: any(
        r.status_code == 429 and "error" not in r.json() for r in [p.post() for _ in range(3)]
    ),
    "rate-limit-retry-after-negative": lambda p: any(
        r.status_code == 429 and r.headers.get("retry-after") == "-1"
        for r in [p.post() for _ in range(3)]
    ),
    "content-encoding-false-gzip": lambda p: _fails_to_decode(p.post),
    "token-id-out-of-vocab-500": lambda p: p.post(prompt=[fake.VOCAB_SIZE]).status_code == 500,
    "max-tokens-default-ignored": lambda p: (
        p.json(max_tokens=None)["usage"]["completion_tokens"] > 16
    ),
    "echo-logprobs-completion-only": lambda p: _lp(p, echo=True, max_tokens=0)["tokens"] == [],
    # The returned text (faults_text): offsets in bytes, a stop's head kept, a prompt cut.
    "text-offset-bytes": lambda p: (lambda lp: lp["text_offset"][2] == len("Café ☕".encode()))(
        p.json(prompt="Café ☕ naïve", echo=True, logprobs=1, max_tokens=1)["choices"][0][
            "logprobs"
        ]
    ),
    "stop-head-kept": lambda p: (
        STOP_ACROSS[:2] == p.json(max_tokens=12, stop=[STOP_ACROSS])["choices"][0]["text"][-2:]
    ),
    "stream-stop-head-kept": lambda p: (
        STOP_ACROSS[:2]
        in "".join(stream_texts(chunks_of(p.stream(max_tokens=12, stop=[STOP_ACROSS]))).values())
        and STOP_ACROSS[:2] not in p.json(max_tokens=12, stop=[STOP_ACROSS])["choices"][0]["text"]
    ),
    "prompt-cut-at-nul": lambda p: (
        not (
            p.json(prompt="Say\u0000 hi there", echo=True, max_tokens=1)["choices"][0]["text"]
        ).startswith("Say\u0000 hi there")
    ),
    "stream-cut-after-first-chunk": lambda p: len(chunks_of(p.stream(max_tokens=8))) == 1,
    "top-logprobs-byte-collisions": lambda p: (
        "" in p.json(logprobs=5, max_tokens=2)["choices"][0]["logprobs"]["top_logprobs"][0]
    ),
    # Capability switches (faults_declines): the feature is a 400, a plain request is 200.
    "decline-echo": lambda p: p.post(echo=True).status_code == 400 and p.post().status_code == 200,
    "decline-suffix": lambda p: p.post(suffix=" end").status_code == 400,
    "decline-logprobs": lambda p: p.post(logprobs=1).status_code == 400,
    "decline-n": lambda p: p.post(n=2).status_code == 400 and p.post(n=1).status_code == 200,
    "decline-best-of": lambda p: p.post(best_of=2).status_code == 400,
    "decline-logit-bias": lambda p: p.post(logit_bias={"5": 1}).status_code == 400,
    "decline-stop": lambda p: p.post(stop=["\n"]).status_code == 400,
    "decline-max-tokens-0": lambda p: (
        p.post(max_tokens=0).status_code == 400
        and p.post(max_tokens=0, echo=True).status_code == 200
    ),
    "best-of-ignored": lambda p: p.post(n=2, best_of=1).status_code == 200,
    "intermittent-500-streamed-logprobs": lambda p: (
        [p.post(stream=True, logprobs=1).status_code for _ in range(3)] == [200, 500, 200]
    ),
    # Short answers: one token, ended naturally ("stop"), for every prompt or for counting.
    "answers-one-word": lambda p: (
        lambda c: len(c["text"].split()) == 1 and c["finish_reason"] == "stop"
    )(p.json(max_tokens=12)["choices"][0]),
    "answers-one-word-to-counting": lambda p: (
        len(p.json(prompt="Count from one:", max_tokens=12)["choices"][0]["text"].split()) == 1
        and len(p.json(max_tokens=12)["choices"][0]["text"].split()) > 1
    ),
    "echo-declined-token-prompts": lambda p: (
        p.post(prompt=[15, 16], echo=True).status_code == 400
        and p.post(prompt="Say hi", echo=True).status_code == 200
    ),
    "dies-on-one-item-prompt-list": lambda p: (
        [p.post(prompt=["Say hi"]), p.post()][1].status_code == 404
    ),
    "logprobs-declared-default": lambda p: (
        p.json()["choices"][0].get("logprobs") is not None
        and all(c["choices"][0].get("logprobs") for c in _content(p.chunks()))
    ),
    "top-logprobs-short": lambda p: all(len(t) == 1 for t in _lp(p, 3)["top_logprobs"]),
    "stream-text-offset-stalled": lambda p: _streamed_offsets(p) == [0] * len(_streamed_offsets(p)),
    "stream-logprobs-cumulative": lambda p: (
        lambda lps: len(lps) > 1 and lps[1]["tokens"][: len(lps[0]["tokens"])] == lps[0]["tokens"]
    )(_streamed_logprobs(p)),
    # -- issue 25's defect shapes --
    "stream-usage-twice": lambda p: len(_usage_chunks(p.chunks(**INCLUDE_USAGE))) == 2,
    "stream-text-cumulative": lambda p: (
        lambda t: len(t) > 2 and all(b.startswith(a) for a, b in pairwise(t))
    )(_texts(p.chunks())),
    "stream-leading-space-dropped": lambda p: (
        "".join(_texts(p.chunks())) == p.json()["choices"][0]["text"].replace(" ", "")
    ),
    "stream-utf8-replaced": lambda p: (
        "\ufffd" in "".join(_texts(p.chunks(prompt="Rhône")))
        and "\ufffd" not in p.json(prompt="Rhône")["choices"][0]["text"]
    ),
    "choices-choice-major": lambda p: (
        p.json(**PLACED)["choices"][1]["text"].startswith("Say hi")
        and _texts(p.chunks(**PLACED), index=1)[0] == "Say hi"
    ),
    "choices-finish-order": lambda p: p.json(**PLACED)["choices"][0]["text"].startswith("Say hi"),
    "stop-finish-length": lambda p: (
        p.json(stop=[fake.tokenize(p.json()["choices"][0]["text"])[2]])["choices"][0][
            "finish_reason"
        ]
        == "length"
    ),
    "max-tokens-zero-unlimited": lambda p: p.json(max_tokens=0)["choices"][0]["text"] != "",
    "suffix-appended": lambda p: p.json(suffix="!?")["choices"][0]["text"].endswith("!?"),
    "usage-completion-off-by-one": lambda p: (
        lambda b: len(b["choices"][0]["logprobs"]["tokens"]) == b["usage"]["completion_tokens"] + 1
    )(p.json(logprobs=1, max_tokens=4)),
}


PLACED = {"prompt": ["Count: 1 2 3 4 5 6 7 8", "Say hi"], "n": 2, "echo": True}


def _texts(items: list[Any], index: int = 0) -> list[str]:
    """The texts a stream sent for one choice index, in order."""
    return [c["choices"][0]["text"] for c in _content(items) if c["choices"][0]["index"] == index]


def _streamed_logprobs(p: Probe) -> list[dict[str, Any]]:
    chunks = _content(p.chunks(logprobs=1, max_tokens=6))
    return [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0].get("logprobs")]


def _streamed_offsets(p: Probe) -> list[int]:
    return [o for lp in _streamed_logprobs(p) for o in lp["text_offset"]]


#: Faults whose violation only exists under one flavor, probed there.
PROBE_FLAVOR = {"null-fields": "nscale"}


def test_every_fault_has_a_probe() -> None:
    # Probes may run ahead of the catalogue; every cataloged fault must have one.
    assert FAULTS.keys() <= PROBES.keys()


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_causes_its_violation(fault: str) -> None:
    flavor = PROBE_FLAVOR.get(fault, "aihubmix")
    conformant = Probe(create_app(flavor, api_key=KEY, models=(MODEL,)))
    assert not PROBES[fault](conformant), f"the probe for {fault} fires on the conformant target"
    faulted = Probe(create_app(flavor, api_key=KEY, models=(MODEL,), faults=frozenset({fault})))
    assert PROBES[fault](faulted), f"{fault} did not change the behaviour its probe looks for"


@pytest.mark.parametrize("flavor", VENDOR_FLAVORS)
def test_accepts_invalid_answers_every_invalid_request(flavor: str) -> None:
    app = create_app(flavor, api_key=KEY, models=(MODEL,), faults=frozenset({"accepts-invalid"}))
    p = Probe(app)
    for body, _ in [*COMMON_INVALID, *AIHUBMIX_ONLY_INVALID]:
        response = p.client.post("/v1/completions", json={"model": MODEL, **body}, headers=AUTH)
        assert response.status_code == 200, (body, response.text)
    for raw in (b"not json", b"[1]", b'{"prompt": "no model"}'):
        response = p.client.post("/v1/completions", content=raw, headers=AUTH)
        assert response.status_code == 200, (raw, response.text)


@pytest.mark.parametrize(
    "fault",
    ["missing-request-id-header", "stream-no-finish-reason", "logprobs-ignored", "errors-fastapi"],
)
def test_faults_work_under_the_nscale_flavor(fault: str) -> None:
    app = create_app("nscale", api_key=KEY, models=(MODEL,), faults=frozenset({fault}))
    p = Probe(app)
    if fault == "missing-request-id-header":
        assert "inference-id" not in p.post().headers
        assert "inference-id" in Probe(create_app("nscale", api_key=KEY)).post().headers
    elif fault == "stream-no-finish-reason":
        assert not _finishes(p.chunks())
    elif fault == "logprobs-ignored":
        assert p.json(logprobs=2)["choices"][0].get("logprobs") is None
    else:
        assert p.post(n=0).json() == {
            "detail": "Invalid value for 'n': 0 is out of range; it must be between 1 and 128."
        }


@pytest.mark.parametrize(
    "fault",
    sorted(
        f
        for f in TOLERATED
        if f.startswith("sse-") or f in ("finish-on-empty-chunk", "vendor-fields")
    ),
)
def test_tolerated_stream_variations_keep_the_sdk_working(fault: str) -> None:
    # Over a real socket: tiny writes and CRLF framing must survive TCP, not just ASGI.
    with ReferenceServer(api_key=KEY, faults=frozenset({fault})) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0)
        stream = client.completions.create(
            model=MODEL, prompt=LONG, max_tokens=4, n=2, temperature=0, stream=True
        )
        texts: dict[int, str] = {}
        finishes: dict[int, str] = {}
        for chunk in stream:
            for choice in chunk.choices:
                texts[choice.index] = texts.get(choice.index, "") + choice.text
                if choice.finish_reason:
                    finishes[choice.index] = choice.finish_reason
    expected = "".join(fake.tokenize(LONG_TEXT)[:4])
    assert texts == {0: expected, 1: expected}
    assert finishes == {0: "length", 1: "length"}


def test_sdk_retries_through_every_third_rate_limit() -> None:
    with ReferenceServer(api_key=KEY, faults=frozenset({"rate-limit-every-third"})) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=2)
        texts = [
            client.completions.create(model=MODEL, prompt="x", max_tokens=1, temperature=0)
            .choices[0]
            .text
            for _ in range(3)
        ]
    assert len(set(texts)) == 1


def test_stalled_stream_is_cancelled_and_server_stops_promptly() -> None:
    with ReferenceServer(api_key=KEY, faults=frozenset({"stream-stall"})) as srv:
        body = {"model": MODEL, "prompt": LONG, "stream": True, "max_tokens": 5}
        timeout = httpx.Timeout(5.0, read=0.5)
        with (
            httpx.Client(timeout=timeout) as client,
            client.stream("POST", srv.url + "/v1/completions", json=body, headers=AUTH) as response,
        ):
            lines = response.iter_lines()
            assert next(lines).startswith("data: {")
            with pytest.raises(httpx.ReadTimeout):
                for _ in lines:
                    pass
        started = time.monotonic()
    assert time.monotonic() - started < 3.0


# --- served from the command line ---------------------------------------------------------


def _serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "conformance.reference", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_command_line_serves_a_completion_until_interrupted() -> None:
    with _serve(
        "--flavor", "nscale", "--api-key", KEY, "--model", MODEL, "--delay", "0.2"
    ) as process:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once requests are served
        assert KEY not in line
        url = line.split(" at ", 1)[1].split()[0]
        started = time.monotonic()
        response = httpx.post(
            url + "/completions",
            json={"model": MODEL, "prompt": "Hello", "max_tokens": 2},
            headers=AUTH,
            timeout=10,
        )
        assert time.monotonic() - started >= 0.2  # the latency option
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert response.json()["usage"]["completion_tokens"] == 2
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0


@pytest.mark.parametrize(
    "args",
    [("--flavor", "bogus"), ("--fault", "no-such-fault"), ("--delay", "soon"), ("--port", "-1")],
    ids=["flavor", "fault", "delay", "port"],
)
def test_command_line_bad_input_is_one_error_line(args: tuple[str, ...]) -> None:
    with _serve(*args) as process:
        out, err = process.communicate(timeout=30)
    assert process.returncode == 4
    assert out == ""
    assert err.startswith("ERROR: ") and err.count("\n") == 1, err


def test_chunk_delay_spaces_stream_events() -> None:
    app = create_app(api_key=KEY, models=(MODEL,), delay=0.1, chunk_delay=0.05)
    started = time.monotonic()
    pieces, timed_out = Probe(app).asgi_body({"prompt": "x", "stream": True, "max_tokens": 3})
    # the first byte after 0.1 s, then each further event 0.05 s after the one before
    assert not timed_out and len(pieces) >= 3
    assert time.monotonic() - started >= 0.1 + (len(pieces) - 1) * 0.05


def test_fault_registry_guards_its_declarations() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        fault("status-201", "again", "head")
    with pytest.raises(ValueError, match="unknown fault stage"):
        also("status-201", "no-such-stage")
    with pytest.raises(ValueError, match="not declared"):
        also("no-such-fault", "head")
    assert all(f.hooks for f in REGISTRY.values()), "every fault transforms something"
    assert set(REGISTRY) == set(FAULTS)


def test_no_fault_means_every_stage_is_the_identity() -> None:
    none = ActiveFaults(())
    for stage in STAGES:
        assert none.fold(stage, "value") == "value"
        assert none.first(stage, "context") is None
