#!/usr/bin/env bash
# `verlctl submit -- CMD` across a 4-host SSH cluster (real OpenSSH servers on 127.0.0.2-5,
# tests/integration/lib/ssh_hosts.sh): /usr/bin/python3 with a Gloo all-reduce, one rank per
# host, prints the sum 10 on every rank, each in the copy of --working-dir that its node
# fetched into its own job directory over there; --ranks-per-node 1 on 2 slots per host runs
# four ranks, one per host; a rank exiting 3 fails the job naming rank, host and exit code.
set -u
source "$VERL_SOURCE_DIR/tests/integration/lib/ssh_hosts.sh"
source "$VERL_SOURCE_DIR/tests/integration/lib/jobs.sh"
v=$VERLCTL
name=sshcmd
ssh_hosts_start verl_ssh_cmd 4
trap 'ssh_hosts_cleanup $name' EXIT
spec=$(ssh_hosts_spec $name 6)

out=$("$v" up -f "$spec" --skip-preflight --timeout 120 2>&1)
rc=$?
check "up over 4 ssh hosts" '[ $rc -eq 0 ]' || { echo "$out" >&2; exit 1; }

wd=$work/src
mkdir -p "$wd"
cp "$VERL_SOURCE_DIR/tests/integration/lib/allreduce.py" "$wd/"

# 1. One rank per host: 1+2+3+4 = 10 on every rank.
out=$("$v" submit --name $name trainer.nnodes=4 trainer.n_gpus_per_node=1 --working-dir "$wd" --env GREETING=ssh \
  -- /usr/bin/python3 allreduce.py 2>"$work/submit.err"); rc=$?
serr=$(cat "$work/submit.err")
echo "$out" | grep sum >&2
check "submit -- CMD over ssh exits 0 (SUCCEEDED)" '[ $rc -eq 0 ] && grep -q "job-1 SUCCEEDED" <<<"$serr"' || echo "$serr" >&2
for r in 0 1 2 3; do
  n=$(job_field job-1 "[p[\"node\"] for p in j[\"placement\"] if p[\"rank\"]==$r][0]")
  check "rank $r prints the sum 10 with GROUP_RANK $r and --env" \
    'grep -q "^\[rank $r $(hostname)\] rank $r of 4 sum 10 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$r GREETING=ssh " <<<"$out"'
  check "rank $r ran in node $n's own copy of the working directory" \
    'grep -q "^\[rank $r .* cwd=$work/remote/$name/nodes/$n/jobs/job-1/work " <<<"$out" && [ -s "$work/remote/$name/nodes/$n/jobs/job-1/work/allreduce.py" ]'
done
check "the four ranks ran on four nodes" '[ "$(job_field job-1 "\" \".join(sorted(p[\"node\"] for p in j[\"placement\"]))")" = "$hosts" ]'

# 2. --ranks-per-node 1 with two slots per host: four ranks, one per host.
out=$("$v" submit --name $name trainer.nnodes=4 trainer.n_gpus_per_node=2 --ranks-per-node 1 --working-dir "$wd" \
  -- /usr/bin/python3 allreduce.py 2>/dev/null); rc=$?
check "--ranks-per-node 1: one rank per host, sum 10" \
  '[ $rc -eq 0 ] && [ "$(grep -c " of 4 sum 10 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 " <<<"$out")" -eq 4 ]' || echo "$out" >&2

# 3. A rank exiting 3 fails the job naming rank, host and exit code.
"$v" submit --name $name trainer.nnodes=4 trainer.n_gpus_per_node=1 \
  -- sh -c '[ "$RANK" = 2 ] && exit 3; sleep 41' >/dev/null 2>"$work/fail.err"; rc=$?
ferr=$(cat "$work/fail.err")
echo "$ferr" | tail -3 >&2
n=$(job_field job-3 "[p[\"node\"] for p in j[\"placement\"] if p[\"rank\"]==2][0]")
check "a rank exiting 3 fails the job naming rank 2, its host, node and code" \
  '[ $rc -eq 1 ] && grep -q "job-3 FAILED: rank 2 on $(hostname) ($n) exited with code 3$" <<<"$ferr"'
check "the other ranks were stopped on their hosts" 'wait_for 15 "! pgrep -f \"sleep 41\" >/dev/null"'
exit $failed
