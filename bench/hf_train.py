#!/usr/bin/env python3
"""transformers' training step on a random model of CONFIG's shape: the peer of bench_train_step.

    hf_train.py CONFIG_DIR [--batch 16] [--seq 512] [--runs 5] [--checkpointing]
                [--profile TRACE.json]

fp32 master weights, autocast bf16, SDPA attention, causal-LM loss over every position,
backward, clip_grad_norm_(1.0), torch.optim.AdamW (its default multi-tensor path on CUDA),
zero_grad: what HF's Trainer does per step. Run 1 warms up; the median of runs 2.. is reported
with tokens/s, MFU by verl's FLOPs formula (the same as bench_train_step's) and the allocator's
peak. --profile saves a torch.profiler chrome trace of one more step. Prints one JSON line."""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def verl_flops(cfg, seqlens):
    """verl/utils/flops_counter.py _estimate_qwen2_flops, forward + backward."""
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    dense = (cfg.hidden_size * cfg.intermediate_size * 3 + cfg.hidden_size * (q + 2 * kv + q)) * cfg.num_hidden_layers
    dense += cfg.vocab_size * cfg.hidden_size * 2
    return 6 * dense * sum(seqlens) + 6 * sum(s * s for s in seqlens) * hd * cfg.num_attention_heads * cfg.num_hidden_layers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--profile")
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.config_dir)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, attn_implementation="sdpa").cuda().train()
    if a.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, cfg.vocab_size, (a.batch, a.seq), generator=g).cuda()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    times = []
    for _ in range(a.runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times[1:] if len(times) > 1 else times)
    tokens = a.batch * a.seq
    out = {"engine": "hf" + ("-checkpointing" if a.checkpointing else ""), "batch": a.batch, "seq": a.seq,
           "tokens": tokens, "update_s": med, "tokens_per_s": tokens / med,
           "mfu": verl_flops(cfg, [a.seq] * a.batch) / med / 989e12,
           "max_allocated_gb": torch.cuda.max_memory_allocated() / 2**30,
           "max_reserved_gb": torch.cuda.max_memory_reserved() / 2**30, "torch": torch.__version__}
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            step()
            torch.cuda.synchronize()
        p.export_chrome_trace(a.profile)
        out["profile"] = a.profile
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
