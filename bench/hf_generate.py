#!/usr/bin/env python3
"""transformers' generate on a random model of CONFIG's shape: the peer of bench_rollout.

    hf_generate.py CONFIG_DIR [--prompts 64] [--n 4] [--prompt-len 128] [--new-tokens 256]
                   [--mode dynamic|static-compile] [--runs 2]

bf16 weights, SDPA attention, sampling at temperature 1 over the full vocabulary (top_k 0,
top_p 1), every row to --new-tokens (min_new_tokens = max_new_tokens, as ignore_eos). Run 1
warms up; the median of runs 2.. is reported. Prints one JSON line (with "error" when the mode
fails, e.g. torch.compile)."""
import argparse
import json
import statistics
import time
import traceback

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--mode", default="dynamic")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.config_dir)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16, attn_implementation="sdpa").cuda().eval()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 151643, (a.prompts, a.prompt_len), generator=g).cuda()
    kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.new_tokens,
              min_new_tokens=a.new_tokens, num_return_sequences=a.n, pad_token_id=0,
              attention_mask=torch.ones_like(ids))
    out = {"engine": "hf-" + a.mode, "sequences": a.prompts * a.n, "prompt_len": a.prompt_len,
           "new_tokens": a.new_tokens, "torch": torch.__version__}
    try:
        import transformers
        out["transformers"] = transformers.__version__
        if a.mode == "static-compile":
            kw["cache_implementation"] = "static"
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        times = []
        for r in range(a.runs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                y = model.generate(ids, **kw)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        tokens = (y.shape[1] - a.prompt_len) * y.shape[0]
        med = statistics.median(times[1:] if len(times) > 1 else times)
        out.update(tokens=tokens, median_s=med, tokens_per_s=tokens / med, runs_s=times)
    except Exception as e:  # the failure is a result too (e.g. CUDA graphs + compile)
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        out["where"] = traceback.format_exc().splitlines()[-3:]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
