"""The held-out defect shapes (tests/transcripts/*/bug-*.json, guard-*.json) and the judge
fixes they led to, each proven both ways.

For every fix: the shape's transcript fails the owning requirement, the same transcript
with the defect repaired passes every requirement, and with the new rule switched off the
shape slips through (so the rule, not some neighbour, is what catches it).
tests/test_transcripts.py replays all shapes with their exact sets; this file proves the
rules and the measurement tool.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance.judging.checks import logprobs_rules

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "real_targets"))
import defect_shapes  # noqa: E402
import transcript  # noqa: E402

CORPUS = ROOT / "tests" / "transcripts"


def shape(name: str) -> dict[str, Any]:
    return transcript.load(CORPUS / f"{name}.json")


def failed(data: dict[str, Any]) -> set[str]:
    return set(transcript.judge(data))


def sse(chunks: list[dict[str, Any]]) -> str:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def chunks_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    events = data["response"]["body"].split("\n\n")
    return [json.loads(e.removeprefix("data: ")) for e in events if e and "[DONE]" not in e]


# -- logprobs: 0 asks for the sampled tokens' logprobs -----------------------------------


def test_logprobs_0_answered_null_fails_presence_and_a_logprobs_object_passes() -> None:
    data = shape("sglang/bug-logprobs-0-null")
    assert failed(data) == {"LOGPROBS-PRESENCE"}
    assert "logprobs=0 requested" in transcript.judge(data)["LOGPROBS-PRESENCE"]
    fixed = copy.deepcopy(data)
    body = json.loads(fixed["response"]["body"])
    body["choices"][0]["logprobs"] = {
        "tokens": [" Hi", "!"],
        "token_logprobs": [-0.4, -0.2],
        "top_logprobs": [{" Hi": -0.4}, {"!": -0.2}],
        "text_offset": [6, 9],
    }
    fixed["response"]["body"] = json.dumps(body)
    assert failed(fixed) == set()


def test_logprobs_0_streamed_without_logprobs_fails_stream_logprobs_presence() -> None:
    data = shape("vllm/guard-finish-on-last-text-chunk")
    assert failed(data) == set()
    data["request"]["body"]["logprobs"] = 0
    assert failed(data) == {"STREAM-LOGPROBS-PRESENCE"}


# -- text_offset follows the tokens, and stays inside prompt + text ----------------------


def test_streamed_offsets_that_stall_fail_and_advancing_offsets_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = shape("vllm/bug-stream-echo-logprobs-offsets-shifted")
    assert failed(data) == {"STREAM-LOGPROBS-OFFSETS"}
    assert "do not follow the text" in transcript.judge(data)["STREAM-LOGPROBS-OFFSETS"]
    fixed = copy.deepcopy(data)
    chunks = chunks_of(fixed)
    chunks[1]["choices"][0]["logprobs"]["text_offset"] = [12]
    chunks[2]["choices"][0]["logprobs"]["text_offset"] = [13]
    fixed["response"]["body"] = sse(chunks)
    assert failed(fixed) == set()
    monkeypatch.setattr(logprobs_rules, "_check_advance", lambda *a: None)
    assert "STREAM-LOGPROBS-OFFSETS" not in failed(data)


def test_non_streamed_offsets_that_skip_a_token_fail_logprobs_offsets() -> None:
    data = shape("xinference/guard-text-offset-from-completion-start")
    assert failed(data) == set()  # offsets from 0 (vLLM) are as legal as from the prompt
    body = json.loads(data["response"]["body"])
    body["choices"][0]["logprobs"]["text_offset"] = [0, 1]  # " Hi" is 3 characters
    data["response"]["body"] = json.dumps(body)
    assert failed(data) == {"LOGPROBS-OFFSETS"}


def test_offsets_counted_in_utf8_bytes_fail_logprobs_offsets() -> None:
    """text_offset indexes the text a client holds, in characters as OpenAI counts them: a
    server counting UTF-8 bytes drifts after the first non-ASCII token (llama-cpp-python
    PR 1037, vllm-project/router #263)."""
    data = shape("xinference/guard-text-offset-from-completion-start")
    body = json.loads(data["response"]["body"])
    body["choices"][0]["text"] = " é!"
    body["choices"][0]["logprobs"].update(tokens=[" é", "!"], text_offset=[0, 2])
    data["response"]["body"] = json.dumps(body)
    assert failed(data) == set()  # " é" is 2 characters
    body["choices"][0]["logprobs"].update(text_offset=[0, 3])  # ... and 3 UTF-8 bytes
    data["response"]["body"] = json.dumps(body)
    assert failed(data) == {"LOGPROBS-OFFSETS"}
    assert "UTF-8 bytes, not characters" in transcript.judge(data)["LOGPROBS-OFFSETS"]


def test_offsets_spanning_more_than_the_text_fail_without_echo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = shape("vllm/bug-text-offset-beyond-text")
    assert failed(data) == {"LOGPROBS-OFFSETS", "LOGPROBS-TOKENS-TEXT"}
    assert "more than the 14 characters" in transcript.judge(data)["LOGPROBS-OFFSETS"]
    fixed = copy.deepcopy(data)
    body = json.loads(fixed["response"]["body"])
    body["choices"][0]["logprobs"]["text_offset"] = [0, 6, 7]
    fixed["response"]["body"] = json.dumps(body)
    assert failed(fixed) == {"LOGPROBS-TOKENS-TEXT"}  # the token_id:N tokens stay a SHOULD
    monkeypatch.setattr(logprobs_rules, "_check_span", lambda *a: None)
    assert "LOGPROBS-OFFSETS" not in failed(data)


def test_offsets_counted_from_the_detokenized_prompt_pass_whatever_their_origin() -> None:
    data = transcript.load(CORPUS / "llama-cpp-python" / "eot-in-logprobs-stop-at-max-tokens.json")
    assert failed(data) == set()
    body = json.loads(data["response"]["body"])
    lp = body["choices"][0]["logprobs"]
    lp["text_offset"] = [o + 1 for o in lp["text_offset"]]  # " Say hi": one more character
    data["response"]["body"] = json.dumps(body)
    assert failed(data) == set()


# -- streamed: each chunk's tokens spell that chunk's text -------------------------------


def test_a_token_in_the_wrong_chunk_fails_tokens_text_and_the_right_chunk_passes() -> None:
    data = shape("fms-guardrails/bug-stream-logprobs-off-by-one")
    assert failed(data) == {"LOGPROBS-TOKENS-TEXT"}
    fixed = copy.deepcopy(data)
    chunks = chunks_of(fixed)
    first, second = chunks[0]["choices"][0]["logprobs"], chunks[1]["choices"][0]["logprobs"]
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        second[key] = first[key][-1:]
        first[key] = first[key][:-1]
    fixed["response"]["body"] = sse(chunks)
    assert failed(fixed) == set()


def test_an_end_of_text_token_in_its_own_chunk_before_the_finish_passes() -> None:
    data = shape("fms-guardrails/bug-stream-logprobs-off-by-one")
    chunks = chunks_of(data)
    first, second = chunks[0]["choices"][0], chunks[1]["choices"][0]
    first["logprobs"] = {k: v[:4] for k, v in first["logprobs"].items()}  # " I'm glad."
    second["logprobs"] = {
        "tokens": [" How", "</s>"],
        "token_logprobs": [-0.5, -0.1],
        "top_logprobs": [{" How": -0.5}, {"</s>": -0.1}],
        "text_offset": [19, 23],
    }
    second["finish_reason"] = None
    finish = {**chunks[1], "choices": [{"index": 0, "text": "", "logprobs": None}]}
    finish["choices"][0]["finish_reason"] = "stop"
    data["response"]["body"] = sse([chunks[0], chunks[1], finish])
    assert failed(data) == set()


def test_chunks_are_not_judged_when_the_whole_stream_does_not_spell_its_text() -> None:
    data = shape("fms-guardrails/bug-stream-logprobs-off-by-one")
    chunks = chunks_of(data)
    chunks[0]["choices"][0]["logprobs"]["tokens"][0] = "\ufffd"  # rendered, not spelled
    data["response"]["body"] = sse(chunks)
    assert "LOGPROBS-TOKENS-TEXT" not in failed(data)


# -- top_logprobs keyed by text: collided byte fragments are not missing candidates -----


def test_fewer_alternatives_pass_only_where_a_collision_can_explain_them() -> None:
    data = shape("sglang/guard-top-logprobs-collapsed-replacement-char")
    assert failed(data) == set()
    body = json.loads(data["response"]["body"])
    tops = body["choices"][0]["logprobs"]["top_logprobs"]
    tops[1][" and"] = tops[1].pop("\ufffd")  # one short at one position: may have collided
    data["response"]["body"] = json.dumps(body)
    assert failed(data) == set()
    tops[0].pop(" What")  # one short at both positions: no collision recurs at each
    data["response"]["body"] = json.dumps(body)
    assert failed(data) == {"LOGPROBS-TOP-FULL"}  # a SHOULD


# -- the measurement tool ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "got", "result"),
    [
        ({"A"}, {"A"}, "caught"),
        ({"A"}, {"A", "B"}, "caught+extra"),
        ({"A", "C"}, {"A"}, "partial"),
        ({"A"}, {"B"}, "missed"),
        (set(), set(), "silent"),
        (set(), {"B"}, "false-alarm"),
    ],
)
def test_classify(expected: set[str], got: set[str], result: str) -> None:
    assert defect_shapes.classify(expected, got) == result


def test_the_held_out_set_is_large_varied_and_sourced() -> None:
    files = defect_shapes.shape_files()
    bugs = [p for p in files if p.name.startswith("bug-")]
    assert len(files) >= 40 and len({p.parent.name for p in files}) >= 6
    for path in bugs:
        obtained = transcript.load(path)["source"]["obtained"]
        assert " #" in obtained and "(https://github.com/" in obtained, path


def test_the_doc_lists_every_shape() -> None:
    doc = (ROOT / "docs" / "defect-shapes.md").read_text()
    for path in defect_shapes.shape_files():
        assert f"`{path.parent.name}/{path.stem}`" in doc, path
