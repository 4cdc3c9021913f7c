#!/usr/bin/env bash
# `verlctl probe` across a 4-host SSH cluster: real OpenSSH servers on 127.0.0.2-5
# (tests/integration/lib/ssh_hosts.sh), started and stopped here; up --skip-preflight, then the
# probes on every host through the head: per host a row of tcp (bandwidth to the head's probe
# server), ports (the head's dashboard), shm, disk, clock (offset against the head's time
# server) and versions, all passing and agreeing; nccl_inter run by the head as ranks 0-3, one
# per host, that meet at rank 0 and skip without a GPU; a threshold no host meets exits 5 naming
# each host; then `up` itself running the preflight. Nothing is left running.
set -euo pipefail
source "${VERL_SOURCE_DIR:?set VERL_SOURCE_DIR}/tests/integration/lib/ssh_hosts.sh"
ssh_hosts_start verl_ssh_probe 4
trap 'ssh_hosts_cleanup sshp' EXIT
spec=$(ssh_hosts_spec sshp 6.0)

# field JSON NODE PROBE METRIC KEY
field() {
  python3 -c 'import json,sys
d=json.loads(sys.argv[1]); rows=d.get("preflight", d)["rows"]
m=[r for r in rows if r["node"]==sys.argv[2] and r["probe"]==sys.argv[3] and r["metric"]==sys.argv[4]]
print(m[0][sys.argv[5]] if m else "<none>")' "$1" "$2" "$3" "$4" "$5"
}

out=$("$VERLCTL" up -f "$spec" --skip-preflight --timeout 120 2>&1) || fail "up failed: $out"

json=$("$VERLCTL" probe -f "$spec" --tcp-mib 16 -o json 2>"$work/err") || fail "probe across 4 hosts failed: $(cat "$work/err") $json"
for h in $hosts; do
  for pm in "tcp bandwidth" "tcp rtt" "ports dashboard" "ports store" "shm size" "disk free" "clock offset" "versions verlctl"; do
    st=$(field "$json" $h $pm status)
    [ "$st" = pass ] || fail "$h $pm is '$st': $(field "$json" $h $pm detail)"
  done
  field "$json" $h tcp bandwidth detail | grep -q "^127.0.0.1:" || fail "$h's tcp did not measure against the head"
  field "$json" $h ports dashboard detail | grep -q "127.0.0.1:$dash accepts" || fail "$h did not reach the dashboard port"
  [ "$(field "$json" $h gpu count status)" = skipped ] || fail "$h: gpu not skipped without a device"
done
# nccl_inter: the head started one rank per host with RANK/WORLD_SIZE/MASTER_*; all four met at
# rank 0 (the first host, on the store port) and, without a GPU, skipped saying so.
members=$(python3 -c 'import json,sys
d=json.loads(sys.argv[1])
seen=set()
for r in d["rows"]:
    if r["probe"]!="nccl_inter": continue
    assert r["status"]=="skipped", r
    assert r["detail"].startswith("skipped: no CUDA device"), r["detail"]
    rv=r["data"]["rendezvous"]
    assert rv["world_size"]==4 and rv["master"].endswith(":'"$store"'"), rv
    assert [m["rank"] for m in rv["members"]]==[0,1,2,3], rv
    assert "of 4 met rank 0 at" in r["detail"] and "4 processes" in r["detail"], r["detail"]
    assert rv["members"][rv["rank"]]["node"]==r["node"], rv  # each host is the rank it says
    seen.add((r["node"], rv["rank"], " ".join(sorted(m["node"] for m in rv["members"]))))
print(len(seen), " ".join(set(s[2] for s in seen)), " ".join(sorted(str(s[1]) for s in seen)))' "$json") ||
  fail "nccl_inter did not rendezvous across the 4 hosts: $json"
[ "$members" = "4 $hosts 0 1 2 3" ] || fail "nccl_inter's ranks: '$members', not 4 ranks 0-3 that each met $hosts"
echo "ok: nccl_inter ran as ranks 0-3 on the 4 hosts and met at rank 0" >&2
[ "$(field "$json" "*" versions verlctl status)" = "<none>" ] || fail "the hosts' versions differ: $json"
job=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["job"])' "$json")
n=$("$VERLCTL" status "$job" --name sshp -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("results",{})))')
[ "$n" = 4 ] || fail "the head keeps $n reports of $job, not 4"
echo "ok: 4 hosts probed through the head ($job)" >&2

rc=0
json=$("$VERLCTL" probe -f "$spec" --only shm,disk probes.min_free_disk_gib=1e9 -o json 2>"$work/err") || rc=$?
[ $rc -eq 5 ] || fail "an impossible disk threshold exited $rc, not 5"
for h in $hosts; do
  grep -q "$h disk.free" "$work/err" || fail "the error does not name $h disk.free: $(cat "$work/err")"
done
echo "ok: a threshold no host meets exits 5 naming each host" >&2

"$VERLCTL" down --name sshp --timeout 10 >/dev/null 2>&1 || fail "down failed"
out=$("$VERLCTL" up -f "$spec" --timeout 120 2>&1) || fail "up with its preflight failed: $out"
grep -q "preflight: probing every node" <<<"$out" || fail "up did not run its preflight: $out"
for h in $hosts; do grep -q "^$h .*tcp" <<<"$out" || fail "up's preflight has no tcp row for $h: $out"; done
echo "ok: up runs the preflight on the 4 hosts" >&2
"$VERLCTL" down --name sshp --timeout 10 >/dev/null 2>&1 || fail "down failed"
left=$(pgrep -f -- "$work/home\|$work/remote" || true)
[ -z "$left" ] || fail "processes left behind: $left"
echo "ok: nothing left running" >&2
