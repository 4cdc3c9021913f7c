#!/usr/bin/env bash
# Peak memory of one PPO step (actor + critic, GAE) per Qwen2.5 shape on one GPU, with and without
# gradient checkpointing (issue #14, table 4): random weights written in BF16 by make_hf_model.py
# (the Qwen3 tokenizer), fp32 master weights and AdamW state, bf16 compute, the slot engine,
# 16 prompts x n=4 of the built-in task, responses up to 256 tokens, use_remove_padding, dynamic
# micro-batches of 16,384 tokens, free_cache_engine. A shape that does not fit reports where it
# ran out (the trainer's error line). GPU_UTIL (default 0.9) is rollout.gpu_memory_utilization,
# which also caps the whole process's allocations (the trainer and the engine share the GPU).
#   bench/ppo_shapes_gpu.sh VERLCTL TOKENIZER_DIR OUT_DIR [SHAPES]   (SHAPES: "0.5b 1.5b 3b 7b")
set -euo pipefail
v=${1:?verlctl} tok=${2:?tokenizer dir} out=${3:?out dir} shapes=${4:-0.5b 1.5b 3b 7b}
mkdir -p "$out"
declare -A shape=(
  [0.5b]="--hidden 896 --layers 24 --heads 14 --kv-heads 2 --intermediate 4864"
  [1.5b]="--hidden 1536 --layers 28 --heads 12 --kv-heads 2 --intermediate 8960"
  [3b]="--hidden 2048 --layers 36 --heads 16 --kv-heads 2 --intermediate 11008"
  [7b]="--hidden 3584 --layers 28 --heads 28 --kv-heads 4 --intermediate 18944 --untied")
for s in $shapes; do
  rm -rf "$out/model"
  python3 "$(dirname "$0")/../tests/integration/lib/make_hf_model.py" "$out/model" "$tok" ${shape[$s]} --bf16 \
    --max-pos 32768 --rope-theta 1000000 >/dev/null
  for ckpt in true false; do
    d="$out/$s-$ckpt"
    rc=0
    timeout 280 "$v" train actor_rollout_ref.model.path="$out/model" trainer.device=cuda actor_rollout_ref.model.dtype=bfloat16 \
      actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=${GPU_UTIL:-0.9} data.max_prompt_length=128 data.max_response_length=256 \
      data.train_batch_size=16 actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=16 \
      actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384 \
      critic.use_dynamic_bsz=true critic.ppo_max_token_len_per_gpu=16384 \
      actor_rollout_ref.model.enable_gradient_checkpointing=$ckpt critic.model.enable_gradient_checkpointing=$ckpt \
      trainer.val_before_train=false trainer.total_training_steps=1 trainer.default_local_dir="$d" \
      >"$d.log" 2>&1 || rc=$?
    python3 - "$d" "$s" "$ckpt" "$rc" <<'PY'
import json, os, sys
d, s, ckpt, rc = sys.argv[1], sys.argv[2], sys.argv[3] == "true", int(sys.argv[4])
row = {"shape": s, "checkpointing": ckpt, "rc": rc, "gpu_util": float(os.environ.get("GPU_UTIL", "0.9"))}
path = os.path.join(d, "metrics.jsonl")
rows = [json.loads(l) for l in open(path) if '"timing_s/step"' in l] if os.path.exists(path) else []
if rows:
    r = rows[-1]
    for k in ["timing_s/step", "timing_s/gen", "timing_s/update_actor", "timing_s/update_critic",
              "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/mfu/actor"]:
        row[k] = round(r.get(k, 0.0), 3)
else:
    lines = [l.strip() for l in open(d + ".log", errors="replace") if l.strip()]
    err = [l for l in lines if "out of memory" in l.lower() or "error" in l.lower()]
    row["error"] = (err or lines or ["no output"])[-1][:300]
print(json.dumps(row), flush=True)
PY
  done
done | tee "$out/shapes.jsonl"
