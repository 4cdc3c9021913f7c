#!/usr/bin/env bash
# `verlctl stop JOB` of a running train job on a real local cluster (up --local 2), 2 ranks on 2
# nodes: it exits 0 saying STOPPED, no rank is left, and the job's events say STOPPING then
# STOPPED. Own VERLCTL_HOME and free ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=400)
wait_for_step $id
check "$id runs two ranks" '[ "$(rank_pids $id | wc -l)" -eq 2 ]'
sout=$("$v" stop $id --name "$name" --grace 5); rc=$?
check "stop exits 0 and says STOPPED" '[ $rc -eq 0 ] && [ "$sout" = "$id STOPPED" ]'
check "no rank of $id is left" '[ -z "$(rank_pids $id)" ]'
check "the events say STOPPING then STOPPED" '[ "$(job_field $id "\",\".join(e[\"state\"] for e in j[\"events\"])")" = "PENDING,RUNNING,PREFLIGHT,STOPPING,STOPPED" ]'

jobs_local_down
exit $failed
