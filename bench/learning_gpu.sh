#!/usr/bin/env bash
# The default job's learning on the GPU with each rollout engine against the CPU run (issue #14:
# "the GPU path's learning matches the CPU path's"): the embedded default job (300 steps) with
# trainer.device=cuda and rollout.name native / vllm over SEEDS, and once with trainer.device=cpu,
# all at once. Prints val/score/mean first -> last per run.
#   bench/learning_gpu.sh VERLCTL OUT_DIR [SEEDS]
set -uo pipefail
v=${1:?verlctl} out=${2:?out dir} seeds=${3:-"1 2"}
mkdir -p "$out"
runs=()
for seed in $seeds; do
  for engine in native vllm; do runs+=("cuda $engine $seed"); done
done
runs+=("cpu native 1")
for r in "${runs[@]}"; do
  set -- $r
  OMP_NUM_THREADS=4 "$v" train trainer.device=$1 actor_rollout_ref.rollout.name=$2 trainer.seed=$3 \
    trainer.default_local_dir="$out/$1-$2-$3" >"$out/$1-$2-$3.log" 2>&1 &
done
wait
for r in "${runs[@]}"; do
  set -- $r
  python3 - "$out/$1-$2-$3/metrics.jsonl" "$1 $2 seed $3" <<'PY'
import json, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except OSError as e:
    print(sys.argv[2], "no metrics:", e); sys.exit()
val = [(r.get("step"), r["val/score/mean"]) for r in rows if "val/score/mean" in r]
steps = [r for r in rows if "timing_s/step" in r]
gen = sorted(r.get("timing_s/gen", 0) for r in steps)
print(json.dumps({"run": sys.argv[2], "val_first": val[0] if val else None, "val_last": val[-1] if val else None,
                  "steps": len(steps), "median_gen_s": gen[len(gen) // 2] if gen else None}))
PY
done
