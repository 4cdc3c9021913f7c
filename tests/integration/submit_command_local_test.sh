#!/usr/bin/env bash
# `verlctl submit -- CMD` on a local cluster (up --local 2): /usr/bin/python3 with a Gloo
# all-reduce as 2x2 ranks prints the right sum on every rank, with torchrun's variables, --env
# and the --working-dir copy as its cwd; `jobs` shows the command; --ranks-per-node 1 runs one
# rank per node; a rank exiting 3 fails the job naming rank, host and exit code; stop and
# trainer.max_restarts work as for a train job. Own VERLCTL_HOME and free ports.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs.sh"

export VERLCTL_HOME=$(mktemp -d)
name=cmd$$
dir=$VERLCTL_HOME/$name
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME"
}
trap cleanup EXIT

read -r port store < <(free_ports 2)
fast="head.heartbeat_interval_s=0.3 head.heartbeat_timeout_s=4 head.agent_exit_after_s=60"
err=$("$v" up --local 2 --name "$name" head.dashboard_port=$port head.store_port=$store $fast --skip-preflight --timeout 60 2>&1 >/dev/null)
rc=$?
check "up --local 2" '[ $rc -eq 0 ]' || { echo "$err" >&2; exit 1; }

wd=$VERLCTL_HOME/src
mkdir -p "$wd/sub"
cp "$VERL_SOURCE_DIR/tests/integration/lib/allreduce.py" "$wd/"
echo data >"$wd/sub/file.txt"

# 1. Four ranks, two per node, of a Gloo all-reduce: 1+2+3+4 = 10 on every rank.
out=$("$v" submit --name "$name" trainer.nnodes=2 trainer.n_gpus_per_node=2 --working-dir "$wd" --env GREETING=hi \
  -- /usr/bin/python3 allreduce.py --lr 1e-5 2>"$VERLCTL_HOME/submit.err"); rc=$?
serr=$(cat "$VERLCTL_HOME/submit.err")
echo "$out" | grep "sum" >&2
check "submit -- CMD waits and exits 0 (SUCCEEDED)" '[ $rc -eq 0 ] && grep -q "job-1 SUCCEEDED" <<<"$serr"' || echo "$serr" >&2
for r in 0 1 2 3; do
  check "rank $r of 4 prints the sum 10, with its host" 'grep -q "^\[rank $r $(hostname)\] rank $r of 4 sum 10 " <<<"$out"'
done
check "LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK as torchrun's" \
  'grep -q "rank 3 of 4 sum 10 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 " <<<"$out" && grep -q "rank 0 of 4 sum 10 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 " <<<"$out"'
check "--env reaches every rank" '[ "$(grep -c "GREETING=hi " <<<"$out")" -eq 4 ]'
check "the command's own options after -- reach it" '[ "$(grep -c "args=--lr 1e-5$" <<<"$out")" -eq 4 ]'
check "the ranks run in the copy of --working-dir in the job directory" \
  '[ "$(grep -c "cwd=$dir/jobs/job-1/work " <<<"$out")" -eq 4 ] && [ "$(cat "$dir/jobs/job-1/work/sub/file.txt")" = data ]'
jobs=$("$v" jobs --name "$name")
echo "$jobs" >&2
check "jobs shows the command of a command job" 'grep -q "^job-1 .*command .*SUCCEEDED .*/usr/bin/python3 allreduce.py" <<<"$jobs"'
check "status JOB -o json says what it runs" \
  '[ "$(job_field job-1 "j[\"command_spec\"][\"argv\"][0] + \" \" + j[\"command_spec\"][\"working_dir\"][\"source\"]")" = "/usr/bin/python3 $wd" ]'
check "logs JOB --rank 2 has rank 2's line" '"$v" logs job-1 --name "$name" --rank 2 | grep -q "rank 2 of 4 sum 10"'

# 2. --ranks-per-node 1: one process per node (a launcher such as torchrun starts the rest).
out=$("$v" submit --name "$name" trainer.nnodes=2 trainer.n_gpus_per_node=2 --ranks-per-node 1 --working-dir "$wd" \
  -- /usr/bin/python3 allreduce.py 2>/dev/null); rc=$?
check "--ranks-per-node 1: two ranks, one per node, sum 3" \
  '[ $rc -eq 0 ] && [ "$(grep -c " of 2 sum 3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 " <<<"$out")" -eq 2 ]' || echo "$out" >&2
check "--ranks-per-node 1: the ranks are on both nodes" \
  '[ "$(job_field job-2 "\" \".join(p[\"node\"] + \":\" + p[\"device\"] for p in j[\"placement\"])")" = "node-0:cpu:2 node-1:cpu:2" ]'

# 3. A rank exiting 3 fails the job naming rank, host and exit code.
"$v" submit --name "$name" trainer.nnodes=2 trainer.n_gpus_per_node=1 \
  -- sh -c 'echo "rank $RANK here"; [ "$RANK" = 1 ] && exit 3; sleep 37' >/dev/null 2>"$VERLCTL_HOME/fail.err"; rc=$?
ferr=$(cat "$VERLCTL_HOME/fail.err")
echo "$ferr" | tail -4 >&2
check "a rank exiting 3: submit exits 1" '[ $rc -eq 1 ]'
check "the failure names rank 1, its host, its node and exit code 3" \
  'grep -q "job-3 FAILED: rank 1 on $(hostname) (node-1) exited with code 3$" <<<"$ferr"'
check "and shows the rank's last lines" 'grep -q "rank 1 here" <<<"$ferr"'
check "the other rank was stopped" 'wait_for 10 "! pgrep -f \"sleep 37\" >/dev/null"'

# 4. stop ends a command job; trainer.max_restarts restarts one.
id=$("$v" submit --name "$name" --no-wait trainer.nnodes=1 trainer.n_gpus_per_node=1 -- sleep 300)
check "submit --no-wait -- CMD prints the job id" '[ "$id" = job-4 ]'
wait_for 20 '[ "$(job_field job-4 "j[\"placement\"][0][\"state\"]")" = running ]'
state_is() { [ "$(job_field "$1" "j[\"state\"]")" = "$2" ]; }
"$v" stop job-4 --name "$name" >/dev/null 2>&1
check "stop: the command job is STOPPED" 'wait_for 20 "state_is job-4 STOPPED"'
out=$("$v" submit --name "$name" trainer.nnodes=1 trainer.n_gpus_per_node=1 trainer.max_restarts=1 \
  -- sh -c 'if [ -e tried ]; then echo second; else touch tried; exit 5; fi' 2>/dev/null); rc=$?
check "max_restarts=1: a command that fails once SUCCEEDS on its second attempt" \
  '[ $rc -eq 0 ] && [ "$(job_field job-5 "j[\"restarts\"]")" = 1 ] && grep -q "second" <<<"$out"'
exit $failed
