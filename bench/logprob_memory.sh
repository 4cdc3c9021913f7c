#!/usr/bin/env bash
# Peak RSS of log-probs at V = 151,936, one process per mode, same model and batch; fails when a
# pair disagrees:
#   chunked (ours) vs full: no graph (old log-probs, the reference), the [B, R, V] log-softmax at once;
#   train_chunked (ours) vs train_full: forward + backward (the actor's update), the chunks
#   recomputed in the backward vs the [B, R, V] logits that autograd keeps.
#   bench/logprob_memory.sh BUILD_DIR [B] [R]
set -euo pipefail
bin=${1:?build dir}/bench/bench_logprob_memory
b=${2:-16}
r=${3:-128}
for pair in "chunked full" "train_chunked train_full"; do
  read -r ours theirs <<<"$pair"
  c=$("$bin" "$ours" "$b" "$r")
  f=$("$bin" "$theirs" "$b" "$r")
  echo "$c"; echo "$f"
  python3 - "$c" "$f" <<'PY'
import json, sys
c, f = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert abs(c["checksum"] - f["checksum"]) <= 1e-3 * max(1.0, abs(f["checksum"])), (c, f)
print(f"{c['mode']} / {f['mode']}: peak RSS {c['peak_rss_mib']:.0f} / {f['peak_rss_mib']:.0f} MiB = "
      f"{c['peak_rss_mib']/f['peak_rss_mib']:.2f}; time {c['seconds']:.2f} / {f['seconds']:.2f} s")
PY
done
