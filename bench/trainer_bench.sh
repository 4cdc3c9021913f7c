#!/usr/bin/env bash
# Our PPO step (bench_trainer: the embedded trainer, C++/libtorch) against the same step as a
# plain PyTorch loop (bench/trainer_peer.py on Debian's python3-torch, the same libtorch 1.13
# underneath), same model, sizes and batch geometry, in the same run, CPU.
# Usage: bench/trainer_bench.sh [build-dir] [steps] [threads] [runs]
#   defaults: build-algos 6 1 3. Each side runs `runs` times, interleaved (so background load
#   hits both alike); the median steps/s of each is compared. Step 1 of every run is warm-up.
# The job is the embedded default (templates/job.yaml): 64 prompts x rollout.n 4 = 256
# responses of at most 12 tokens, hidden 64, 2 layers, GAE with a critic, mini-batch 32
# prompts, micro-batch 64 responses. Extra key=value overrides go in $BENCH_OVERRIDES.
set -euo pipefail
build=${1:-build-algos}
steps=${2:-6}
threads=${3:-1}
runs=${4:-3}
ours="$build/bench/bench_trainer"
peer="$(dirname "$0")/trainer_peer.py"
py=/usr/bin/python3   # Debian's python3-torch, not a pyenv python on PATH
[ -x "$ours" ] || { echo "no $ours: cmake --build $build --target bench_trainer" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || { echo "$py has no torch (apt install python3-torch)" >&2; exit 1; }
# shellcheck disable=SC2086
first=$("$ours" --threads "$threads" trainer.total_training_steps=2 ${BENCH_OVERRIDES:-})
vocab=$(echo "$first" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["vocab_size"])')
plen=$(echo "$first" | "$py" -c 'import json,sys; print(round(json.load(sys.stdin)["prompt_length_mean"]))')
res=$(mktemp)
trap 'rm -f "$res"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq "$runs"); do
  # shellcheck disable=SC2086
  echo "ours $("$ours" --threads "$threads" trainer.total_training_steps="$steps" ${BENCH_OVERRIDES:-})" >>"$res"
  echo "peer $("$py" "$peer" --steps "$steps" --threads "$threads" --vocab "$vocab" --prompt-len "$plen")" >>"$res"
  echo "run $r/$runs done" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$py" - "$res" <<'PY'
import json, statistics, sys
rows = {"ours": [], "peer": []}
for line in open(sys.argv[1]):
    side, js = line.split(" ", 1)
    rows[side].append(json.loads(js))
def med(side, key):
    return statistics.median(r[key] for r in rows[side])
print(f"{'side':6} {'runs':>4} {'steps/s':>9} {'tokens/s':>10} {'s/step':>8} {'resp len':>8}")
for side in ("ours", "peer"):
    sps = med(side, "steps_per_s")
    print(f"{side:6} {len(rows[side]):4d} {sps:9.3f} {med(side, 'tokens_per_s'):10.0f} {1/sps:8.3f} "
          f"{med(side, 'response_length_mean'):8.2f}")
phases = ["gen", "old_log_prob", "values", "adv", "update_critic", "update_actor"]
print("median seconds per step by phase: " + "  ".join(
    f"{p} {statistics.median(r['timing_s'].get(p, 0) for r in rows['ours']):.3f}/"
    f"{statistics.median(r['timing_s'].get(p, 0) for r in rows['peer']):.3f}" for p in phases)
    + "  (ours/peer)")
print(f"ratio ours/peer: steps/s {med('ours','steps_per_s')/med('peer','steps_per_s'):.2f}x, "
      f"tokens/s {med('ours','tokens_per_s')/med('peer','tokens_per_s'):.2f}x "
      f"(threads {rows['ours'][0]['threads']})")
PY
