#!/usr/bin/env bash
# use_remove_padding on the GPU: the same PPO job with the packed path on and off (actor and
# critic), bf16 compute, on a Qwen2 model written by make_hf_model.py (V = 151,936), at two
# response lengths. Prints per mode: median timing_s/step and update_actor over steps 2..N, peak
# memory, and the last step's score/losses (they must agree to bf16 noise across modes).
#   bench/packed_gpu.sh VERLCTL TOKENIZER_DIR OUT_DIR
set -euo pipefail
v=${1:?verlctl} tok=${2:?tokenizer dir} out=${3:?out dir}
mkdir -p "$out"
python3 "$(dirname "$0")/../tests/integration/lib/make_hf_model.py" "$out/model" "$tok" --hidden 256 --layers 4 >/dev/null
for resp in 8 128; do
  for rmpad in false true; do
    d="$out/r${resp}_rmpad_${rmpad}"
    "$v" train actor_rollout_ref.model.path="$out/model" trainer.device=cuda actor_rollout_ref.model.dtype=bfloat16 \
      data.max_prompt_length=32 data.max_response_length=$resp data.train_batch_size=64 actor_rollout_ref.rollout.n=4 \
      actor_rollout_ref.actor.ppo_mini_batch_size=32 trainer.sft_warmup_steps=30 trainer.total_training_steps=6 \
      actor_rollout_ref.model.use_remove_padding=$rmpad critic.model.use_remove_padding=$rmpad \
      actor_rollout_ref.model.enable_gradient_checkpointing=false critic.model.enable_gradient_checkpointing=false \
      trainer.default_local_dir="$d" >"$d.log" 2>&1 || { tail -20 "$d.log"; exit 1; }
    python3 - "$d/metrics.jsonl" "resp $resp rmpad $rmpad" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"timing_s/step"' in l]
med = lambda k: statistics.median(r[k] for r in rows[1:])
last = rows[-1]
print(f"{sys.argv[2]}: step {med('timing_s/step'):.3f} s, update_actor {med('timing_s/update_actor'):.3f} s, "
      f"old_log_prob {med('timing_s/old_log_prob'):.3f} s, max_alloc {max(r.get('perf/max_memory_allocated_gb',0) for r in rows):.2f} GB, "
      f"score {last.get('critic/score/mean')}, pg_loss {last.get('actor/pg_loss')}, vf_loss {last.get('critic/vf_loss')}")
PY
  done
done
