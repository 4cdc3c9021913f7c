#!/usr/bin/env bash
# `verlctl up` (and `down`) over N SSH hosts against pdsh starting the same agent command on the
# same hosts, in the same run, for N = 1, 4, 16 (or the Ns given).
# Usage: bench/up_ssh_vs_pdsh.sh [build-dir] [rounds] [N...]
# The hosts are OpenSSH servers on 127.0.0.2.. (scripts/services/sshd-loopback.sh), each with
# its own host key; both sides authenticate with the same key and check the same known_hosts.
#   up:   (--skip-preflight) head start + per node, in parallel: connect, verify, auth, then one
#         command that makes the node's directory, writes token and spec from its stdin, checks
#         the node's verlctl and starts the agent + waiting until every agent registered
#   pdsh: `pdsh -R ssh` running verlctl's own agent start line (from --dry-run) on every host,
#         fan-out 64; it only starts the agents (they are stopped right after), so the ratio
#         up/pdsh is what verlctl's checks, copies and the registration wait cost over a bare
#         parallel ssh (the same one round trip per node).
# The verlctl binary is copied to the nodes by a warm-up up, so rounds measure "up to date".
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
shift $(($# > 2 ? 2 : $#))
ns=("$@")
[ ${#ns[@]} -gt 0 ] || ns=(1 4 16)
v=$(cd "$build" && pwd)/cli/verlctl
[ -x "$v" ] || v=$(cd "$build" && pwd)/verlctl
[ -x "$v" ] || { echo "no verlctl under $build: build first (scripts/build)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "no pdsh: run scripts/setup" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
max=0
for n in "${ns[@]}"; do [ "$n" -gt "$max" ] && max=$n; done

tmp=$(mktemp -d /tmp/verl_bench_ssh.XXXXXX)
export VERLCTL_HOME=$tmp/home
unset SSH_AUTH_SOCK
cleanup() {
  set +e
  "$v" down --name bench --timeout 2 >/dev/null 2>&1
  "$here/scripts/services/sshd-loopback.sh" stop "$max" "$tmp/sshd" >/dev/null 2>&1
  left=$(pgrep -f -- "$tmp/remote" || true)
  [ -n "$left" ] && kill -9 $left
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"; }
port=$(free_port 127.0.0.2)
"$here/scripts/services/sshd-loopback.sh" start "$max" "$tmp/sshd" "$port"
export PDSH_SSH_ARGS_APPEND="-i $tmp/sshd/id_ed25519 -o UserKnownHostsFile=$tmp/sshd/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes -o GlobalKnownHostsFile=/dev/null -p $port -l root"

spec() {  # N
  local n=$1
  {
    echo "name: bench"
    echo "backend: ssh"
    echo "head: {host: 127.0.0.1, dashboard_port: $dash, store_port: $store, heartbeat_interval_s: 0.5}"
    echo "nodes:"
    for i in $(seq 1 "$n"); do echo "  - {host: 127.0.0.$((i + 1))}"; done
    echo "ssh: {user: root, port: $port, identity_file: $tmp/sshd/id_ed25519, known_hosts: $tmp/sshd/known_hosts, remote_dir: $tmp/remote}"
  } >"$tmp/spec-$n.yaml"
}
dash=$(free_port 127.0.0.1)
store=$(free_port 127.0.0.1)
for n in "${ns[@]}"; do spec "$n"; done

now() { date +%s.%N; }
# Warm-up: copies verlctl to the nodes (one shared directory here) and checks that it works.
"$v" up -f "$tmp/spec-$max.yaml" --skip-preflight >/dev/null 2>&1 || { "$v" up -f "$tmp/spec-$max.yaml" --skip-preflight; exit 1; }
"$v" down --name bench >/dev/null 2>&1

: >"$tmp/results"
for n in "${ns[@]}"; do
  hosts="127.0.0.[2-$((n + 1))]"
  [ "$n" = 1 ] && hosts=127.0.0.2
  # verlctl's own start line for node 0, made host-generic: the remote shell finds its own
  # address in $SSH_CONNECTION and uses it where the line names 127.0.0.2.
  line=$("$v" up -f "$tmp/spec-$n.yaml" --dry-run -o json |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["daemons"]; print([x for x in d if x["role"]=="agent"][0]["remote"][-1])')
  cmd="h=\$(set -- \$SSH_CONNECTION; echo \$3); ${line//127.0.0.2/\$h}"
  for r in $(seq 1 "$rounds"); do
    t0=$(now)
    "$v" up -f "$tmp/spec-$n.yaml" --skip-preflight >/dev/null 2>"$tmp/up.log" || { cat "$tmp/up.log"; exit 1; }
    t1=$(now)
    "$v" down --name bench >/dev/null 2>&1
    t2=$(now)
    pdsh -R ssh -f 64 -w "$hosts" "$cmd" >"$tmp/pdsh.out" 2>&1 || { cat "$tmp/pdsh.out"; exit 1; }
    t3=$(now)
    started=$(grep -c "pid=" "$tmp/pdsh.out" || true)
    [ "$started" = "$n" ] || { echo "pdsh started $started of $n agents:"; cat "$tmp/pdsh.out"; exit 1; }
    left=$(pgrep -f -- "$tmp/remote" || true)
    [ -n "$left" ] && kill $left
    for _ in $(seq 100); do pgrep -f -- "$tmp/remote" >/dev/null || break; sleep 0.05; done
    echo "$n $r $(echo "$t1 - $t0" | bc) $(echo "$t2 - $t1" | bc) $(echo "$t3 - $t2" | bc)" >>"$tmp/results"
  done
done

python3 - "$tmp/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"{'N':>3} {'rounds':>6} {'up s':>7} {'down s':>7} {'pdsh s':>7} {'up/pdsh':>8}")
for n in sorted({int(r[0]) for r in rows}):
    mine = [r for r in rows if int(r[0]) == n]
    up = statistics.median(float(r[2]) for r in mine)
    down = statistics.median(float(r[3]) for r in mine)
    pdsh = statistics.median(float(r[4]) for r in mine)
    print(f"{n:>3} {len(mine):>6} {up:7.3f} {down:7.3f} {pdsh:7.3f} {up / pdsh:8.2f}")
PY
