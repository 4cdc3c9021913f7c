#!/usr/bin/env bash
# A trainer rank killed -9 mid-run on a real local cluster (up --local 2), 2 ranks on 2 nodes:
# the job is FAILED within the heartbeat timeout, the failure names the rank, its host and
# signal 9 with the rank's last lines, and the other rank is stopped. Own VERLCTL_HOME and free
# ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=400); rc=$?
check "submit --no-wait answers the id" '[ $rc -eq 0 ] && [ "$id" = job-1 ]'
wait_for_step $id
victim=$(rank_pid $id 1)
check "rank 1 of $id runs (pid ${victim:-none})" '[ -n "$victim" ]' || exit 1
kill_rank $id "$victim"
check "the killed rank fails the job within the heartbeat timeout" '[ "$(job_field $id "j[\"state\"]")" = FAILED ] && [ $fail_ms -lt $(( timeout_s * 1000 )) ]'
check "the failure names rank 1, its host and signal 9" 'grep -q "rank 1 on $(hostname)" <<<"$reason" && grep -q "killed by signal 9" <<<"$reason" && [ "$(job_field $id "j[\"failure\"][\"signal\"]")" = 9 ]'
check "the failure carries the rank's last lines" '[ "$(job_field $id "len(j[\"failure\"][\"last_lines\"])")" -ge 1 ]'
wait_for 20 '[ -z "$(rank_pids $id)" ]'
check "rank 0 is stopped too: no rank of $id is left" '[ -z "$(rank_pids $id)" ]'

jobs_local_down
exit $failed
