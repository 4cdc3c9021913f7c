#!/usr/bin/env bash
# The head killed -9 while a train job runs on a real local cluster (up --local 2), then started
# again on its state directory: every job is still listed with its logs and events (a finished
# one, a failed one), and the job that ran across the restart is taken back and SUCCEEDS, its
# events saying the head restarted. Own VERLCTL_HOME and free ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

# History for the new head to find: job-1 SUCCEEDED with its logs, job-2 FAILED (a rank killed
# as soon as it started) with its failure.
"$v" submit --name "$name" $tiny trainer.total_training_steps=3 >/dev/null 2>&1
check "job-1 SUCCEEDED" '[ "$(job_field job-1 "j[\"state\"]")" = SUCCEEDED ]'
"$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=400 >/dev/null
wait_for 60 '[ -n "$(rank_pid job-2 1)" ]'
kill_rank job-2 "$(rank_pid job-2 1)"
check "job-2 FAILED" '[ "$(job_field job-2 "j[\"state\"]")" = FAILED ]'
lines_before=$("$v" logs job-1 --name "$name" | wc -l)

# 150 steps, and the check right before the kill: the job must still run when the head dies.
head_pid=$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p["role"]=="head"][0])' "$dir/state.json")
id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=150)
wait_for_step $id
check "$id still runs when its head is killed" '[ "$(job_field $id "j[\"state\"]")" = RUNNING ]'
kill -9 "$head_pid"
setsid "$v" head --state-dir "$dir" >>"$dir/logs/head.log" 2>&1 </dev/null &
wait_for 30 '"$v" jobs --name "$name" >/dev/null 2>&1'
check "the restarted head lists every job" '[ "$("$v" jobs --name "$name" -o json | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"jobs\"]))")" = 3 ]'
check "job-1's logs are all there" '[ "$("$v" logs job-1 --name "$name" | wc -l)" -eq "$lines_before" ]'
check "job-2's events and failure are there" '[ "$(job_field job-2 "j[\"state\"]")" = FAILED ] && job_field job-2 "j[\"failure\"][\"reason\"]" | grep -q "signal 9"'
rout=$("$v" logs $id -f --name "$name" 2>&1); rc=$?
check "the job running across the restart is taken back and SUCCEEDS" '[ "$(job_field $id "j[\"state\"]")" = SUCCEEDED ]'
check "logs -f followed it to its end" '[ $rc -eq 0 ] && grep -q "^\[rank 1 " <<<"$rout"'
check "its events say the head restarted" 'job_field $id "\" \".join(e[\"detail\"] for e in j[\"events\"])" | grep -q "head restarted"'

jobs_local_down
exit $failed
