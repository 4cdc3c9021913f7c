#!/usr/bin/env bash
# Issue 16, case 12: a new cluster of the same name over the same node directories (over SSH:
# the same ssh.remote_dir from another machine's up; here: the local backend's, with the old
# head's state.db gone) starts job ids at job-1 again. Its preflight's job-1 must get a
# directory of its own: the old job-1's is moved aside whole (its checkpoints with it, never
# resumed as the new job's), the preflight passes, and the new job's logs hold only its lines.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

export VERLCTL_HOME=$(mktemp -d)
name=jd$$
dir=$VERLCTL_HOME/$name
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME"
}
trap cleanup EXIT

# The first cluster: its preflight is job-1 on both nodes (one work directory on this machine).
read -r port1 store1 < <(free_ports 2)
err=$("$v" up --local 2 --name "$name" head.dashboard_port=$port1 head.store_port=$store1 --timeout 60 2>&1 >/dev/null); rc=$?
check "the first up's preflight passes" '[ $rc -eq 0 ]' || echo "$err" >&2
check "job-1's directory names its owner" '[ -s "$dir/jobs/job-1/.verlctl-owner" ] && grep -q "/job-1$" "$dir/jobs/job-1/.verlctl-owner"'
owner1=$(cat "$dir/jobs/job-1/.verlctl-owner" 2>/dev/null)
mkdir -p "$dir/jobs/job-1/checkpoints" && echo "the first cluster's step 300" >"$dir/jobs/job-1/checkpoints/latest"
"$v" down --name "$name" --timeout 10 >/dev/null 2>&1

# Another head: a new state.db (job ids from job-1 again) over the same node directories.
rm -f "$dir"/state.db*
read -r port2 store2 < <(free_ports 2)
err=$("$v" up --local 2 --name "$name" head.dashboard_port=$port2 head.store_port=$store2 --timeout 60 2>&1 >/dev/null); rc=$?
check "the second up's preflight passes (before: 'no report from ...' after two reports in one file)" '[ $rc -eq 0 ]' || echo "$err" >&2
owner2=$(cat "$dir/jobs/job-1/.verlctl-owner" 2>/dev/null)
check "the new job-1's directory has a new owner ($owner1 -> $owner2)" '[ -n "$owner2" ] && [ "$owner2" != "$owner1" ] && grep -q "/job-1$" <<<"$owner2"'
check "the old checkpoints are not in the new job's directory" '[ ! -e "$dir/jobs/job-1/checkpoints" ]'
aside=$(ls -d "$dir"/jobs/job-1.replaced-* 2>/dev/null)
check "the old job-1 is moved aside whole, once" '[ "$(wc -w <<<"$aside")" -eq 1 ] && grep -q "step 300" "$aside/checkpoints/latest" && [ "$(cat "$aside/.verlctl-owner")" = "$owner1" ]'
check "the agents said so" 'grep -q "belonged to $owner1, not $owner2; moved to" "$dir"/logs/agent-*.log'
for r in 0 1; do
  out=$dir/jobs/job-1/logs/rank-$r.attempt-0.out
  check "rank $r's report is one JSON document" 'python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$out"'
done
check "no log file was moved aside inside the new directory" '[ -z "$(ls "$dir/jobs/job-1/logs" | grep replaced)" ]'
logs=$("$v" logs job-1 --name "$name" 2>/dev/null)
check "the new job-1's logs hold its lines (port $port2)" 'grep -q "head.dashboard_port=$port2" <<<"$logs"'
check "and none of the old job-1's (port $port1)" '! grep -q "head.dashboard_port=$port1" <<<"$logs"'
"$v" down --name "$name" --timeout 10 >/dev/null 2>&1
exit $failed
