#!/usr/bin/env bash
# What a finished train job shows on a real local cluster (up --local 2), 2 ranks on 2 nodes:
# `jobs` lists it (text and -o json), `logs` carries both ranks' lines prefixed by rank and host
# (--rank, --tail), `status JOB` its state, steps and score (-o json: the latest metrics). Own
# VERLCTL_HOME and free ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

"$v" submit --name "$name" $tiny trainer.total_training_steps=3 >/dev/null 2>&1
check "job-1 SUCCEEDED" '[ "$(job_field job-1 "j[\"state\"]")" = SUCCEEDED ]' || exit 1

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

jobs_local_down
exit $failed
