#!/usr/bin/env bash
# use_remove_padding and enable_gradient_checkpointing on the CPU, one process per mode:
# forward time padded vs packed at ~50% padding, and peak RSS growth of forward + backward
# without vs with checkpointing. Fails when the modes disagree on their checksums.
#   bench/packing_bench.sh BUILD_DIR [B T] [MEM_B MEM_T]
set -euo pipefail
bin=${1:?build dir}/bench/bench_packing
fp=$("$bin" forward padded "${2:-16}" "${3:-256}")
fk=$("$bin" forward packed "${2:-16}" "${3:-256}")
mp=$("$bin" memory plain "${4:-2}" "${5:-1024}")
mc=$("$bin" memory checkpoint "${4:-2}" "${5:-1024}")
printf '%s\n' "$fp" "$fk" "$mp" "$mc"
python3 - "$fp" "$fk" "$mp" "$mc" <<'PY'
import json, sys
fp, fk, mp, mc = (json.loads(a) for a in sys.argv[1:])
for a, b in ((fp, fk), (mp, mc)):
    assert abs(a["checksum"] - b["checksum"]) <= 1e-4 * max(1.0, abs(a["checksum"])), (a, b)
print(f"padding {fp['padding']:.0%}: forward padded/packed {fp['forward_s']*1e3:.1f} / {fk['forward_s']*1e3:.1f} ms "
      f"= {fp['forward_s']/fk['forward_s']:.2f}x; forward+backward {fp['forward_backward_s']*1e3:.1f} / "
      f"{fk['forward_backward_s']*1e3:.1f} ms = {fp['forward_backward_s']/fk['forward_backward_s']:.2f}x")
print(f"forward+backward peak RSS growth plain/checkpoint: {mp['peak_growth_mib']:.0f} / {mc['peak_growth_mib']:.0f} MiB "
      f"= {mc['peak_growth_mib']/mp['peak_growth_mib']:.2f}; time {mp['seconds']:.2f} / {mc['seconds']:.2f} s")
PY
