#!/usr/bin/env bash
# One whole PPO step (GAE, critic, reference) by phase on one GPU, Qwen2-0.5B shape (V = 151,936,
# random weights written by make_hf_model.py, the real Qwen3 tokenizer), bf16 compute with fp32
# master weights, 64 prompts x n=4 of the built-in task, responses up to 256 tokens (a random
# policy rarely says EOS, so most run to the limit), use_remove_padding, dynamic micro-batches.
# Rows: the rollout engine (rollout.name native = the reference loop, vllm = the slot engine).
# Prints the median over steps 2..N of each timing_s/* phase, tokens/s, MFU and peak memory.
#   bench/ppo_step_gpu.sh VERLCTL TOKENIZER_DIR OUT_DIR [STEPS]
set -euo pipefail
v=${1:?verlctl} tok=${2:?tokenizer dir} out=${3:?out dir} steps=${4:-4}
mkdir -p "$out"
[ -f "$out/model/config.json" ] || python3 "$(dirname "$0")/../tests/integration/lib/make_hf_model.py" "$out/model" "$tok" \
  --hidden 896 --layers 24 --heads 14 --kv-heads 2 --intermediate 4864 --max-pos 32768 --rope-theta 1000000 >/dev/null
for engine in ${ENGINES:-vllm native}; do
  d="$out/$engine"
  "$v" train actor_rollout_ref.model.path="$out/model" trainer.device=cuda actor_rollout_ref.model.dtype=bfloat16 \
    actor_rollout_ref.rollout.name=$engine data.max_prompt_length=128 data.max_response_length=256 \
    data.train_batch_size=64 actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384 \
    trainer.val_before_train=false trainer.total_training_steps=$steps trainer.default_local_dir="$d" \
    >"$d.log" 2>&1 || { tail -20 "$d.log"; exit 1; }
  python3 - "$d/metrics.jsonl" "$engine" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"timing_s/step"' in l]
rest = rows[1:] or rows
med = lambda k: statistics.median(r.get(k, 0.0) for r in rest)
phases = ["gen", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor", "update_weights", "step"]
out = {"engine": sys.argv[2], "steps": len(rows)}
out.update({p: round(med("timing_s/" + p), 3) for p in phases})
for k in ["perf/throughput", "perf/mfu/actor", "perf/mfu/critic", "perf/max_memory_allocated_gb",
          "perf/max_memory_reserved_gb", "response_length/mean", "critic/score/mean"]:
    out[k] = round(med(k), 4)
print(json.dumps(out))
PY
done
