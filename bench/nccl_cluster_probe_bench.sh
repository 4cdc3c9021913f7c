#!/usr/bin/env bash
# nccl_intra and nccl_inter launched through a real cluster (the way `verlctl probe` runs them:
# a probe job, one rank per node), against torch.distributed's NCCL collectives on the same sizes
# in the same run. Needs a GPU machine with PyTorch (CUDA) for the peer.
#   bench/nccl_cluster_probe_bench.sh [VERLCTL] [NODES] [SIZES]
# VERLCTL defaults to build-gpu/verlctl, then build/verlctl; NODES (default 1) local agents
# (`up --local NODES`): more than one on a one-GPU machine would give two ranks the same GPU,
# which NCCL refuses. SIZES is --sizes (default 1M:1G:8). Prints the cluster probe's table (with
# NCCL_ALGO unset, then --ring), then bench/nccl_vs_torch.py's per-size ratios. With $OUT set, the
# JSON reports are left there. Figures: docs/BENCHMARKS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
verlctl=${1:-}
nodes=${2:-1}
sizes=${3:-1M:1G:8}
if [[ -z $verlctl ]]; then
  for c in "$here/../build-gpu/verlctl" "$here/../build/verlctl"; do [[ -x $c ]] && { verlctl=$c; break; }; done
fi
[[ -x ${verlctl:-} ]] || { echo "nccl_cluster_probe_bench: no verlctl binary (pass its path)" >&2; exit 2; }
tmp=$(mktemp -d)
out=${OUT:-$tmp}
export VERLCTL_HOME=$tmp/home
name=nccl$$
cleanup() { "$verlctl" down --name "$name" --timeout 10 >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
read -r dash store < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
"$verlctl" up --local "$nodes" --name "$name" --skip-preflight --timeout 60 \
  head.dashboard_port="$dash" head.store_port="$store" >/dev/null
rc=0
echo "== $verlctl probe --only gpu,nccl_intra,nccl_inter --sizes $sizes   (through the cluster: $nodes node(s))"
"$verlctl" probe --name "$name" --only gpu,nccl_intra,nccl_inter --sizes "$sizes" -o json >"$out/nccl.json" || rc=$?
python3 - "$out/nccl.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(f'{r["node"]:8} {r["probe"]:10} {r["metric"]:14} {r["status"]:7} {r["detail"]}')
PY
echo "== the same with --ring"
"$verlctl" probe --name "$name" --only nccl_intra,nccl_inter --sizes "$sizes" --ring -o json >"$out/nccl_ring.json" || rc=$?
python3 - "$out/nccl_ring.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(f'{r["node"]:8} {r["probe"]:10} {r["metric"]:14} {r["status"]:7} {r["detail"]}')
PY
echo "== torch.distributed (NCCL, one process per GPU of this machine) on the same sizes"
python3 "$here/nccl_vs_torch.py" "$out/nccl.json"
[[ $rc == 0 ]] || echo "nccl_cluster_probe_bench: verlctl probe exited $rc" >&2
exit $rc
