#!/usr/bin/env bash
# verlctl up / status / down with backend ssh over 4 "hosts": real OpenSSH servers on
# 127.0.0.2-5 (scripts/services/sshd-loopback.sh, each with its own host key), started and
# stopped here. Checks: every node registers under its host; the token reaches each node 0600;
# a second up changes nothing and kills nothing; an agent killed with -9 shows as lost with its
# reason and down still cleans up; down leaves no verlctl process. Faults, each with its exit
# code, the host and stage named, and nothing left running: a host that refuses connections (4),
# one that accepts but never answers (124), a changed host key (4, even with
# --accept-new-host-keys), a wrong key (4), an unknown key (4; accepted with the flag, for that
# up only: the next down does not accept a key it does not know), a node on another machine
# while the head listens on loopback (3, before anything starts).
set -euo pipefail
source "${VERL_SOURCE_DIR:?set VERL_SOURCE_DIR}/tests/integration/lib/ssh_hosts.sh"
listener_pid=""
SSHD_LOG_LEVEL=VERBOSE  # the sshd logs count connections and SFTP sessions
ssh_hosts_start verl_ssh_cluster 4
cleanup() {
  [ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null
  ssh_hosts_cleanup sshc f-refused f-silent f-changed f-wrongkey f-unknown f-bind
}
trap cleanup EXIT
spec=$(ssh_hosts_spec sshc 4.0)

# Our processes are the ones whose command line names $work (agents' token files, the head's
# state dir, the sshd configs); nothing else is touched.
ours() { pgrep -f -- "$work" | grep -vx "$$" || true; }

agent_pids() {
  python3 -c 'import json,sys; print(" ".join(str(p["pid"]) for p in json.load(open(sys.argv[1]))["processes"] if p["role"]=="agent"))' \
    "$VERLCTL_HOME/$1/state.json"
}

# --- dry run: the exact remote commands per host, nothing started or created -------------------
dry=$("$VERLCTL" up -f "$spec" --dry-run)
for h in 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5; do
  grep -q "^# ssh root@$h:$port " <<<"$dry" || fail "dry run does not name root@$h:$port: $dry"
  grep -q "cd $work/remote/sshc/nodes/$h || exit 1; setsid nohup $work/remote/bin/verlctl agent .*--node $h " <<<"$dry" ||
    fail "dry run lacks the agent start line for $h: $dry"
done
[ ! -e "$VERLCTL_HOME/sshc" ] || fail "a dry run created the state directory"
[ ! -e "$work/remote" ] || fail "a dry run touched the nodes"

# --- up over 4 hosts -------------------------------------------------------------------------
out=$("$VERLCTL" up -f "$spec" --skip-preflight --timeout 90 2>&1) || fail "up failed: $out"
for h in 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5; do
  grep -q "$h: connecting to root@$h:$port" <<<"$out" || fail "no 'connecting' line for $h: $out"
  grep -q "$h: synced in" <<<"$out" || fail "no 'synced' line for $h: $out"
  grep -q "$h: registered" <<<"$out" || fail "$h did not register: $out"
  tok=$work/remote/sshc/nodes/$h/token
  [ "$(stat -c %a "$tok")" = 600 ] || fail "$tok is not 0600"
  cmp -s <(tr -d '\n' <"$tok") <(tr -d '\n' <"$VERLCTL_HOME/sshc/token") || fail "$tok differs from the head's token"
done
grep -q "copied verlctl" <<<"$out" || fail "verlctl was not copied to the nodes: $out"
[ -x "$work/remote/bin/verlctl" ] || fail "no verlctl on the nodes"

status=$("$VERLCTL" status --name sshc -o json) || fail "status failed"
python3 - "$status" <<'PY' || fail "status: $status"
import json, sys
s = json.loads(sys.argv[1])
nodes = {n["name"]: n for n in s["nodes"]}
want = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
assert sorted(nodes) == want, nodes.keys()
assert all(nodes[h]["state"] == "alive" for h in want), [(h, nodes[h]["state"]) for h in want]
assert s["cluster"]["backend"] == "ssh", s["cluster"]
PY

# --- up again: nothing changes, nothing is killed --------------------------------------------
before=$(agent_pids sshc)
again=$("$VERLCTL" up -f "$spec" --skip-preflight 2>&1) || fail "second up failed: $again"
grep -q "already up" <<<"$again" || fail "second up did not see the cluster: $again"
[ "$(agent_pids sshc)" = "$before" ] || fail "second up changed the agents: $before -> $(agent_pids sshc)"
for p in $before; do kill -0 "$p" 2>/dev/null || fail "agent pid $p is gone after the second up"; done

# --- an agent killed with -9: lost, with its reason; down still cleans ------------------------
victim=$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p.get("node")=="127.0.0.3"][0])' \
  "$VERLCTL_HOME/sshc/state.json")
kill -9 "$victim"
lost=""
for _ in $(seq 1 300); do
  st=$("$VERLCTL" status --name sshc 2>&1 || true)
  if grep -q "^127.0.0.3 *lost" <<<"$st"; then lost=$st; break; fi
  sleep 0.1
done
[ -n "$lost" ] || fail "the killed agent is not shown lost: $st"
grep "^127.0.0.3" <<<"$lost" | grep -q "heartbeat" || fail "the lost node has no reason: $lost"

down=$("$VERLCTL" down --name sshc 2>&1) || fail "down failed: $down"
left=$(ours | xargs -r -n1 ps -o pid=,args= -p | grep verlctl || true)
[ -z "$left" ] || fail "verlctl processes left after down: $left"

# --- up with verlctl current on the nodes: one connection per node, no SFTP ------------------
# sshd at LogLevel VERBOSE logs each connection ("Accepted publickey") and each session
# ("Starting session: command" / "subsystem 'sftp'"). The token and spec go on the stdin of the
# command that also starts the agent; the same connection serves the liveness checks while up
# waits for the agent to register.
count() { grep -c "$2" "$sshd_dir/host-$1/sshd.log" || true; }
declare -A before
for i in 1 2 3 4; do
  before[$i.conn]=$(count "$i" "Accepted publickey")
  before[$i.sftp]=$(count "$i" "Starting session: subsystem 'sftp'")
  before[$i.cmd]=$(count "$i" "Starting session: command")
done
out=$("$VERLCTL" up -f "$spec" --skip-preflight --timeout 90 2>&1) || fail "up with verlctl current failed: $out"
for i in 1 2 3 4; do
  h=127.0.0.$((i + 1))
  conn=$(($(count "$i" "Accepted publickey") - before[$i.conn]))
  sftp=$(($(count "$i" "Starting session: subsystem 'sftp'") - before[$i.sftp]))
  cmd=$(($(count "$i" "Starting session: command") - before[$i.cmd]))
  [ "$conn" = 1 ] || fail "up connected $conn times to $h, want 1: $out"
  [ "$sftp" = 0 ] || fail "up opened $sftp SFTP sessions on $h with verlctl current, want 0: $out"
  [ "$cmd" -ge 1 ] || fail "up ran no command on $h: $out"
  grep -q "$h: synced in .* (token, spec; verlctl up to date)" <<<"$out" || fail "verlctl on $h was not found current: $out"
done
down=$("$VERLCTL" down --name sshc 2>&1) || fail "down failed: $down"

# --- faults ------------------------------------------------------------------------------------
# Each: the exit code, the host and stage in the message, and nothing of ours left running.
expect_fault() {  # name code pattern [up args...]
  local name=$1 code=$2 pattern=$3
  shift 3
  local rc=0 msg
  msg=$("$VERLCTL" up -f "$spec" name="$name" --skip-preflight --timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" = "$code" ] || fail "$name: exit $rc, want $code: $msg"
  grep -q -- "$pattern" <<<"$msg" || fail "$name: the error does not say '$pattern': $msg"
  grep -q "hint:" <<<"$msg" || fail "$name: no hint: $msg"
  local left
  left=$(ours | xargs -r -n1 ps -o pid=,args= -p | grep verlctl || true)
  [ -z "$left" ] || fail "$name: processes left: $left"
  echo "ok: $name -> exit $rc"
}

expect_fault f-refused 4 "node 127.0.0.9 failed while connecting: root@127.0.0.9:$port: connecting" \
  'nodes=[{host: 127.0.0.2}, {host: 127.0.0.9}]'

silent=$(free_ports 1 127.0.0.10)
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.10",int(sys.argv[1]))); s.listen(16); time.sleep(600)' \
  "$silent" &
listener_pid=$!
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.10/$silent") 2>/dev/null && break; sleep 0.05; done
t0=$(date +%s)
expect_fault f-silent 124 "127.0.0.10:$silent: connecting: no SSH answer within 2 s" \
  "nodes=[{host: 127.0.0.2}, {host: 127.0.0.10, port: $silent}]" ssh.connect_timeout_s=2
[ $(($(date +%s) - t0)) -lt 20 ] || fail "the silent host took too long to give up"
kill "$listener_pid"; listener_pid=""

# Line 2 says 127.0.0.3 has 127.0.0.4's key.
changed=$work/changed_known_hosts
{ sed -n 1p "$sshd_dir/known_hosts"; echo "[127.0.0.3]:$port $(cut -d' ' -f2,3 <(sed -n 3p "$sshd_dir/known_hosts"))"; } >"$changed"
line2=$(sed -n 2p "$changed")
expect_fault f-changed 4 "HOST KEY HAS CHANGED.*$changed line 2" ssh.known_hosts="$changed"
expect_fault f-changed 4 "HOST KEY HAS CHANGED" ssh.known_hosts="$changed" --accept-new-host-keys
[ "$(sed -n 2p "$changed")" = "$line2" ] || fail "the changed key's entry was replaced"
[ "$(grep -c "^\[127.0.0.3\]" "$changed")" = 1 ] || fail "a second key for 127.0.0.3 was added"

expect_fault f-wrongkey 4 "failed while connecting: root@127.0.0.2:$port: authenticating" \
  ssh.identity_file="$sshd_dir/wrong_ed25519"

unknown=$work/unknown_known_hosts
: >"$unknown"
expect_fault f-unknown 4 "is unknown (not in $unknown)" ssh.known_hosts="$unknown"
out=$("$VERLCTL" up -f "$spec" name=f-unknown ssh.known_hosts="$unknown" --accept-new-host-keys --skip-preflight 2>&1) ||
  fail "up --accept-new-host-keys failed: $out"
[ "$(grep -c "^\[127.0.0.[2-5]\]:$port " "$unknown")" = 4 ] || fail "accepted keys not in $unknown: $(cat "$unknown")"
# The flag was for that up only: the recorded spec checks strictly, and a down that meets a key
# it does not know (127.0.0.4's entry removed) refuses that node instead of adding its key.
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["ssh"]["strict_host_keys"] is True' \
  "$VERLCTL_HOME/f-unknown/cluster.json" || fail "up recorded --accept-new-host-keys in cluster.json"
sed -i "/^\[127.0.0.4\]:$port /d" "$unknown"
down=$("$VERLCTL" down --name f-unknown 2>&1) || fail "down of f-unknown failed: $down"
grep -q "^\[127.0.0.4\]" "$unknown" && fail "down accepted 127.0.0.4's unknown key: $(cat "$unknown")"
grep -q "127.0.0.4: ended (.*could not be checked (.*is unknown (not in $unknown)" <<<"$down" ||
  fail "down does not say that it could not check 127.0.0.4 (unknown key): $down"
expect_fault f-unknown 4 "127.0.0.4:$port: verifying the host key: the host key .* is unknown" ssh.known_hosts="$unknown"
# The agent down could not reach left by itself: the head told it to shut down.
for _ in $(seq 1 100); do
  left=$(ours | xargs -r -n1 ps -o pid=,args= -p | grep verlctl || true)
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "processes left after the last down: $left"

# --- a node on another machine with the head on loopback: exit 3 before anything starts ------
# 0.0.0.0 is not loopback for the check; were it dialled, it would reach this machine only.
rc=0
msg=$("$VERLCTL" up -f "$spec" name=f-bind --skip-preflight 'nodes=[{host: 127.0.0.2}, {host: 0.0.0.0}]' 2>&1) || rc=$?
[ "$rc" = 3 ] || fail "f-bind: exit $rc, want 3: $msg"
grep -q "head.bind_host is 127.0.0.1, a loopback address, but nodes\[1\].host 0.0.0.0 is another machine" <<<"$msg" ||
  fail "f-bind: the error does not name head.bind_host and the node: $msg"
grep -q "hint: set head.bind_host=0.0.0.0" <<<"$msg" || fail "f-bind: no hint: $msg"
[ ! -e "$VERLCTL_HOME/f-bind/state.json" ] || fail "f-bind: up started something: $(cat "$VERLCTL_HOME/f-bind/state.json")"
[ ! -e "$work/remote/f-bind" ] || fail "f-bind: up reached the nodes"

echo "ssh_cluster_test: ok"
