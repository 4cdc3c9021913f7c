# Sourced by the jobs_local_*_test.sh scripts: each brings up its own local cluster of two nodes
# (own VERLCTL_HOME, free ports, fast heartbeats), runs the real trainer on it as 2-rank jobs and
# checks one behaviour. Also sources lib/jobs.sh (check, wait_for, job_field, kill_rank).
#   jobs_local_up            up --local 2 as $name, state in $dir; exits the script if up fails;
#                            the EXIT trap downs it and kills any rank of it left
#   $tiny                    overrides of a tiny 2-rank job (small batches, short SFT warm start,
#                            no validation); add trainer.total_training_steps=N
#   $timeout_s               the head's heartbeat timeout (s)
#   rank_pids JOB            the pids of a job's trainer ranks (processes whose cwd is its directory)
#   rank_pid JOB RANK        the pid of one rank
#   wait_for_step JOB        waits up to 90 s for the job to report step 1
#   jobs_local_down          down, then checks no trainer rank of the cluster is left
set -u
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs.sh"

export VERLCTL_HOME=$(mktemp -d)
name=jobs$$
dir=$VERLCTL_HOME/$name
timeout_s=4

tiny="trainer.nnodes=2 trainer.n_gpus_per_node=1 trainer.sft_warmup_steps=2 trainer.val_before_train=false
  trainer.test_freq=-1 data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8
  critic.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
  critic.ppo_micro_batch_size_per_gpu=16 actor_rollout_ref.rollout.n=4"

jobs_local_cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  # A trainer rank is a child of an agent (and dies with it); this catches any the test left.
  for p in $(pgrep -f -- "train -f job.yaml" || true); do
    case "$(readlink /proc/$p/cwd 2>/dev/null)" in "$dir"/*) kill -9 "$p" 2>/dev/null ;; esac
  done
  rm -rf "$VERLCTL_HOME"
}
trap jobs_local_cleanup EXIT

jobs_local_up() {
  local port store err rc
  read -r port store < <(free_ports 2)
  err=$("$v" up --local 2 --name "$name" head.dashboard_port=$port head.store_port=$store \
    head.heartbeat_interval_s=0.3 head.heartbeat_timeout_s=$timeout_s head.agent_exit_after_s=60 \
    --skip-preflight --timeout 60 2>&1 >/dev/null)
  rc=$?
  check "up --local 2" '[ $rc -eq 0 ]' || { echo "$err" >&2; exit 1; }
}

rank_pids() {
  local d=$dir/jobs/$1 p
  for p in $(pgrep -f -- "train -f job.yaml" || true); do
    [ "$(readlink /proc/$p/cwd 2>/dev/null)" = "$d" ] && echo "$p"
  done
}

rank_pid() {
  local p
  for p in $(rank_pids "$1"); do
    tr '\0' ' ' </proc/$p/cmdline | grep -q -- "--rank $2 " && echo "$p"
  done
}

wait_for_step() {
  local job=$1  # wait_for evals its condition here, where $1 is its own
  wait_for 90 '[ "$(job_field $job "j[\"step\"]")" -ge 1 ] 2>/dev/null'
}

jobs_local_down() {
  "$v" down --name "$name" >/dev/null 2>&1
  check "down leaves no trainer rank" '[ -z "$(for j in $dir/jobs/*; do rank_pids ${j##*/}; done)" ]'
}
