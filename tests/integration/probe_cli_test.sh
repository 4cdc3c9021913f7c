#!/usr/bin/env bash
# `verlctl probe --local` as a user runs it: the rows it prints as JSON and as a table, an
# impossible threshold failing with exit 5, the disk probe following --checkpoint-dir, and the
# not-yet-built cluster mode refusing with exit 2.
set -u
v=${VERLCTL:?}
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1" >&2; fail=1; else echo "ok: $1" >&2; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VERLCTL_HOME="$tmp/home"  # no cluster recorded: no head, so clock and ports are skipped

# field JSON PROBE METRIC KEY: KEY of the first row of PROBE.METRIC, or <none>.
field() {
  python3 -c 'import json,sys
d=json.loads(sys.argv[1])
m=[r for r in d["rows"] if r["probe"]==sys.argv[2] and r["metric"]==sys.argv[3]]
v=m[0][sys.argv[4]] if m else "<none>"
print(json.dumps(v) if isinstance(v,(dict,list)) or v is None else v)' "$1" "$2" "$3" "$4"
}

out=$("$v" probe --local --tcp-mib 64 -o json 2>"$tmp/err"); rc=$?
check "probe --local exits 0 on this machine" '[ $rc -eq 0 ]' || cat "$tmp/err" >&2
check "every probe has a row" 'for p in shm disk clock ports tcp versions gpu ib; do
  python3 -c "import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if any(r[\"probe\"]==sys.argv[2] for r in d[\"rows\"]) else 1)" "$out" $p || exit 1; done'
check "shm is judged against probes.min_shm_gib" '[ "$(field "$out" shm size status)" = pass ] &&
  field "$out" shm size threshold | grep -q "\"probes.min_shm_gib\""'
check "shm's unit is GiB" '[ "$(field "$out" shm size unit)" = GiB ]'
check "tcp bandwidth on loopback is positive" 'python3 -c "import sys; sys.exit(0 if float(sys.argv[1])>0 else 1)" "$(field "$out" tcp bandwidth value)"'
check "tcp rtt is positive, in us" 'python3 -c "import sys; sys.exit(0 if float(sys.argv[1])>0 else 1)" "$(field "$out" tcp rtt value)" &&
  [ "$(field "$out" tcp rtt unit)" = us ]'
check "clock without a head is skipped" '[ "$(field "$out" clock offset status)" = skipped ] &&
  [ "$(field "$out" clock offset detail)" = "no head: skipped" ]'
check "ports without a head are skipped" '[ "$(field "$out" ports dashboard status)" = skipped ]'
check "versions names the commit" 'field "$out" versions verlctl detail | grep -q "commit "'
check "the summary counts no failure" 'python3 -c "import json,sys; sys.exit(0 if json.loads(sys.argv[1])[\"summary\"][\"fail\"]==0 else 1)" "$out"'
# This machine has no GPU; the default spec gives its nodes none, so the gpu row is skipped.
if ! command -v nvidia-smi >/dev/null; then
  check "gpu without a device is skipped" '[ "$(field "$out" gpu count status)" = skipped ]'
  out_gpu=$("$v" probe --local --tcp-mib 1 -o json slurm.gpus_per_node=1 2>/dev/null); rc=$?
  check "gpu promised by the spec but missing exits 5" '[ $rc -eq 5 ] && [ "$(field "$out_gpu" gpu count status)" = fail ]'
fi

out=$("$v" probe --local --tcp-mib 1 -o json probes.min_shm_gib=100000 2>"$tmp/err"); rc=$?
check "an impossible shm threshold exits 5" '[ $rc -eq 5 ]'
check "its row fails" '[ "$(field "$out" shm size status)" = fail ]'
check "the error names the failed row" 'grep -q "probe check failed: shm.size" "$tmp/err"'
check "the JSON is still printed in full" '[ "$(field "$out" disk free status)" = pass ]'

mkdir -p "$tmp/data"
out=$("$v" probe --local --tcp-mib 1 -o json --checkpoint-dir "$tmp/data/ckpt/run1" 2>/dev/null)
check "disk measures the nearest existing parent of --checkpoint-dir" \
  'field "$out" disk free detail | grep -qF "$tmp/data (nearest existing parent of $tmp/data/ckpt/run1)"'

table=$("$v" probe --local --tcp-mib 1 2>/dev/null); rc=$?
check "the table exits 0" '[ $rc -eq 0 ]'
check "the table header carries the units column" 'head -1 <<<"$table" | grep -q "METRIC \[UNIT\]"'
check "the table shows units with the metric" 'grep -q "bandwidth \[Gbit/s\]" <<<"$table" && grep -q "size \[GiB\]" <<<"$table"'

# With a local cluster up, its head is this machine: clock runs over loopback, ports connects to
# the spec's head.host. Nothing listens on the store port yet, so a stand-in listener holds it.
name=probe$$
read -r port store < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
spec="name=$name head.dashboard_port=$port head.store_port=$store"
cleanup() { "$v" down --name "$name" --timeout 0 >/dev/null 2>&1; [ -n "${listener:-}" ] && kill "$listener" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
if "$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --timeout 30 >/dev/null 2>"$tmp/up.err"; then
  python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
time.sleep(60)' "$store" &
  listener=$!
  for _ in $(seq 100); do grep -q "^ *[0-9]*: 0100007F:$(printf '%04X' "$store") 00000000:0000 0A" /proc/net/tcp && break; sleep 0.05; done
  out=$("$v" probe --local --tcp-mib 1 -o json $spec 2>"$tmp/err"); rc=$?
  check "with a head up, probe exits 0" '[ $rc -eq 0 ]' || cat "$tmp/err" >&2
  check "clock is measured against the head on this machine" '[ "$(field "$out" clock offset status)" = pass ] &&
    field "$out" clock offset detail | grep -q "this machine"'
  check "the dashboard port passes" '[ "$(field "$out" ports dashboard status)" = pass ] &&
    [ "$(field "$out" ports dashboard detail)" = "127.0.0.1:$port accepts connections" ]'
  check "the store port passes" '[ "$(field "$out" ports store status)" = pass ]'
  kill "$listener"; wait "$listener" 2>/dev/null; listener=
  out=$("$v" probe --local --tcp-mib 1 -o json $spec 2>"$tmp/err"); rc=$?
  check "a refused store port exits 5" '[ $rc -eq 5 ]'
  check "its row names host:port" '[ "$(field "$out" ports store status)" = fail ] &&
    [ "$(field "$out" ports store detail)" = "127.0.0.1:$store refused" ]'
  "$v" down --name "$name" --timeout 5 >/dev/null 2>&1
else
  check "up --local 1 for the head case" false
  cat "$tmp/up.err" >&2
fi

"$v" probe >/dev/null 2>"$tmp/err"; rc=$?
check "without --local exits 2" '[ $rc -eq 2 ]'
check "and says cluster mode is not built yet, with a hint" 'grep -q "not built yet" "$tmp/err" && grep -q "^hint: " "$tmp/err"'
"$v" probe --local --tcp-mib 0 >/dev/null 2>&1; rc=$?
check "--tcp-mib 0 is a usage error" '[ $rc -eq 2 ]'
"$v" probe --local probes.min_shm_gib=lots >/dev/null 2>&1; rc=$?
check "a threshold that is not a number is an invalid config" '[ $rc -eq 3 ]'

exit $fail
