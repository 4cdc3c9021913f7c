#!/usr/bin/env bash
# trainer.max_restarts=1 on a real local cluster (up --local 2), 2 ranks on 2 nodes: a rank
# killed -9 after a checkpoint restarts the job (an event RESTARTING, attempt 2 of 2), which
# resumes from its checkpoint and SUCCEEDS. Own VERLCTL_HOME and free ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=10 trainer.save_freq=1 trainer.max_restarts=1)
latest=$dir/jobs/$id/checkpoints/verlctl/default/latest_checkpointed_iteration.txt
wait_for 120 '[ -s "$latest" ] && [ "$(cat "$latest")" -ge 2 ]'
victim=$(rank_pid $id 1)
check "rank 1 of $id runs after its checkpoint" '[ -n "$victim" ]' || exit 1
kill -9 "$victim"
"$v" logs $id -f --name "$name" >/dev/null 2>&1
st=$(job_field $id "j[\"state\"]")
check "$id restarted once and SUCCEEDED" '[ "$st" = SUCCEEDED ] && [ "$(job_field $id "j[\"restarts\"]")" = 1 ]'
check "an event RESTARTING names attempt 2" 'job_field $id "\" \".join(e[\"state\"]+\":\"+e[\"detail\"] for e in j[\"events\"])" | grep -q "RESTARTING:attempt 2 of 2"'
check "attempt 2 resumed from the checkpoint" 'grep -q "resumed from" "$dir/jobs/$id/logs/rank-0.attempt-1.err"'
check "no rank is left" '[ -z "$(rank_pids $id)" ]'

jobs_local_down
exit $failed
