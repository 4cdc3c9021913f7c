#!/usr/bin/env python3
"""Parity of verlctl's Hugging Face model loader (trainer/hf_model.h) against transformers.

For Qwen2, Qwen3, Llama (llama3 RoPE scaling; also with attention/MLP biases) and Mistral
(sliding window), small random models are built with transformers, saved with save_pretrained
(safetensors) in float32 and bfloat16, and run by both sides on the same left-padded batch:
  - logits [B,T,V] of the real tokens: fp32 max |ours - transformers| <= 1e-4; bf16: our error
    against the fp32 run of the same bf16 weights must stay within 2x transformers' own bf16 error
    ("bf16 noise"), both reported;
  - 32 greedy tokens per row (transformers generate(do_sample=False), no EOS): identical in fp32
    for the rows without padding (the left-padded row is reported beside them); in bf16 the length
    of the common prefix is reported (bf16 rounding differs by design: we keep norms, softmax and
    RoPE in fp32);
  - our export (save_hf) loaded with AutoModelForCausalLM.from_pretrained gives transformers'
    logits of the original checkpoint exactly (max diff 0 expected; <= 1e-6 passes).
Prints a markdown table; exits 1 when any check fails.

On the GPU machine (python3 with PyTorch + transformers), from the repository root:
    cmake --build build --target bench_hf_forward
    python3 bench/hf_parity.py --driver build/bench/bench_hf_forward --device cuda --work /tmp/hf_parity

CPU self-check without transformers (what was run where verlctl is developed): random models made
by our own writer (--random-init), run through the driver twice (load of our export), checked with
a stdlib safetensors reader and an independent plain-PyTorch forward written from HF's modeling code:
    python3 bench/hf_parity.py --driver build/bench/bench_hf_forward --device cpu --selfcheck
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import torch

NEW_TOKENS = 32

# name -> (transformers config class name, kwargs). Small, with GQA, every variant the loader has.
CASES = {
    "qwen2": ("Qwen2Config", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                  num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False)),
    "qwen3": ("Qwen3Config", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=96,
                                  tie_word_embeddings=True)),
    "llama3": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=4, rope_theta=500000.0,
                                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                                   tie_word_embeddings=False)),
    "llama-bias": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                       num_attention_heads=8, num_key_value_heads=8, attention_bias=True,
                                       mlp_bias=True, tie_word_embeddings=True)),
    "mistral-swa": ("MistralConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                          num_attention_heads=8, num_key_value_heads=2, sliding_window=8,
                                          tie_word_embeddings=False)),
}
COMMON = dict(vocab_size=1000, max_position_embeddings=512, rms_norm_eps=1e-6, hidden_act="silu",
              bos_token_id=None, eos_token_id=None, pad_token_id=None)
ARCH = {"Qwen2Config": "Qwen2ForCausalLM", "Qwen3Config": "Qwen3ForCausalLM", "LlamaConfig": "LlamaForCausalLM",
        "MistralConfig": "MistralForCausalLM"}
MODEL_TYPE = {"Qwen2Config": "qwen2", "Qwen3Config": "qwen3", "LlamaConfig": "llama", "MistralConfig": "mistral"}


# ------------------------------------------------------------------------------------------------
# safetensors with the standard library (+ torch.frombuffer): the peer reader of our writer.

ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
             "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
             "BOOL": torch.bool}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert 8 + n <= len(blob), f"{path}: header length {n} past the end"
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out, meta, end = {}, header.pop("__metadata__", {}), 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, en = e["data_offsets"]
        assert b == end, f"{path}: {name} starts at {b}, previous ended at {end} (gap or overlap)"
        dtype = ST_DTYPES[e["dtype"]]
        numel = math.prod(e["shape"])
        assert en - b == numel * torch.empty((), dtype=dtype).element_size(), f"{path}: {name} size"
        raw = bytearray(data[b:en])
        t = torch.frombuffer(raw, dtype=dtype) if numel else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
        end = en
    assert end == len(data), f"{path}: {len(data) - end} trailing bytes"
    return out, meta


def read_checkpoint(d):
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)[0]
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    out, total = {}, 0
    for shard in sorted(set(index["weight_map"].values())):
        tensors, meta = read_safetensors(os.path.join(d, shard))
        assert meta.get("format") == "pt", f"{shard}: __metadata__ {meta}"
        for k, v in tensors.items():
            assert index["weight_map"][k] == shard, f"index puts {k} elsewhere"
            out[k] = v
            total += v.numel() * v.element_size()
    assert total == index["metadata"]["total_size"], "index total_size"
    return out


# ------------------------------------------------------------------------------------------------
# An independent forward in plain PyTorch, written from transformers' Llama/Qwen2/Qwen3/Mistral
# modeling code (fp32), for the self-check where transformers is absent.

def ref_inv_freq(cfg, head_dim):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        inv = inv / rs["factor"]
    elif kind == "llama3":
        factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        inv_l = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wavelen < old / hi) * ~(wavelen > old / lo)
        inv = torch.where(medium, smoothed, inv_l)
    return inv


def ref_forward(cfg, w, ids, mask):
    arch = cfg["architectures"][0]
    h_heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // h_heads
    eps = cfg["rms_norm_eps"]
    window = cfg.get("sliding_window") if arch.startswith("Mistral") else None

    def rms(x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def lin(x, name):
        return torch.nn.functional.linear(x, w[name + ".weight"], w.get(name + ".bias"))

    def rot(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    b, t = ids.shape
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    freqs = pos[..., None].float() * ref_inv_freq(cfg, hd)[None, None, :]
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    i = torch.arange(t)
    allowed = (i[None, :] <= i[:, None])
    if window:
        allowed = allowed & (i[:, None] - i[None, :] < window)
    allowed = allowed[None] & mask.bool()[:, None, :]
    bias = torch.zeros(b, 1, t, t).masked_fill(~allowed[:, None], torch.finfo(torch.float32).min)
    x = w["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        y = rms(x, w[p + "input_layernorm.weight"])
        q = lin(y, p + "self_attn.q_proj").view(b, t, h_heads, hd)
        k = lin(y, p + "self_attn.k_proj").view(b, t, kv, hd)
        v = lin(y, p + "self_attn.v_proj").view(b, t, kv, hd).transpose(1, 2)
        if arch.startswith("Qwen3"):
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(h_heads // kv, 1), v.repeat_interleave(h_heads // kv, 1)
        s = q @ k.transpose(2, 3) * hd ** -0.5 + bias
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, h_heads * hd)
        x = x + lin(a, p + "self_attn.o_proj")
        y = rms(x, w[p + "post_attention_layernorm.weight"])
        g = torch.nn.functional.silu(lin(y, p + "mlp.gate_proj")) * lin(y, p + "mlp.up_proj")
        x = x + lin(g, p + "mlp.down_proj")
    x = rms(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.t()


# ------------------------------------------------------------------------------------------------

def make_batch(vocab, gen):
    b, t, pad = 3, 24, 5
    ids = torch.randint(3, vocab, (b, t), generator=gen)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, :pad] = 0
    ids[1, :pad] = 0
    return ids, mask


def run_driver(args, model_dir, work, tag, dtype, extra=()):
    ids_file = os.path.join(work, "ids.json")
    logits, tokens, export = (os.path.join(work, f"{tag}.{s}") for s in ("logits.safetensors", "tokens.json", "export"))
    cmd = [args.driver, "--model", model_dir, "--ids", ids_file, "--dtype", dtype, "--device", args.device,
           "--logits", logits, "--tokens", tokens, "--new-tokens", str(NEW_TOKENS), "--export", export, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"driver failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    lg = read_safetensors(logits)[0]["logits"]
    with open(tokens) as f:
        tk = torch.tensor(json.load(f)["tokens"])
    return lg, tk, export


def real(x, mask):
    return x[mask.bool()]


def perturb_(model, gen):
    """Weights large enough that logits are peaked (greedy far from ties, logits of a few units) and
    biases/norms non-trivial."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:  # embeddings too: a tied lm_head of std 1 would give logits of ~80, fp32 noise ~1e-4
                p.copy_(torch.randn(p.shape, generator=gen) * (2.0 / math.sqrt(p.shape[1])))


def hf_load(path, dtype, attn):
    import transformers
    # from_pretrained's dtype keyword was torch_dtype before 4.56; an unknown keyword would be taken
    # as a config attribute silently, so choose by version rather than by trying.
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation=attn, **{key: dtype})


def hf_logits(model, ids, mask, device):
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        return model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device)).logits.float().cpu()


def hf_generate(model, ids, mask, device):
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                             max_new_tokens=NEW_TOKENS, min_new_tokens=0, eos_token_id=None, pad_token_id=0)
    return out[:, ids.shape[1]:].cpu()


def prefix_len(a, b):
    eq = (a == b).int()
    return int(eq.cumprod(1).sum(1).min())


def gpu_case(args, case, device, gen, rows):
    """Runs one model in fp32 and bf16; appends its rows; returns True when a check failed."""
    import transformers
    failed = False
    cls_name, kw = CASES[case]
    cfg = getattr(transformers, cls_name)(**COMMON, **kw)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).float()
    perturb_(model, gen)
    work = os.path.join(args.work, case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ids, mask = make_batch(cfg.vocab_size, gen)
    with open(os.path.join(work, "ids.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "attention_mask": mask.tolist()}, f)
    for dtype_name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        d = os.path.join(work, f"hf_{dtype_name}")
        model.to(dtype).save_pretrained(d, safe_serialization=True)
        model.float()
        hf = hf_load(d, dtype, args.attn).to(device).eval()
        ref = hf_load(d, torch.float32, args.attn).to(device).eval()  # the same (rounded) weights in fp32
        hf_lg, ref_lg = hf_logits(hf, ids, mask, device), hf_logits(ref, ids, mask, device)
        hf_tok = hf_generate(hf, ids, mask, device)
        ours_lg, ours_tok, export = run_driver(args, d, work, f"ours_{dtype_name}", dtype_name)
        exp = hf_load(export, dtype, args.attn).to(device).eval()
        exp_diff = (real(hf_logits(exp, ids, mask, device), mask) - real(hf_lg, mask)).abs().max().item()
        err = (real(ours_lg, mask) - real(ref_lg, mask)).abs().max().item()
        vs_hf = (real(ours_lg, mask) - real(hf_lg, mask)).abs().max().item()
        # Rows without padding must agree. The left-padded row is reported on its own: it also
        # depends on how this transformers version derives generate()'s positions from the mask.
        full = mask.bool().all(1)
        same_tokens = bool(torch.equal(ours_tok[full], hf_tok[full]))
        same_padded = bool(torch.equal(ours_tok[~full], hf_tok[~full]))
        if dtype == torch.float32:
            # 1e-4, or twice transformers' own fp32 error against its fp64 run when the random
            # model is so ill-conditioned that fp32 itself is off by more.
            ref64 = hf_load(d, torch.float64, args.attn).to(device).eval()
            with torch.no_grad():
                pos = (mask.cumsum(-1) - 1).clamp(min=0)
                r64 = ref64(input_ids=ids.to(device), attention_mask=mask.to(device),
                            position_ids=pos.to(device)).logits.double().cpu()
            noise = (real(ref_lg, mask).double() - real(r64, mask)).abs().max().item()
            ok = err <= max(1e-4, 2 * noise) and same_tokens and exp_diff <= 1e-6
            bound = f"<= max(1e-4, 2 x {noise:.3g})"
        else:
            noise = (real(hf_lg, mask) - real(ref_lg, mask)).abs().max().item()
            ok = err <= 2 * noise and exp_diff <= 1e-6
            bound = f"<= 2 x {noise:.3g}"
        failed |= not ok
        rows.append((case, dtype_name, err, bound, vs_hf, f"{prefix_len(ours_tok, hf_tok)}/{NEW_TOKENS}",
                     ("yes" if same_tokens else "no") + " / " + ("yes" if same_padded else "no"), exp_diff,
                     "ok" if ok else "FAIL"))
    return failed


def gpu_parity(args):
    import transformers
    rows, failed = [], False
    device = "cuda" if args.device.startswith("cuda") else args.device
    gen = torch.Generator().manual_seed(0)
    for case in args.cases:
        try:
            failed |= gpu_case(args, case, device, gen, rows)
        except Exception as e:  # one broken case must not hide the others' rows
            failed = True
            rows.append((case, "-", float("nan"), f"error: {type(e).__name__}: {e}"[:200], float("nan"), "-", "-",
                         float("nan"), "FAIL"))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}, "
          f"attn {args.attn}\n")
    print("| model | dtype | max abs logit err vs HF fp32 of same weights | bound | vs HF same dtype | "
          "greedy common prefix (min row) | tokens identical: unpadded rows / left-padded row | "
          "export reloaded by HF: max diff | result |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.3g} | {r[3]} | {r[4]:.3g} | {r[5]} | {r[6]} | {r[7]:.3g} | {r[8]} |")
    return 1 if failed else 0


def hf_style_config(cls_name, kw):
    """The config.json transformers 4.x would write for these kwargs (for the self-check)."""
    heads = kw["num_attention_heads"]
    j = {"architectures": [ARCH[cls_name]], "model_type": MODEL_TYPE[cls_name], "torch_dtype": "float32",
         "initializer_range": 0.2, "rope_theta": 10000.0, **{k: v for k, v in COMMON.items()}, **kw}
    j.setdefault("head_dim", kw["hidden_size"] // heads)
    return j


def selfcheck(args):
    rows, failed = [], False
    for case in args.cases:
        cls_name, kw = CASES[case]
        work = os.path.join(args.work, case)
        shutil.rmtree(work, ignore_errors=True)
        src = os.path.join(work, "config_only")
        os.makedirs(src)
        cfg = hf_style_config(cls_name, kw)
        with open(os.path.join(src, "config.json"), "w") as f:
            json.dump(cfg, f)
        gen = torch.Generator().manual_seed(1)
        ids, mask = make_batch(cfg["vocab_size"], gen)
        with open(os.path.join(work, "ids.json"), "w") as f:
            json.dump({"input_ids": ids.tolist(), "attention_mask": mask.tolist()}, f)
        lg1, tk1, exp1 = run_driver(args, src, work, "random", "float32", ("--random-init", "7"))
        lg2, tk2, exp2 = run_driver(args, exp1, work, "loaded", "float32")
        weights = read_checkpoint(exp1)
        with open(os.path.join(exp1, "config.json")) as f:
            exported_cfg = json.load(f)
        ref = ref_forward(exported_cfg, weights, ids, mask)
        torch.set_default_dtype(torch.float64)
        ref64 = ref_forward(exported_cfg, {k: v.double() for k, v in weights.items()}, ids, mask)
        torch.set_default_dtype(torch.float32)
        err = (real(lg1, mask).double() - real(ref64, mask)).abs().max().item()
        noise = (real(ref, mask).double() - real(ref64, mask)).abs().max().item()
        scale = real(ref, mask).abs().max().item()
        same_reload = bool(torch.equal(lg1, lg2)) and bool(torch.equal(tk1, tk2))
        same_export = read_checkpoint(exp2).keys() == weights.keys() and all(
            torch.equal(read_checkpoint(exp2)[k], v) for k, v in weights.items())
        # Greedy tokens: the first must be the argmax of the reference's last position.
        first_ok = bool(torch.equal(tk1[:, 0], ref[:, -1].argmax(-1)))
        ok = err <= max(1e-4, 2 * noise) and same_reload and same_export and first_ok
        failed |= not ok
        rows.append((case, err, noise, scale, same_reload, same_export, first_ok, "ok" if ok else "FAIL"))
    print(f"self-check (no transformers), torch {torch.__version__}, device {args.device}\n")
    print("| model | max abs logit err vs fp64 reference | the fp32 reference's own err (bound: max(1e-4, 2x)) | "
          "logit scale | reload of export: same logits+tokens | export of export identical | "
          "first greedy token = reference argmax | result |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.3g} | {r[2]:.3g} | {r[3]:.3g} | {r[4]} | {r[5]} | {r[6]} | {r[7]} |")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--driver", default="build/bench/bench_hf_forward")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--attn", default="eager", help="transformers attn_implementation (eager | sdpa)")
    ap.add_argument("--selfcheck", action="store_true", help="CPU self-check without transformers")
    args = ap.parse_args()
    if args.work is None:
        args.work = tempfile.mkdtemp(prefix="hf_parity_")
    os.makedirs(args.work, exist_ok=True)
    sys.exit(selfcheck(args) if args.selfcheck else gpu_parity(args))


if __name__ == "__main__":
    main()
