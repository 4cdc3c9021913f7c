#!/usr/bin/env bash
# SLURM at width (issue #18): a private SLURM cluster of N slurmd nodes on this machine
# (scripts/services/slurm-cluster.sh: munge, slurmctld, N slurmd), and in it, RUNS times each:
#   srun      `salloc -N N srun -N N hostname`: the allocation, and inside it the srun fan-out alone
#   verlctl   `verlctl up` (sbatch; the script starts the head and one agent per node with srun)
#             until every node has registered, then `verlctl down` until the allocation is gone
# One JSON line per run, then a table of medians. Seconds are wall-clock on this (shared) machine.
#   bench/slurm_width.sh VERLCTL [N=16] [RUNS=3]
set -uo pipefail
v=$(realpath "${1:?verlctl}") n=${2:-16} runs=${3:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
export VERLCTL_HOME=$work/home
trap '"$v" down --name sw$$ --timeout 0 >/dev/null 2>&1; "$src/scripts/services/slurm-cluster.sh" stop "$work/slurm" >/dev/null 2>&1; rm -rf "$work"' EXIT
mkdir -p "$work/slurm"
"$src/scripts/services/slurm-cluster.sh" start "$n" "$work/slurm" >/dev/null || { echo '{"error": "the SLURM cluster did not start"}'; exit 1; }
source "$work/slurm/env"
now() { date +%s.%N; }
read -r port store < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
cat >"$work/spec.yaml" <<YAML
name: sw$$
backend: slurm
head:
  dashboard_port: $port
  store_port: $store
slurm:
  nodes: $n
  cpus_per_task: 1
  partition: debug
  time: "00:30:00"
YAML
for r in $(seq "$runs"); do
  t0=$(now)
  inner=$(salloc -N "$n" -p debug --time 5 bash -c "a=\$(date +%s.%N); srun -N $n hostname >/dev/null; b=\$(date +%s.%N); echo \$a \$b" 2>/dev/null | tail -1)
  t1=$(now)
  python3 -c "import json,sys; t0,t1,a,b=map(float,sys.argv[1:5]); print(json.dumps({'what':'srun','nodes':$n,'run':$r,'salloc_total_s':round(t1-t0,3),'srun_hostname_s':round(b-a,3)}))" "$t0" "$t1" $inner
  t0=$(now)
  "$v" up -f "$work/spec.yaml" --skip-preflight --timeout 300 >"$work/up.log" 2>&1; urc=$?
  t1=$(now)
  "$v" down --name sw$$ --timeout 60 >"$work/down.log" 2>&1; drc=$?
  t2=$(now)
  python3 -c "import json,sys; t0,t1,t2=map(float,sys.argv[1:4]); print(json.dumps({'what':'verlctl','nodes':$n,'run':$r,'up_s':round(t1-t0,3),'up_rc':int(sys.argv[4]),'down_s':round(t2-t1,3),'down_rc':int(sys.argv[5])}))" "$t0" "$t1" "$t2" "$urc" "$drc"
  [ "$urc" = 0 ] || tail -5 "$work/up.log" >&2
done | tee "$work/rows.jsonl"
python3 - "$work/rows.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda what, k: statistics.median(r[k] for r in rows if r["what"] == what)
print(f"| nodes | salloc + srun hostname | srun hostname alone | verlctl up (all registered) | verlctl down |")
print(f"| --- | --- | --- | --- | --- |")
print(f"| {rows[0]['nodes']} | {med('srun','salloc_total_s'):.2f} s | {med('srun','srun_hostname_s'):.2f} s | "
      f"{med('verlctl','up_s'):.2f} s | {med('verlctl','down_s'):.2f} s |")
PY
