#!/usr/bin/env bash
# The tcp probe's loopback bandwidth against iperf3 (one TCP stream, 3 s) in the same run.
# Usage: bench/tcp_probe_bench.sh [build-dir] [rounds] [tcp-mib]
# (needs iperf3; scripts/setup installs it.) Each round runs iperf3 and then the probe, so that
# both see the same load; the medians and their ratio are printed. Goal: ratio within 10% of 1.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
mib=${3:-4096}
v="$build/verlctl"
[ -x "$v" ] || { echo "no $v: build first (scripts/build)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "no iperf3: run scripts/setup" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VERLCTL_HOME="$tmp/home"  # no cluster: the probe's own loopback server is the peer

# A socket in LISTEN state (0A) on 127.0.0.1:PORT, from /proc/net/tcp (no ss needed).
listening() { grep -q "^ *[0-9]*: 0100007F:$(printf '%04X' "$1") 00000000:0000 0A" /proc/net/tcp; }
# A free port for iperf3's server, from the kernel.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for i in $(seq "$rounds"); do
  port=$(free_port)
  iperf3 -s -1 -p "$port" -B 127.0.0.1 >/dev/null 2>&1 &
  server=$!
  # Wait until it listens (a test connection would use up its one client).
  for _ in $(seq 100); do listening "$port" && break; sleep 0.05; done
  iperf3 -c 127.0.0.1 -p "$port" -t 3 -J >"$tmp/iperf-$i.json"
  wait "$server" || true
  "$v" probe --local --tcp-mib "$mib" -o json >"$tmp/probe-$i.json" 2>/dev/null || true
done

python3 - "$tmp" "$rounds" "$mib" <<'PY'
import json, statistics, sys
tmp, rounds, mib = sys.argv[1], int(sys.argv[2]), sys.argv[3]
iperf, probe = [], []
for i in range(1, rounds + 1):
    r = json.load(open(f"{tmp}/iperf-{i}.json"))
    iperf.append(r["end"]["sum_received"]["bits_per_second"] / 1e9)
    rows = json.load(open(f"{tmp}/probe-{i}.json"))["rows"]
    probe.append(next(x["value"] for x in rows if x["probe"] == "tcp" and x["metric"] == "bandwidth"))
print(f"{'round':>5} {'iperf3 Gbit/s':>14} {'probe Gbit/s':>13}")
for i, (a, b) in enumerate(zip(iperf, probe), 1):
    print(f"{i:>5} {a:14.2f} {b:13.2f}")
mi, mp = statistics.median(iperf), statistics.median(probe)
print(f"median iperf3 (1 stream, 3 s): {mi:.2f} Gbit/s; probe ({mib} MiB): {mp:.2f} Gbit/s; ratio probe/iperf3 {mp/mi:.3f}")
PY
