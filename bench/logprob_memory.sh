#!/usr/bin/env bash
# Peak RSS of log-probs at V = 151,936: chunked (ours) vs the full [B, R, V] log-softmax, same
# model and batch, one process each, without and with a graph (forward + backward); fails
# when a pair disagrees.
#   bench/logprob_memory.sh BUILD_DIR [B] [R]
set -euo pipefail
bin=${1:?build dir}/bench/bench_logprob_memory
b=${2:-16} r=${3:-128}
for pair in "chunked full" "train-fused train-full"; do
  set -- $pair
  c=$("$bin" "$1" "$b" "$r")
  f=$("$bin" "$2" "$b" "$r")
  echo "$c"; echo "$f"
  python3 - "$c" "$f" <<'PY'
import json, sys
c, f = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert abs(c["checksum"] - f["checksum"]) <= 1e-3 * max(1.0, abs(f["checksum"])), (c, f)
print(f"peak RSS {c['mode']}/{f['mode']}: {c['peak_rss_mib']:.0f} / {f['peak_rss_mib']:.0f} MiB = {c['peak_rss_mib']/f['peak_rss_mib']:.2f}; "
      f"time {c['seconds']:.2f} / {f['seconds']:.2f} s")
PY
done
