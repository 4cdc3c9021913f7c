#!/usr/bin/env bash
# Jobs on a real local cluster (up --local 2) with the real trainer, 2 ranks on 2 nodes:
# submit -> SUCCEEDED with both ranks' lines prefixed by rank and host; jobs; status JOB with
# metrics; a config error -> exit 3 naming the key; a rank killed -9 mid-run -> FAILED naming its
# host and the signal within the heartbeat timeout, no rank left; stop -> STOPPED, no rank left;
# the head killed -9 and restarted -> every job and its logs still there, the running job taken
# back; max_restarts=1 and a killed rank -> RESTARTING, resumed from its checkpoint, SUCCEEDED.
# Own VERLCTL_HOME and free ports: runs beside other tests. Every wait polls a condition.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs.sh"

export VERLCTL_HOME=$(mktemp -d)
name=jobs$$
dir=$VERLCTL_HOME/$name
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  # A trainer rank is a child of an agent (and dies with it); this catches any the test left.
  for p in $(pgrep -f -- "train -f job.yaml" || true); do
    case "$(readlink /proc/$p/cwd 2>/dev/null)" in "$dir"/*) kill -9 "$p" 2>/dev/null ;; esac
  done
  rm -rf "$VERLCTL_HOME"
}
trap cleanup EXIT

read -r port store < <(free_ports 2)
timeout_s=4
fast="head.heartbeat_interval_s=0.3 head.heartbeat_timeout_s=$timeout_s head.agent_exit_after_s=60"

# A tiny 2-rank job: small batches, a short SFT warm start, no validation.
tiny="trainer.nnodes=2 trainer.n_gpus_per_node=1 trainer.sft_warmup_steps=2 trainer.val_before_train=false
  trainer.test_freq=-1 data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8
  critic.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
  critic.ppo_micro_batch_size_per_gpu=16 actor_rollout_ref.rollout.n=4"

# The pids of a job's trainer ranks: processes whose cwd is the job's directory.
rank_pids() {
  local d=$dir/jobs/$1 p
  for p in $(pgrep -f -- "train -f job.yaml" || true); do
    [ "$(readlink /proc/$p/cwd 2>/dev/null)" = "$d" ] && echo "$p"
  done
}
rank_pid() {  # rank_pid JOB RANK
  local p
  for p in $(rank_pids "$1"); do
    tr '\0' ' ' </proc/$p/cmdline | grep -q -- "--rank $2 " && echo "$p"
  done
}

err=$("$v" up --local 2 --name "$name" head.dashboard_port=$port head.store_port=$store $fast --skip-preflight --timeout 60 2>&1 >/dev/null)
rc=$?
check "up --local 2" '[ $rc -eq 0 ]' || { echo "$err" >&2; exit 1; }

# 1. submit, followed to its end.
t0=$(date +%s)
out=$("$v" submit --name "$name" $tiny trainer.total_training_steps=3 2>"$VERLCTL_HOME/submit.err"); rc=$?
serr=$(cat "$VERLCTL_HOME/submit.err")
echo "$serr" | tail -8 >&2
check "submit waits and exits 0 (SUCCEEDED)" '[ $rc -eq 0 ]'
check "submit says it SUCCEEDED and where the files are" 'grep -q "job-1 SUCCEEDED" <<<"$serr" && grep -q "checkpoints:" <<<"$serr" && grep -q "logs:" <<<"$serr"'
check "submit follows rank 0 and rank 1, each line with its host" 'grep -q "^\[rank 0 $(hostname)\] " <<<"$out" && grep -q "^\[rank 1 $(hostname)\] " <<<"$out"'
check "submit shows progress" 'grep -qE "^job-1 (PENDING|RUNNING) step 0/3" <<<"$serr"'
echo "first job: $(( $(date +%s) - t0 )) s" >&2

# 2. jobs, logs, status JOB.
jobs=$("$v" jobs --name "$name"); rc=$?
check "jobs lists job-1 SUCCEEDED" '[ $rc -eq 0 ] && grep -q "^job-1 .*train .*SUCCEEDED .*3/3" <<<"$jobs"'
check "jobs -o json" '"$v" jobs --name "$name" -o json | python3 -c "import json,sys; j=json.load(sys.stdin)[\"jobs\"][0]; assert j[\"id\"]==\"job-1\" and j[\"world_size\"]==2, j"'
logs=$("$v" logs job-1 --name "$name"); rc=$?
check "logs carries both ranks with rank and host prefixes" '[ $rc -eq 0 ] && grep -q "^\[rank 0 $(hostname)\] " <<<"$logs" && grep -q "^\[rank 1 $(hostname)\] " <<<"$logs"'
check "logs --rank 0 --tail 3 gives rank 0's last 3 lines" '[ "$("$v" logs job-1 --name "$name" --rank 0 --tail 3 | grep -c "^\[rank 0 ")" -eq 3 ]'
check "rank 1's log starts with what the agent started" 'grep -q "^\[rank 1 $(hostname)\] verlctl agent: job-1/1/0 (rank 1, attempt 1)" <<<"$logs"'
st=$("$v" status job-1 --name "$name"); rc=$?
echo "$st" | head -12 >&2
check "status JOB shows state, steps and the score" '[ $rc -eq 0 ] && grep -q "SUCCEEDED" <<<"$st" && grep -q "step:     3/3" <<<"$st" && grep -q "critic/score/mean" <<<"$st"'
check "status JOB -o json has the latest metrics of step 3" '[ "$(job_field job-1 "j[\"latest_metrics\"][\"step\"]")" = 3 ]'
check "the job ran in the agent's job directory" '[ -s "$dir/jobs/job-1/checkpoints/verlctl/default/metrics.jsonl" ] && [ -s "$dir/jobs/job-1/logs/rank-1.attempt-0.err" ]'

# 3. A config error: exit 3, the key path named, nothing queued.
cerr=$("$v" submit --name "$name" trainer.nnodes=0 2>&1 >/dev/null); rc=$?
check "a config error exits 3 naming trainer.nnodes" '[ $rc -eq 3 ] && grep -q "trainer.nnodes" <<<"$cerr"'
check "nothing was queued" '[ "$("$v" jobs --name "$name" -o json | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"jobs\"]))")" = 1 ]'
check "no cluster: exit 4 with the hint" '"$v" jobs --name nosuch$$ 2>&1 | grep -q "verlctl up --local 1"; [ "${PIPESTATUS[0]}" -eq 4 ]'

long="$tiny trainer.total_training_steps=400"
# 4. A rank killed -9 mid-run.
id=$("$v" submit --name "$name" --no-wait $long); rc=$?
check "submit --no-wait answers the id" '[ $rc -eq 0 ] && [ "$id" = job-2 ]'
wait_for 90 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
victim=$(rank_pid $id 1)
check "rank 1 of $id runs (pid ${victim:-none})" '[ -n "$victim" ]'
kill_rank $id "$victim"
check "the killed rank fails the job within the heartbeat timeout" '[ "$(job_field $id "j[\"state\"]")" = FAILED ] && [ $fail_ms -lt $(( timeout_s * 1000 )) ]'
check "the failure names rank 1, its host and signal 9" 'grep -q "rank 1 on $(hostname)" <<<"$reason" && grep -q "killed by signal 9" <<<"$reason" && [ "$(job_field $id "j[\"failure\"][\"signal\"]")" = 9 ]'
check "the failure carries the rank's last lines" '[ "$(job_field $id "len(j[\"failure\"][\"last_lines\"])")" -ge 1 ]'
wait_for 20 '[ -z "$(rank_pids $id)" ]'
check "rank 0 is stopped too: no rank of $id is left" '[ -z "$(rank_pids $id)" ]'

# 5. stop.
id=$("$v" submit --name "$name" --no-wait $long)
wait_for 90 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id runs two ranks" '[ "$(rank_pids $id | wc -l)" -eq 2 ]'
sout=$("$v" stop $id --name "$name" --grace 5); rc=$?
check "stop exits 0 and says STOPPED" '[ $rc -eq 0 ] && [ "$sout" = "$id STOPPED" ]'
check "no rank of $id is left" '[ -z "$(rank_pids $id)" ]'
check "the events say STOPPING then STOPPED" '[ "$(job_field $id "\",\".join(e[\"state\"] for e in j[\"events\"])")" = "PENDING,RUNNING,PREFLIGHT,STOPPING,STOPPED" ]'

# 6. The head killed -9 while a job runs, then started again: history and the running job kept.
# 150 steps, and the check right before the kill: the job must still run when the head dies.
lines_before=$("$v" logs job-1 --name "$name" | wc -l)
head_pid=$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p["role"]=="head"][0])' "$dir/state.json")
id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=150)
wait_for 90 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id still runs when its head is killed" '[ "$(job_field $id "j[\"state\"]")" = RUNNING ]'
kill -9 "$head_pid"
setsid "$v" head --state-dir "$dir" >>"$dir/logs/head.log" 2>&1 </dev/null &
wait_for 30 '"$v" jobs --name "$name" >/dev/null 2>&1'
check "the restarted head lists every job" '[ "$("$v" jobs --name "$name" -o json | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"jobs\"]))")" = 4 ]'
check "job-1's logs are all there" '[ "$("$v" logs job-1 --name "$name" | wc -l)" -eq "$lines_before" ]'
check "job-2's events and failure are there" '[ "$(job_field job-2 "j[\"state\"]")" = FAILED ] && job_field job-2 "j[\"failure\"][\"reason\"]" | grep -q "signal 9"'
rout=$("$v" logs $id -f --name "$name" 2>&1); rc=$?
check "the job running across the restart is taken back and SUCCEEDS" '[ "$(job_field $id "j[\"state\"]")" = SUCCEEDED ]'
check "logs -f followed it to its end" '[ $rc -eq 0 ] && grep -q "^\[rank 1 " <<<"$rout"'
check "its events say the head restarted" 'job_field $id "\" \".join(e[\"detail\"] for e in j[\"events\"])" | grep -q "head restarted"'

# 7. max_restarts=1: a killed rank restarts the job, which resumes from its checkpoint.
id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=10 trainer.save_freq=1 trainer.max_restarts=1)
wait_for 120 '[ -s "$dir/jobs/$id/checkpoints/verlctl/default/latest_checkpointed_iteration.txt" ] && [ "$(cat $dir/jobs/$id/checkpoints/verlctl/default/latest_checkpointed_iteration.txt)" -ge 2 ]'
victim=$(rank_pid $id 1)
check "rank 1 of $id runs after its checkpoint" '[ -n "$victim" ]'
kill -9 "$victim"
rout=$("$v" logs $id -f --name "$name" 2>&1)
st=$(job_field $id "j[\"state\"]")
check "$id restarted once and SUCCEEDED" '[ "$st" = SUCCEEDED ] && [ "$(job_field $id "j[\"restarts\"]")" = 1 ]'
check "an event RESTARTING names attempt 2" 'job_field $id "\" \".join(e[\"state\"]+\":\"+e[\"detail\"] for e in j[\"events\"])" | grep -q "RESTARTING:attempt 2 of 2"'
check "attempt 2 resumed from the checkpoint" 'grep -q "resumed from" "$dir/jobs/$id/logs/rank-0.attempt-1.err"'
check "no rank is left" '[ -z "$(rank_pids $id)" ]'

"$v" down --name "$name" >/dev/null 2>&1
check "down leaves no trainer rank" '[ -z "$(for j in $dir/jobs/*; do rank_pids ${j##*/}; done)" ]'
exit $failed
