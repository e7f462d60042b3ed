"""Write a tiny random-weight Llama model in the Hugging Face format (config, safetensors,
tokenizer), for servers that load that format: FastChat's model worker and mlx-lm.

    python tools/real_targets/tiny_hf_model.py OUT_DIR [--seed N] [--heads N]

The same shape and vocabulary as the GGUF model of tiny_model.py: two layers, 64 wide, four
heads; a byte-level BPE vocabulary of 256 byte tokens, 255 merges learnt from the built-in
text, and the control token ``<|endoftext|>`` (BOS and EOS), 512 tokens in all. The weights
are random (seeded numpy, written with safetensors): the model generates gibberish, fast, on
one CPU core. Needs numpy, safetensors, tokenizers and transformers (no torch); nothing is
downloaded.

``--heads 2`` gives the same model with two heads of size 32 (the width, 64, over the heads)
for vLLM: its CPU attention kernels refuse head size 16 on the first request, and its server
process exits.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_model import EOT, N_CTX, N_EMBD, N_FF, N_HEAD, N_LAYER, vocab_tokens


def write_model(out: Path, *, seed: int = 1, merge_count: int = 255, heads: int = N_HEAD) -> int:
    import numpy as np
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    tokens, merges = vocab_tokens(merge_count)
    vocab = {token: i for i, token in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOT])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT)
    eot, n_vocab = vocab[EOT], len(tokens)
    config = LlamaConfig(
        vocab_size=n_vocab,
        hidden_size=N_EMBD,
        intermediate_size=N_FF,
        num_hidden_layers=N_LAYER,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=N_CTX,
        bos_token_id=eot,
        eos_token_id=eot,
        tie_word_embeddings=False,
    )
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.5, size=shape).astype(np.float32)

    ones = np.ones(N_EMBD, dtype=np.float32)
    tensors = {"model.embed_tokens.weight": weight(n_vocab, N_EMBD), "model.norm.weight": ones}
    for i in range(N_LAYER):
        layer = f"model.layers.{i}."
        tensors[layer + "input_layernorm.weight"] = ones.copy()
        tensors[layer + "post_attention_layernorm.weight"] = ones.copy()
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"{layer}self_attn.{proj}.weight"] = weight(N_EMBD, N_EMBD)
        tensors[layer + "mlp.gate_proj.weight"] = weight(N_FF, N_EMBD)
        tensors[layer + "mlp.up_proj.weight"] = weight(N_FF, N_EMBD)
        tensors[layer + "mlp.down_proj.weight"] = weight(N_EMBD, N_FF)
    tensors["lm_head.weight"] = weight(n_vocab, N_EMBD)
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(out)
    # The class name transformers 5 writes (TokenizersBackend) is unknown to transformers 4,
    # which FastChat 0.2.36 needs; PreTrainedTokenizerFast reads tokenizer.json in both.
    tok_config = out / "tokenizer_config.json"
    settings = json.loads(tok_config.read_text(encoding="utf-8"))
    settings["tokenizer_class"] = "PreTrainedTokenizerFast"
    tok_config.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return n_vocab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--heads", type=int, default=N_HEAD, help=f"attention heads (default {N_HEAD})"
    )
    args = parser.parse_args(argv)
    if args.heads < 1 or N_EMBD % args.heads:
        parser.error(f"--heads must divide the width {N_EMBD}")
    n_vocab = write_model(args.out, seed=args.seed, heads=args.heads)
    print(
        f"wrote {args.out} (vocabulary {n_vocab} tokens, {args.heads} heads of {N_EMBD // args.heads})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
