"""Write a tiny random-weight Llama model in the Hugging Face format (config, safetensors,
tokenizer), for servers that load that format: FastChat's model worker and mlx-lm.

    python tools/real_targets/tiny_hf_model.py OUT_DIR [--seed N]

The same shape and vocabulary as the GGUF model of tiny_model.py: two layers, 64 wide, four
heads; a byte-level BPE vocabulary of 256 byte tokens, 255 merges learnt from the built-in
text, and the control token ``<|endoftext|>`` (BOS and EOS), 512 tokens in all. The weights
are random (seeded): the model generates gibberish, fast, on one CPU core. Needs torch,
transformers and tokenizers; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_model import EOT, N_CTX, N_EMBD, N_FF, N_HEAD, N_LAYER, build_vocab


def write_model(out: Path, *, seed: int = 1, merge_count: int = 255) -> int:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokens, _types, merges = build_vocab(merge_count)
    vocab = {token: i for i, token in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOT])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT)
    eot = vocab[EOT]
    config = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=N_EMBD,
        intermediate_size=N_FF,
        num_hidden_layers=N_LAYER,
        num_attention_heads=N_HEAD,
        num_key_value_heads=N_HEAD,
        max_position_embeddings=N_CTX,
        bos_token_id=eot,
        eos_token_id=eot,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return len(tokens)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    n_vocab = write_model(args.out, seed=args.seed)
    print(f"wrote {args.out} (vocabulary {n_vocab} tokens)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
