#!/usr/bin/env bash
# The slurm backend against a real SLURM cluster of 4 nodes on this machine (munge, slurmctld,
# one slurmd per node: scripts/services/slurm-cluster.sh, started and stopped here): --dry-run
# shows the sbatch script; up submits it and waits for 4 registered nodes; status shows them and
# the allocation RUNNING; a second up changes nothing; an agent killed -9 is marked lost; down
# ends the allocation (squeue no longer lists it) and leaves no verlctl process; sbatch refusing
# the job (unknown partition) exits 3 with sbatch's own message and leaves nothing behind.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

work=$(mktemp -d)
export VERLCTL_HOME=$work/home
name=sl$$
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  "$v" down --name "$name-bad" --timeout 0 >/dev/null 2>&1
  "$src/scripts/services/slurm-cluster.sh" stop "$work/slurm" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/slurm"
if ! "$src/scripts/services/slurm-cluster.sh" start 4 "$work/slurm"; then
  echo "FAIL: the test SLURM cluster did not start" >&2
  exit 1
fi
source "$work/slurm/env"  # SLURM_CONF: this test never reads /etc/slurm

read -r port store < <(free_ports 2)
cat >"$work/spec.yaml" <<EOF
name: $name
backend: slurm
head:
  dashboard_port: $port
  store_port: $store
  heartbeat_interval_s: 0.3
  heartbeat_timeout_s: 2.0
slurm:
  nodes: 4
  cpus_per_task: 1
  partition: debug
  time: "00:30:00"
EOF
dir=$VERLCTL_HOME/$name
leftovers() { pgrep -f -- "$VERLCTL_HOME" | grep -v "^$$\$" || true; }
listed() { squeue -h -j "$1" -o %T 2>/dev/null | grep -v -E '^(COMPLETED|CANCELLED|FAILED|TIMEOUT)$' || true; }
job_id() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$dir/slurm.json"; }
status_json() { "$v" status --name "$name" -o json 2>/dev/null; }

# --dry-run: the script and the sbatch command; nothing is submitted.
dry=$("$v" up -f "$work/spec.yaml" --dry-run 2>&1); rc=$?
check "dry-run exits 0" '[ $rc -eq 0 ]'
check "dry-run shows the #SBATCH lines" 'grep -qx "#SBATCH --nodes=4" <<<"$dry" && grep -qx "#SBATCH --partition=debug" <<<"$dry"'
check "dry-run shows the sbatch command" 'grep -qx "sbatch --parsable $dir/sbatch.sh" <<<"$dry"'
check "dry-run submits nothing" '[ -z "$(squeue -h)" ] && [ ! -e "$dir" ]'

# up: 4 nodes registered, each reported.
t0=$(date +%s)
err=$("$v" up -f "$work/spec.yaml" --skip-preflight --timeout 120 2>&1 >/dev/null); rc=$?
echo "$err" >&2
check "up exits 0" '[ $rc -eq 0 ]'
check "up reports the allocation, then each node registered" 'grep -q "slurm job" <<<"$err" && [ $(grep -c ": registered" <<<"$err") -eq 4 ]'
job=$(job_id)
check "the job id is recorded" '[ -n "$job" ]'
check "the rendered script is in the state dir" 'grep -q "^#SBATCH --nodes=4" "$dir/sbatch.sh"'

st=$("$v" status --name "$name"); rc=$?
echo "$st" >&2
check "status exits 0" '[ $rc -eq 0 ]'
check "status shows 4/4 alive" 'grep -q "4/4 nodes alive" <<<"$st"'
check "status shows the allocation RUNNING" 'grep -q "allocation: slurm job $job RUNNING on node\[1-4\]" <<<"$st"'
check "status json: 4 registered nodes and the allocation" 'status_json | python3 -c "
import json,sys; d=json.load(sys.stdin)
assert sorted(n[\"name\"] for n in d[\"nodes\"] if n[\"state\"]==\"alive\")==[\"node-0\",\"node-1\",\"node-2\",\"node-3\"], d[\"nodes\"]
assert d[\"allocation\"][\"job_id\"]==\"$job\" and d[\"allocation\"][\"state\"]==\"RUNNING\", d[\"allocation\"]"'

# up again: nothing changes, no second job.
err=$("$v" up -f "$work/spec.yaml" --skip-preflight 2>&1 >/dev/null); rc=$?
check "second up exits 0 and changes nothing" '[ $rc -eq 0 ] && grep -q "nothing changed" <<<"$err"'
check "second up submits no job" '[ "$(squeue -h -o %i)" = "$job" ] && [ "$(job_id)" = "$job" ]'

# An agent killed -9 is lost; the others stay.
victim=$(status_json | python3 -c 'import json,sys; print([n["pid"] for n in json.load(sys.stdin)["nodes"] if n["name"]=="node-2"][0])')
kill -9 "$victim"
state=""
for _ in $(seq 150); do
  state=$(status_json | python3 -c 'import json,sys; print({n["name"]: n["state"] for n in json.load(sys.stdin)["nodes"]}.get("node-2"))' 2>/dev/null)
  [ "$state" = lost ] && break
  sleep 0.2
done
check "the killed agent is lost in status" '[ "$state" = lost ]'
check "the others are still alive" '"$v" status --name "$name" | grep -q "3/4 nodes alive"'

# down: the allocation ends, nothing is left.
err=$("$v" down --name "$name" 2>&1); rc=$?
echo "$err" >&2
check "down exits 0" '[ $rc -eq 0 ]'
check "squeue no longer lists the job" '[ -z "$(listed "$job")" ]'
check "no verlctl process is left" '[ -z "$(leftovers)" ]'
check "status after down exits 4" '"$v" status --name "$name" >/dev/null 2>&1; [ $? -eq 4 ]'

# sbatch refuses the job: its message, exit 3 naming the key, nothing left.
err=$("$v" up -f "$work/spec.yaml" --name "$name-bad" slurm.partition=nosuch --skip-preflight --timeout 60 2>&1); rc=$?
echo "$err" >&2
check "refused job exits 3" '[ $rc -eq 3 ]'
check "refused job shows sbatch's message and the key" 'grep -q "sbatch refused the job" <<<"$err" && grep -qi "invalid partition" <<<"$err" && grep -q "slurm.partition" <<<"$err"'
check "refused job leaves no job and no process" '[ -z "$(squeue -h)" ] && [ -z "$(leftovers)" ]'
echo "slurm test took $(( $(date +%s) - t0 )) s after the cluster started" >&2

exit $failed
