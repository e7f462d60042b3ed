"""Write a tiny random-weight llama-architecture GGUF model that llama.cpp loads.

    python tools/real_targets/tiny_model.py OUT.gguf [--seed N] [--merges N]

Two layers, 64 wide, 4 heads, a byte-level BPE vocabulary ("gpt2" tokenizer model, as
GPT-2 and Llama 3 use) of 256 byte tokens, a few hundred merges learnt here from a small
built-in English text, and one control token ``<|endoftext|>`` (BOS and EOS). The weights
are random (seeded, so the file is the same on every run): the model generates gibberish,
fast, on one CPU core. About 0.5 MB in float32. Needs only the ``gguf`` package (and its
numpy); nothing is downloaded.

The vocabulary size is printed (and is what ``--vocab-size`` of the suite should get, so
that generated token prompts stay inside the vocabulary).
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_FF = 128
N_CTX = 2048
EOT = "<|endoftext|>"

# A small text to learn merges from: English words a prompt is likely to contain, so that
# prompts tokenise into a few tokens each instead of one token per byte.
CORPUS = """
Say hi. Hello world! Count slowly from one to twenty: one two three four five six seven
eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen
nineteen twenty. The quick brown fox jumps over the lazy dog. Once upon a time there was
a little model that could complete the text of the prompt it was given. This is a test
of the completions endpoint; the answer should be short and the tokens should be few.
What is the capital of France? Paris is the capital of France. Write a poem about the
sea and the sky and the sun. Tell me a story. The weather is nice today, and the
children are playing in the garden with their friends. Python is a programming language
that people use for data, for the web and for machine learning. Please continue the
following sentence: I think that we should go to the market in the morning.
"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map of the 256 bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


# GPT-2's pre-tokeniser, without the \p{L}/\p{N} classes that `re` lacks (close enough
# for learning merges from an ASCII text).
PRETOKEN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+""")


def learn_merges(text: str, count: int) -> list[tuple[str, str]]:
    """Plain BPE over the byte-mapped words of ``text``: the ``count`` most frequent merges."""
    byte_map = bytes_to_unicode()
    words = Counter(
        tuple(byte_map[b] for b in piece.encode("utf-8")) for piece in PRETOKEN.findall(text)
    )
    merges: list[tuple[str, str]] = []
    while len(merges) < count:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, freq in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += freq
        if not pairs:
            break
        # Most frequent first; ties broken by the pair itself so the result is stable.
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged: Counter[tuple[str, ...]] = Counter()
        for word, freq in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += freq
        words = merged
    return merges


def vocab_tokens(merge_count: int) -> tuple[list[str], list[str]]:
    """Tokens (bytes first, then merges, then the control token) and the merges.

    Shared with tiny_hf_model.py, so that both formats have the very same vocabulary.
    """
    tokens = [bytes_to_unicode()[b] for b in range(256)]
    merges = learn_merges(CORPUS, merge_count)
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            tokens.append(a + b)
            seen.add(a + b)
    tokens.append(EOT)
    return tokens, [f"{a} {b}" for a, b in merges]


def build_vocab(merge_count: int) -> tuple[list[str], list[int], list[str]]:
    """Tokens, their GGUF token types, merges."""
    import gguf

    tokens, merges = vocab_tokens(merge_count)
    types = [int(gguf.TokenType.NORMAL)] * (len(tokens) - 1) + [int(gguf.TokenType.CONTROL)]
    return tokens, types, merges


def write_model(path: Path, *, seed: int = 1, merge_count: int = 255) -> int:
    """Write the model to ``path``; return its vocabulary size."""
    import gguf

    tokens, types, merges = build_vocab(merge_count)
    n_vocab = len(tokens)
    eot = n_vocab - 1
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        # numpy shape (rows, cols) = GGUF (ne1, ne0): a matrix mapping cols -> rows.
        return (rng.standard_normal(shape) * (1.0 / np.sqrt(shape[-1]))).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eot)
    w.add_eos_token_id(eot)
    w.add_add_bos_token(False)

    # Dimension 0 of the residual stream is a constant feature: every embedding has 1.0
    # there and no layer writes to it (row 0 of attn_output and ffn_down is zero). Column
    # 0 of the output matrix then acts as a per-token bias, used to make control bytes
    # and lone non-ASCII bytes (half a UTF-8 character) rare but possible: the texts are
    # mostly the corpus' words in a random order, like a (bad) real model's.
    embd = weight(n_vocab, N_EMBD)
    embd[:, 0] = 1.0
    w.add_tensor("token_embd.weight", embd)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v"):
            w.add_tensor(p + name + ".weight", weight(N_EMBD, N_EMBD))
        attn_out = weight(N_EMBD, N_EMBD)
        attn_out[0, :] = 0.0
        w.add_tensor(p + "attn_output.weight", attn_out)
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", weight(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", weight(N_FF, N_EMBD))
        ffn_down = weight(N_EMBD, N_FF)
        ffn_down[0, :] = 0.0
        w.add_tensor(p + "ffn_down.weight", ffn_down)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    # Scaled up so that the next-token distribution is peaked rather than flat, which
    # keeps logprobs away from -log(n_vocab).
    output = weight(n_vocab, N_EMBD) * 4.0
    output[:, 0] = 0.0
    for b in range(256):
        if (b < 0x20 and b != 0x0A) or b == 0x7F:
            output[b, 0] = -2.0  # control bytes: very rare
        elif b >= 0x80:
            output[b, 0] = -0.6  # half a UTF-8 character: rare
    space = bytes_to_unicode()[0x20]
    for t, text in enumerate(tokens):
        if t >= 256 and text.startswith(space):
            output[t, 0] = 0.25  # words that start with a space: more, shorter words
    w.add_tensor("output.weight", output)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--merges", type=int, default=255, help="BPE merges to learn")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    n_vocab = write_model(args.out, seed=args.seed, merge_count=args.merges)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, vocabulary {n_vocab} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
