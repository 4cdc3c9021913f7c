#!/usr/bin/env bash
# The GPU probes against PyTorch's own rates in the same run, on a machine with a GPU:
#   bench/gpu_probe_bench.sh [VERLCTL]     (default: build-gpu/verlctl, then build/verlctl)
# Runs `verlctl probe --local` with the GPU probes and the single-process NCCL probe (table, then
# JSON), then bench/gpu_probe_vs_torch.py on the JSON: torch's pinned copies, D2D copy and bf16
# matmul on the same sizes, and the ratio verlctl / torch per row. Figures: docs/BENCHMARKS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
verlctl=${1:-}
if [[ -z $verlctl ]]; then
  for c in "$here/../build-gpu/verlctl" "$here/../build/verlctl"; do [[ -x $c ]] && { verlctl=$c; break; }; done
fi
[[ -x ${verlctl:-} ]] || { echo "gpu_probe_bench: no verlctl binary (pass its path)" >&2; exit 2; }
probes=gpu,h2d,d2h,d2d,matmul,nccl_intra
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== $verlctl probe --local --only $probes"
# exit 5 (a failed row) still leaves a report to compare: keep going and say so at the end
rc=0
"$verlctl" probe --local --only "$probes" || rc=$?
"$verlctl" probe --local --only "$probes" -o json > "$out/report.json" || true
echo "== PyTorch on the same sizes"
python3 "$here/gpu_probe_vs_torch.py" "$out/report.json"
[[ $rc == 0 ]] || echo "gpu_probe_bench: verlctl probe exited $rc" >&2
exit $rc
