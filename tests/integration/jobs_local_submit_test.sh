#!/usr/bin/env bash
# `verlctl submit` of a train job on a real local cluster (up --local 2), 2 ranks on 2 nodes:
# it waits for the job's end and exits 0 on SUCCEEDED, shows progress, follows both ranks' lines
# prefixed by rank and host, and says where the checkpoints and logs are; the ranks ran in the
# agent's job directory. Own VERLCTL_HOME and free ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

t0=$(date +%s)
out=$("$v" submit --name "$name" $tiny trainer.total_training_steps=3 2>"$VERLCTL_HOME/submit.err"); rc=$?
serr=$(cat "$VERLCTL_HOME/submit.err")
echo "$serr" | tail -8 >&2
check "submit waits and exits 0 (SUCCEEDED)" '[ $rc -eq 0 ]'
check "submit says it SUCCEEDED and where the files are" 'grep -q "job-1 SUCCEEDED" <<<"$serr" && grep -q "checkpoints:" <<<"$serr" && grep -q "logs:" <<<"$serr"'
check "submit follows rank 0 and rank 1, each line with its host" 'grep -q "^\[rank 0 $(hostname)\] " <<<"$out" && grep -q "^\[rank 1 $(hostname)\] " <<<"$out"'
check "submit shows progress" 'grep -qE "^job-1 (PENDING|RUNNING) step 0/3" <<<"$serr"'
check "the job ran in the agent's job directory" '[ -s "$dir/jobs/job-1/checkpoints/verlctl/default/metrics.jsonl" ] && [ -s "$dir/jobs/job-1/logs/rank-1.attempt-0.err" ]'
echo "job: $(( $(date +%s) - t0 )) s" >&2

jobs_local_down
exit $failed
