#!/usr/bin/env bash
# `verlctl probe --local` as a user runs it: the rows it prints as JSON and as a table, an
# impossible threshold failing with exit 5, the disk probe following --checkpoint-dir, the GPU
# rate and NCCL probes skipped without a device, --only, and cluster mode without a cluster
# (exit 4; tests/integration/cluster_probe_test.sh probes a real one).
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"
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
check "every probe has a row" 'for p in shm disk clock ports tcp versions gpu h2d d2h d2d matmul nccl_intra nccl_inter ib; do
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
  check "the GPU rate probes without a device are skipped" 'for p in "h2d bandwidth" "d2h bandwidth" "d2d bandwidth" "matmul bf16" "nccl_intra all_reduce"; do
    [ "$(field "$out" $p status)" = skipped ] && field "$out" $p detail | grep -q "^skipped: no CUDA device" || exit 1; done'
  check "nccl_inter outside a job is skipped" '[ "$(field "$out" nccl_inter all_reduce status)" = skipped ]'
  check "the GPU rate probes carry their units" '[ "$(field "$out" matmul bf16 unit)" = TFLOP/s ] && [ "$(field "$out" h2d bandwidth unit)" = GB/s ]'
  out_gpu=$("$v" probe --local --tcp-mib 1 -o json slurm.gpus_per_node=1 2>/dev/null); rc=$?
  check "gpu promised by the spec but missing exits 5" '[ $rc -eq 5 ] && [ "$(field "$out_gpu" gpu count status)" = fail ]'
  check "the GPU rate probes fail too when the spec promises a GPU" '[ "$(field "$out_gpu" matmul bf16 status)" = fail ] &&
    [ "$(field "$out_gpu" nccl_intra all_reduce status)" = fail ]'
fi

out=$("$v" probe --local --tcp-mib 1 -o json probes.min_shm_gib=100000 2>"$tmp/err"); rc=$?
check "an impossible shm threshold exits 5" '[ $rc -eq 5 ]'
check "its row fails" '[ "$(field "$out" shm size status)" = fail ]'
check "the error names the failed row" 'grep -q "probe check failed: shm.size" "$tmp/err"'
check "the JSON is still printed in full" '[ "$(field "$out" disk free status)" = pass ]'
out=$("$v" probe --local --exit-zero --only shm -o json probes.min_shm_gib=100000 2>/dev/null); rc=$?
check "--exit-zero exits 0 with the failed row in the report" '[ $rc -eq 0 ] && [ "$(field "$out" shm size status)" = fail ]'

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
read -r port store < <(free_ports 2)
spec="name=$name head.dashboard_port=$port head.store_port=$store"
cleanup() { "$v" down --name "$name" --timeout 0 >/dev/null 2>&1; [ -n "${listener:-}" ] && kill "$listener" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
if "$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --timeout 30 --skip-preflight >/dev/null 2>"$tmp/up.err"; then
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
  check "a refused store port passes between jobs (the host answered)" '[ $rc -eq 0 ] &&
    [ "$(field "$out" ports store status)" = pass ]'
  check "its row names host:port and why it passes" 'field "$out" ports store detail | grep -qF "127.0.0.1:$store refused: nothing listens between jobs"'
  "$v" down --name "$name" --timeout 5 >/dev/null 2>&1
else
  check "up --local 1 for the head case" false
  cat "$tmp/up.err" >&2
fi

"$v" probe --name nosuch$$ >/dev/null 2>"$tmp/err"; rc=$?
check "without --local and no cluster up exits 4" '[ $rc -eq 4 ]'
check "and says which cluster, with a hint" 'grep -q "nosuch$$" "$tmp/err" && grep -q "^hint: " "$tmp/err"'
"$v" probe --local --only shm,nosuch >/dev/null 2>"$tmp/err"; rc=$?
check "--only with an unknown probe is a usage error listing the probes" '[ $rc -eq 2 ] && grep -q "nccl_intra" "$tmp/err"'
"$v" probe --local --sizes 8:4 >/dev/null 2>&1; rc=$?
check "a bad --sizes is a usage error" '[ $rc -eq 2 ]'
out=$("$v" probe --local --only shm,matmul -o json 2>/dev/null)
check "--only runs just those probes" '[ "$(python3 -c "import json,sys; print(\",\".join(sorted({r[\"probe\"] for r in json.loads(sys.argv[1])[\"rows\"]})))" "$out")" = matmul,shm ]'
"$v" probe --local --tcp-mib 0 >/dev/null 2>&1; rc=$?
check "--tcp-mib 0 is a usage error" '[ $rc -eq 2 ]'
"$v" probe --local probes.min_shm_gib=lots >/dev/null 2>&1; rc=$?
check "a threshold that is not a number is an invalid config" '[ $rc -eq 3 ]'

exit $failed
