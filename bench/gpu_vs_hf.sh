#!/usr/bin/env bash
# Rollout tokens/s on one GPU, verlctl against transformers in the same run (issue #14, table 1):
# a random Qwen2-0.5B-shaped model (hidden 896, 24 layers, 14/2 heads, intermediate 4864,
# V = 151,936, bf16), 64 prompts x n=4, prompt 128, 256 new tokens, sampling, no EOS stop.
#   bench/gpu_vs_hf.sh BUILD_DIR OUT_DIR [HF_NEW_TOKENS]
# HF's dynamic-cache generate is slow enough that it runs HF_NEW_TOKENS (default 256) new tokens;
# its tokens/s is per generated token either way. One JSON line per engine, then a table.
set -euo pipefail
b=${1:?build dir} out=${2:?out dir} hf_new=${3:-256}
mkdir -p "$out/qwen2-0.5b"
cp "$(dirname "$0")/configs/qwen2-0.5b/config.json" "$out/qwen2-0.5b/"
cfg="$out/qwen2-0.5b/config.json"
{
  "$b/bench/bench_rollout" --config "$cfg" --engine slot --breakdown
  "$b/bench/bench_rollout" --config "$cfg" --engine slot --unfused
  "$b/bench/bench_rollout" --config "$cfg" --engine slot --eager
  # A pool of 1,601 blocks of 16 positions (a quarter of what 256 sequences of 384 take): the
  # engine admits what fits and preempts when the live sequences outgrow it.
  "$b/bench/bench_rollout" --config "$cfg" --engine slot --kv-blocks 1601
  "$b/bench/bench_rollout" --config "$cfg" --engine native --runs 2 --new-tokens 64
  python3 "$(dirname "$0")/hf_generate.py" "$out/qwen2-0.5b" --mode dynamic --new-tokens "$hf_new"
  [ "${HF_STATIC:-1}" = 0 ] || timeout 300 python3 "$(dirname "$0")/hf_generate.py" "$out/qwen2-0.5b" --mode static-compile --new-tokens "$hf_new" \
    || echo '{"engine": "hf-static-compile", "error": "timed out or crashed"}'
} | tee "$out/rollout.jsonl"
python3 - "$out/rollout.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
hf = next((r for r in rows if r["engine"] == "hf-dynamic" and "tokens_per_s" in r), None)
print("| engine | tokens | median s | tokens/s | vs HF generate |")
print("| --- | --- | --- | --- | --- |")
for r in rows:
    if "tokens_per_s" not in r:
        print(f"| {r['engine']} | - | - | failed: {r.get('error')} | - |")
        continue
    ratio = f"{r['tokens_per_s'] / hf['tokens_per_s']:.1f}x" if hf else "-"
    print(f"| {r['engine']} | {r['tokens']} | {r['median_s']:.3f} | {r['tokens_per_s']:.0f} | {ratio} |")
PY
