#!/usr/bin/env bash
# One GPU: the largest Qwen2.5 shape whose PPO / GRPO step runs with FSDP offload against without
# (issue #15). Same job as bench/ppo_shapes_gpu.sh (random bf16 weights from make_hf_model.py, fp32
# master weights + AdamW, bf16 compute, the slot engine, 16 prompts x n=4, responses up to 256
# tokens, dynamic micro-batches of 16,384 tokens), one step, per offload setting:
#   none     every role's state on the GPU (the replicated engine)
#   optim    fsdp_config.optimizer_offload=true: Adam moments and the fp32 copy the optimizer steps
#            on the CPU (the sharded engine on one rank)
#   both     param_offload=true too: the fp32 weights and gradients live on the CPU between uses,
#            each layer copied in for its forward / backward
# CASES: "shape:estimator:checkpointing" items (default "3b:gae:false 7b:grpo:true").
#   bench/offload_gpu.sh VERLCTL TOKENIZER_DIR OUT_DIR [CASES]
set -euo pipefail
v=${1:?verlctl} tok=${2:?tokenizer dir} out=${3:?out dir} cases=${4:-3b:gae:false 7b:grpo:true}
mkdir -p "$out"
declare -A shape=(
  [0.5b]="--hidden 896 --layers 24 --heads 14 --kv-heads 2 --intermediate 4864"
  [1.5b]="--hidden 1536 --layers 28 --heads 12 --kv-heads 2 --intermediate 8960"
  [3b]="--hidden 2048 --layers 36 --heads 16 --kv-heads 2 --intermediate 11008"
  [7b]="--hidden 3584 --layers 28 --heads 28 --kv-heads 4 --intermediate 18944 --untied")
declare -A offload=(
  [none]=""
  [optim]="actor_rollout_ref.actor.fsdp_config.optimizer_offload=true critic.model.fsdp_config.optimizer_offload=true"
  [both]="actor_rollout_ref.actor.fsdp_config.optimizer_offload=true critic.model.fsdp_config.optimizer_offload=true actor_rollout_ref.actor.fsdp_config.param_offload=true critic.model.fsdp_config.param_offload=true")
made=""
for c in $cases; do
  IFS=: read -r s est ckpt <<<"$c"
  if [ "$made" != "$s" ]; then
    rm -rf "$out/model"
    python3 "$(dirname "$0")/../tests/integration/lib/make_hf_model.py" "$out/model" "$tok" ${shape[$s]} --bf16 \
      --max-pos 32768 --rope-theta 1000000 >/dev/null
    made=$s
  fi
  for mode in ${MODES:-none optim both}; do
    d="$out/$s-$est-$ckpt-$mode"
    rc=0
    start=$(date +%s%N)
    timeout "${RUN_TIMEOUT:-240}" "$v" train actor_rollout_ref.model.path="$out/model" trainer.device=cuda actor_rollout_ref.model.dtype=bfloat16 \
      algorithm.adv_estimator="$est" \
      actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=${GPU_UTIL:-0.9} data.max_prompt_length=128 data.max_response_length=256 \
      data.train_batch_size=16 actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=16 \
      actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384 \
      critic.use_dynamic_bsz=true critic.ppo_max_token_len_per_gpu=16384 \
      actor_rollout_ref.model.enable_gradient_checkpointing=$ckpt critic.model.enable_gradient_checkpointing=$ckpt \
      ${offload[$mode]} \
      trainer.val_before_train=false trainer.total_training_steps=1 trainer.default_local_dir="$d" \
      >"$d.log" 2>&1 || rc=$?
    wall=$(( ($(date +%s%N) - start) / 1000000 ))e-3  # seconds, without bc
    python3 - "$d" "$s" "$est" "$ckpt" "$mode" "$rc" "$wall" <<'PY'
import json, os, sys
d, s, est, ckpt, mode, rc, wall = sys.argv[1:8]
row = {"shape": s, "estimator": est, "checkpointing": ckpt == "true", "offload": mode, "rc": int(rc),
       "wall_s": round(float(wall), 1)}
path = os.path.join(d, "metrics.jsonl")
rows = [json.loads(l) for l in open(path) if '"timing_s/step"' in l] if os.path.exists(path) else []
if rows:
    r = rows[-1]
    for k in ["timing_s/step", "timing_s/gen", "timing_s/update_actor", "timing_s/update_critic",
              "timing_s/update_weights", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb",
              "perf/cpu_memory_used_gb", "perf/mfu/actor"]:
        if k in r:
            row[k] = round(r[k], 3)
else:
    lines = [l.strip() for l in open(d + ".log", errors="replace") if l.strip()]
    err = [l for l in lines if "out of memory" in l.lower() or "error" in l.lower()]
    row["error"] = (err or lines or ["no output"])[-1][:300]
print(json.dumps(row), flush=True)
PY
  done
done | tee "$out/offload.jsonl"
