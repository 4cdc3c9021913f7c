#!/usr/bin/env bash
# Peak RSS of log-probs at V = 151,936: chunked (ours) vs the full [B, R, V] log-softmax, same
# model and batch, one process each; fails when the two disagree.
#   bench/logprob_memory.sh BUILD_DIR [B] [R]
set -euo pipefail
bin=${1:?build dir}/bench/bench_logprob_memory
c=$("$bin" chunked "${2:-16}" "${3:-128}")
f=$("$bin" full "${2:-16}" "${3:-128}")
echo "$c"; echo "$f"
python3 - "$c" "$f" <<'PY'
import json, sys
c, f = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert abs(c["checksum"] - f["checksum"]) <= 1e-3 * max(1.0, abs(f["checksum"])), (c, f)
print(f"peak RSS chunked/full: {c['peak_rss_mib']:.0f} / {f['peak_rss_mib']:.0f} MiB = {c['peak_rss_mib']/f['peak_rss_mib']:.2f}; "
      f"time {c['seconds']:.2f} / {f['seconds']:.2f} s")
PY
