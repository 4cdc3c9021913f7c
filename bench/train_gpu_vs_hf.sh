#!/usr/bin/env bash
# Training tokens/s and MFU on one GPU, verlctl's actor step against transformers in the same run
# (issue #14, table 2): a random Qwen2-0.5B-shaped model (hidden 896, 24 layers, 14/2 heads,
# intermediate 4864, V = 151,936), fp32 master weights, bf16 compute, batch 16 x 512.
#   bench/train_gpu_vs_hf.sh BUILD_DIR OUT_DIR
# Rows: HF (plain, gradient checkpointing); verlctl's update_policy padded and packed
# (use_remove_padding), with and without checkpointing, on full rows, and on varied lengths
# (about half the tokens). Then where the GPU time of one update goes (bench/trace_summary.py on
# Kineto traces of verlctl's padded step and of HF's step). One JSON line per row, then a table.
set -euo pipefail
b=${1:?build dir} out=${2:?out dir}
here=$(dirname "$0")
mkdir -p "$out/qwen2-0.5b"
cp "$(dirname "$0")/configs/qwen2-0.5b/config.json" "$out/qwen2-0.5b/"
cfg="$out/qwen2-0.5b/config.json"
m=actor_rollout_ref.model
{
  python3 "$here/hf_train.py" "$out/qwen2-0.5b" --profile "$out/hf.trace.json"
  python3 "$here/hf_train.py" "$out/qwen2-0.5b" --checkpointing
  "$b/bench/bench_train_step" --config "$cfg" $m.use_remove_padding=false $m.enable_gradient_checkpointing=false --profile "$out/verlctl.trace.json"
  "$b/bench/bench_train_step" --config "$cfg" $m.use_remove_padding=false $m.enable_gradient_checkpointing=true
  "$b/bench/bench_train_step" --config "$cfg" $m.use_remove_padding=true $m.enable_gradient_checkpointing=false
  "$b/bench/bench_train_step" --config "$cfg" $m.use_remove_padding=true $m.enable_gradient_checkpointing=true
  "$b/bench/bench_train_step" --config "$cfg" --lengths varied $m.use_remove_padding=false $m.enable_gradient_checkpointing=false
  "$b/bench/bench_train_step" --config "$cfg" --lengths varied $m.use_remove_padding=true $m.enable_gradient_checkpointing=false
} | tee "$out/train.jsonl"
for t in verlctl hf; do
  [ -f "$out/$t.trace.json" ] && python3 "$here/trace_summary.py" "$out/$t.trace.json" "$t"
done | tee "$out/profile.jsonl"
python3 - "$out/train.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
hf = next((r for r in rows if r.get("engine") == "hf" and "tokens_per_s" in r), None)
print("| engine | lengths | remove padding | checkpointing | tokens | update s | tokens/s | MFU | vs HF | max allocated GB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if "tokens_per_s" not in r:
        print(f"| {r.get('engine')} | failed: {r.get('error')} |")
        continue
    ratio = f"{r['tokens_per_s'] / hf['tokens_per_s']:.2f}x" if hf else "-"
    ck = r.get("gradient_checkpointing", r["engine"].endswith("checkpointing"))
    print(f"| {r['engine']} | {r.get('lengths', 'full')} | {r.get('remove_padding', '-')} | {ck} | {r['tokens']:.0f} | "
          f"{r['update_s']:.3f} | {r['tokens_per_s']:.0f} | {100 * r['mfu']:.1f}% | {ratio} | {r['max_allocated_gb']:.1f} |")
PY
