#!/usr/bin/env bash
# FSDP on a real local cluster (issue #15): `verlctl up --local 2`, then the built-in PPO job on 2
# ranks (2 nodes) with verl's default sharding (fsdp_size=-1), the rollout tensor-parallel over
# both ranks (rollout.tensor_model_parallel_size=2) and every offload on
# (actor_rollout_ref.actor / critic.model / actor_rollout_ref.ref fsdp_config.param_offload,
# optimizer_offload), the KL loss so that the reference is sharded too, and then the same with
# LoRA adapters (lora_rank=16, added after the warm start; the reference = that base model).
# Each job must SUCCEED, write the sharded checkpoint of both ranks (model_world_size_2_rank_{0,1}.pt), and learn: val/score/mean
# after the RL steps above the score right after the warm start. Label "learning".
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs.sh"
export VERLCTL_HOME=$(mktemp -d)
name=fsdp$$
dir=$VERLCTL_HOME/$name
STEPS=${STEPS:-20}
MIN_GAIN=${MIN_GAIN:-0.05}
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME"
}
trap cleanup EXIT
read -r port store < <(free_ports 2)
err=$("$v" up --local 2 --name "$name" head.dashboard_port=$port head.store_port=$store --skip-preflight --timeout 60 2>&1 >/dev/null)
check "up --local 2" '[ $? -eq 0 ]' || { echo "$err" >&2; exit 1; }

offload="actor_rollout_ref.actor.fsdp_config.param_offload=true actor_rollout_ref.actor.fsdp_config.optimizer_offload=true
  critic.model.fsdp_config.param_offload=true critic.model.fsdp_config.optimizer_offload=true
  actor_rollout_ref.ref.fsdp_config.param_offload=true actor_rollout_ref.actor.use_kl_loss=true
  actor_rollout_ref.rollout.tensor_model_parallel_size=2"
job="trainer.nnodes=2 trainer.n_gpus_per_node=1 trainer.total_training_steps=$STEPS trainer.test_freq=$STEPS
  trainer.val_before_train=true trainer.save_freq=$STEPS"

learned() {  # learned JOB LABEL: the job's first and last val/score/mean, and the gain check
  local id=$1 label=$2 m
  m=$dir/jobs/$id/checkpoints/verlctl/default/metrics.jsonl
  read -r first last < <(python3 -c '
import json, sys
vals = [json.loads(l)["val/score/mean"] for l in open(sys.argv[1]) if "val/score/mean" in l]
print(vals[0], vals[-1])' "$m")
  echo "$label: val/score/mean $first -> $last in $STEPS steps" >&2
  check "$label: the score rises by at least $MIN_GAIN ($first -> $last)" \
    "python3 -c 'import sys; sys.exit(not $last - $first >= $MIN_GAIN)'"
}

n=0
for variant in offload lora; do
  n=$((n + 1))
  extra=$offload
  [ $variant = lora ] && extra="actor_rollout_ref.model.lora_rank=16 actor_rollout_ref.model.lora_alpha=32
    actor_rollout_ref.actor.optim.lr=2e-3 actor_rollout_ref.actor.use_kl_loss=true"
  t0=$(date +%s)
  out=$("$v" submit --name "$name" $job $extra 2>"$VERLCTL_HOME/submit.err"); rc=$?
  serr=$(cat "$VERLCTL_HOME/submit.err")
  echo "$serr" | tail -4 >&2
  echo "$variant: $(( $(date +%s) - t0 )) s" >&2
  check "$variant: the 2-rank job SUCCEEDED" '[ $rc -eq 0 ] && grep -q "job-$n SUCCEEDED" <<<"$serr"' || { echo "$out" | tail -30 >&2; continue; }
  ck=$dir/jobs/job-$n/checkpoints/verlctl/default/global_step_$STEPS
  check "$variant: both ranks wrote their actor shards" '[ -s "$ck/actor/model_world_size_2_rank_0.pt" ] && [ -s "$ck/actor/model_world_size_2_rank_1.pt" ]'
  if [ $variant = offload ]; then
    check "offload: the sharded reference is in the checkpoint" '[ -s "$ck/ref/model_world_size_2_rank_1.pt" ]'
    check "offload: the rollout is tensor-parallel over both ranks" 'grep -q "rollout: tensor-parallel, 1 group(s) of 2 ranks" <<<"$out"'
  else
    check "lora: no reference copy (the base model is the reference)" '[ ! -e "$ck/ref" ]'
    check "lora: the log says how many parameters are trainable" 'grep -q "actor: LoRA r=16" <<<"$out"'
  fi
  learned job-$n "$variant"
done
exit $failed
