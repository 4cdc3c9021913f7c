# Sourced by the job tests: check (lib/check.sh), polling waits, and fields of
# a job as `verlctl status JOB -o json` gives them. Expects $v (verlctl) and $name (the cluster).
#   check WHAT 'condition'       prints ok/FAIL: WHAT; a failure sets failed=1 (exit $failed at the end)
#   wait_for SECONDS 'condition' polls every 0.2 s until it holds or the time is up
#   job_field JOB 'expr over j'  prints a python expression over the job's JSON
#   kill_rank JOB PID            kills a rank with -9, waits up to 30 s for the job to be FAILED;
#                                sets $reason (the failure's) and $fail_ms (kill to FAILED)
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

wait_for() {
  local until=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$until" ]; do eval "$2" && return 0; sleep 0.2; done
  eval "$2"
}

job_field() {
  "$v" status "$1" --name "$name" -o json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print($2)" 2>/dev/null
}

kill_rank() {
  local job=$1 t_kill t_failed  # wait_for evals its condition here, where $1 is its own
  kill -9 "$2"
  t_kill=$(date +%s%N)
  wait_for 30 '[ "$(job_field $job "j[\"state\"]")" = FAILED ]'
  t_failed=$(date +%s%N)
  fail_ms=$(( (t_failed - t_kill) / 1000000 ))
  reason=$(job_field "$job" "j[\"failure\"][\"reason\"]")
  echo "failure: $reason ($fail_ms ms after the kill)" >&2
}
