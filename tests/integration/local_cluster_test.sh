#!/usr/bin/env bash
# A local cluster as a user runs it: up --local 2, status, up again (nothing changes), an agent
# killed -9 is marked lost within the heartbeat timeout, down leaves no process behind; plus the
# failures: unreachable head (exit 4), taken port (exit 1, cleaned up), timeout (exit 124),
# backends not in this build (exit 6). Own VERLCTL_HOME and free ports: runs beside other tests.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

export VERLCTL_HOME=$(mktemp -d)
name=it$$
dir=$VERLCTL_HOME/$name
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  "$v" down --name "$name-b" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME"
}
trap cleanup EXIT

read -r port store port2 store2 < <(free_ports 4)
fast="head.heartbeat_interval_s=0.2 head.heartbeat_timeout_s=1.5 head.agent_exit_after_s=20"
ports="head.dashboard_port=$port head.store_port=$store"

# A live process, not a zombie waiting to be reaped.
alive() { [ -r /proc/$1/stat ] && ! awk '{ sub(/.*\) /, ""); exit ($1 == "Z" ? 0 : 1) }' /proc/$1/stat; }
pids() { python3 -c 'import json,sys; print(" ".join(str(p["pid"]) for p in json.load(open(sys.argv[1]))["processes"]))' "$dir/state.json"; }
pid_of() { python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p["node"]==sys.argv[2] or (sys.argv[2]=="head" and p["role"]=="head")][0])' "$dir/state.json" "$1"; }
node_state() { "$v" status --name "$name" -o json 2>/dev/null | python3 -c 'import json,sys; print({n["name"]: n["state"] for n in json.load(sys.stdin)["nodes"]}.get(sys.argv[1], "none"))' "$1"; }
leftovers() { pgrep -f -- "$VERLCTL_HOME" | grep -v "^$$\$" || true; }

# --dry-run starts nothing and shows every command line.
dry=$("$v" up --local 2 --name "$name" $ports --dry-run 2>&1); rc=$?
check "dry-run exits 0" '[ $rc -eq 0 ]'
check "dry-run shows the head's argv" 'grep -qF -- "head --state-dir $dir" <<<"$dry"'
check "dry-run shows both agents" 'grep -qF -- "--node node-0" <<<"$dry" && grep -qF -- "--node node-1" <<<"$dry"'
check "dry-run shows the environment" 'grep -q "environment" <<<"$dry"'
check "dry-run starts nothing, writes nothing" '[ ! -e "$dir" ] && [ -z "$(leftovers)" ]'

# up --local 2
t0=$(date +%s%N)
err=$("$v" up --local 2 --name "$name" $ports $fast --skip-preflight --timeout 30 2>&1 >/dev/null); rc=$?
t1=$(date +%s%N)
echo "$err" >&2
check "up exits 0" '[ $rc -eq 0 ]'
check "up reports each node registered" 'grep -q "node-0: registered" <<<"$err" && grep -q "node-1: registered" <<<"$err"'
check "up does not sleep: done in under 10 s" '[ $(( (t1 - t0) / 1000000 )) -lt 10000 ]'
check "token is 0600" '[ "$(stat -c %a "$dir/token")" = 600 ]'
check "state dir is 0700" '[ "$(stat -c %a "$dir")" = 700 ]'
check "state says up" 'grep -q "\"status\": \"up\"" "$dir/state.json"'
before=$(pids)
check "three processes recorded (head + 2 agents)" '[ $(wc -w <<<"$before") -eq 3 ]'

st=$("$v" status --name "$name"); rc=$?
echo "$st" >&2
check "status exits 0" '[ $rc -eq 0 ]'
check "status shows 2/2 alive" 'grep -q "2/2 nodes alive" <<<"$st"'
check "status json: both nodes alive with resources" '"$v" status --name "$name" -o json | python3 -c "
import json,sys; d=json.load(sys.stdin); n={x[\"name\"]: x for x in d[\"nodes\"]}
assert set(n)=={\"node-0\",\"node-1\"}, n
assert all(x[\"state\"]==\"alive\" and x[\"resources\"][\"cpus\"]>=1 and x[\"resources\"][\"memory_bytes\"]>0 for x in n.values())"'

# The API refuses a request without the token.
code=$(python3 -c 'import sys,urllib.request,urllib.error
try: urllib.request.urlopen("http://127.0.0.1:%s/api/nodes" % sys.argv[1], timeout=5); print(200)
except urllib.error.HTTPError as e: print(e.code)' "$port")
check "request without token is 401" '[ "$code" = 401 ]'

# up again: nothing changes.
err=$("$v" up --local 2 --name "$name" $ports $fast 2>&1 >/dev/null); rc=$?
check "second up exits 0" '[ $rc -eq 0 ]'
check "second up says it changed nothing" 'grep -q "nothing changed" <<<"$err"'
check "second up keeps the same pids" '[ "$(pids)" = "$before" ]'
allalive=1; for p in $before; do alive "$p" || allalive=0; done
check "second up killed nothing" '[ $allalive -eq 1 ]'

# One up/down of a cluster at a time: a held lock is refused, not waited on.
if command -v flock >/dev/null; then
  # The lock is held on this shell's own descriptor, so releasing it is immediate and certain
  # (a background `flock FILE sleep` leaves the sleep holding it after the flock is killed).
  exec 9>>"$dir/lock"
  flock -n 9
  "$v" down --name "$name" >/dev/null 2>"$VERLCTL_HOME/lock.err"; rc=$?
  check "down while another up/down runs is refused" '[ $rc -eq 1 ] && grep -q "is running" "$VERLCTL_HOME/lock.err"'
  check "and stops nothing" '[ "$(node_state node-0)" = alive ]'
  flock -u 9
  exec 9>&-
fi

# A second cluster on the taken port fails, named, and leaves nothing behind.
err=$("$v" up --local 1 --name "$name-b" $ports $fast --skip-preflight --timeout 20 2>&1 >/dev/null); rc=$?
echo "$err" >&2
check "up on a taken port exits 1" '[ $rc -eq 1 ]'
check "it names the head and its log" 'grep -q "head" <<<"$err" && grep -q "head.log" <<<"$err"'
check "it cleans up after itself" '[ -z "$(pgrep -f -- "$VERLCTL_HOME/$name-b/")" ]'
check "the first cluster is untouched" '[ "$(node_state node-0)" = alive ]'

# kill -9 one agent: lost within the heartbeat timeout (1.5 s), the other stays alive.
victim=$(pid_of node-1)
kill -9 "$victim"
lost=0
for _ in $(seq 1 50); do  # 5 s at most
  [ "$(node_state node-1)" = lost ] && { lost=1; break; }
  sleep 0.1
done
check "killed agent is marked lost" '[ $lost -eq 1 ]'
check "the other stays alive" '[ "$(node_state node-0)" = alive ]'
st=$("$v" status --name "$name")
echo "$st" >&2
check "status says why" 'grep -q "no heartbeat for" <<<"$st"'

# up again repairs the cluster: the lost agent is started again, the rest untouched (issue 16, case 10).
err=$("$v" up --local 2 --name "$name" $ports $fast --skip-preflight 2>&1 >/dev/null); rc=$?
echo "$err" >&2
check "up after an agent was lost exits 0" '[ $rc -eq 0 ]'
check "it says it restarted node-1's agent" 'grep -q "restarted the agents of node-1" <<<"$err"'
check "node-1 has a new agent" '[ "$(pid_of node-1)" != "$victim" ] && alive "$(pid_of node-1)"'
back=0
for _ in $(seq 1 50); do [ "$(node_state node-1)" = alive ] && { back=1; break; }; sleep 0.1; done
check "node-1 is alive again" '[ $back -eq 1 ]'

# down: the head shuts the agents down, then itself; nothing is left.
err=$("$v" down --name "$name" 2>&1 >/dev/null); rc=$?
echo "$err" >&2
check "down exits 0" '[ $rc -eq 0 ]'
left=""; for p in $before; do alive "$p" && left="$left $p"; done
check "no recorded process is left" '[ -z "$left" ]'
check "no process names the state dir" '[ -z "$(leftovers)" ]'
check "state says down" 'grep -q "\"status\": \"down\"" "$dir/state.json"'
"$v" status --name "$name" >/dev/null 2>"$VERLCTL_HOME/status.err"; rc=$?
check "status of a down cluster exits 4 naming the address" '[ $rc -eq 4 ] && grep -q "127.0.0.1:$port" "$VERLCTL_HOME/status.err"'
"$v" down --name "$name" >/dev/null 2>&1
check "down again is fine" '[ $? -eq 0 ]'

# A head that dies: status exits 4 with the address and a hint; down signals the agents.
"$v" up --local 1 --name "$name" $ports $fast --skip-preflight --timeout 30 >/dev/null 2>&1
check "up again after down" '[ $? -eq 0 ]'
kill -9 "$(pid_of head)"
"$v" status --name "$name" >/dev/null 2>"$VERLCTL_HOME/status.err"; rc=$?
cat "$VERLCTL_HOME/status.err" >&2
check "status with a dead head exits 4" '[ $rc -eq 4 ]'
check "it names the address and hints" 'grep -q "http://127.0.0.1:$port" "$VERLCTL_HOME/status.err" && grep -q "^hint:" "$VERLCTL_HOME/status.err"'
"$v" down --name "$name" >/dev/null 2>&1; rc=$?
check "down without a head exits 0" '[ $rc -eq 0 ]'
check "and leaves nothing" '[ -z "$(leftovers)" ]'

# A timeout: exit 124, the stage named, nothing left.
"$v" up --local 2 --name "$name" $ports $fast --timeout 0.001 >/dev/null 2>"$VERLCTL_HOME/to.err"; rc=$?
cat "$VERLCTL_HOME/to.err" >&2
check "timeout exits 124" '[ $rc -eq 124 ]'
check "timeout names what it waited for" 'grep -q "timed out" "$VERLCTL_HOME/to.err"'
check "timeout cleans up" '[ -z "$(leftovers)" ]'
exit $failed
