#!/usr/bin/env bash
# Trainer throughput on a GPU: the default job and a larger model, in float32 and bfloat16,
# each run through `verlctl train` on CUDA; prints the median perf/throughput (tokens/s per
# rank) and timing_s/step over the steps after the first (warm-up).
# Usage: bench/trainer_gpu.sh [verlctl] [steps]      (on the GPU machine: build-gpu/verlctl)
set -euo pipefail
v=${1:-build-gpu/verlctl}
steps=${2:-8}
large=(actor_rollout_ref.model.hidden_size=1024 actor_rollout_ref.model.intermediate_size=2816
       actor_rollout_ref.model.num_hidden_layers=8 actor_rollout_ref.model.num_attention_heads=16
       actor_rollout_ref.model.num_key_value_heads=4 data.train_batch_size=256
       actor_rollout_ref.actor.ppo_mini_batch_size=128 critic.ppo_mini_batch_size=128
       actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=256 critic.ppo_micro_batch_size_per_gpu=256)
printf '%-8s %-9s %14s %12s\n' model dtype tokens/s/rank s/step
for size in default large; do
  for dtype in float32 bfloat16; do
    dir=$(mktemp -d)
    extra=()
    [ "$size" = large ] && extra=("${large[@]}")
    "$v" train --log-level warn trainer.device=cuda actor_rollout_ref.model.dtype=$dtype \
      trainer.total_training_steps="$steps" trainer.val_before_train=false trainer.test_freq=-1 \
      trainer.default_local_dir="$dir" trainer.metrics_file="$dir/m.jsonl" "${extra[@]}" >/dev/null
    python3 - "$dir/m.jsonl" "$size" "$dtype" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if "perf/throughput" in r][1:]
tp = statistics.median(r["perf/throughput"] for r in rows)
st = statistics.median(r["timing_s/step"] for r in rows)
print(f"{sys.argv[2]:8} {sys.argv[3]:9} {tp:14.0f} {st:12.3f}")
PY
    rm -rf "$dir"
  done
done
