#!/usr/bin/env bash
# `verlctl train` as a user runs it: a short default job writes its metrics (verl's names) and
# says where they are; CUDA asked of a CPU-only libtorch is "not compiled in" (exit 6).
set -u
v=${VERLCTL:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail=0
err=$("$v" train trainer.total_training_steps=3 trainer.sft_warmup_steps=2 trainer.test_freq=3 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: short default job exited $rc: $err" >&2; fail=1; }
m=checkpoints/verlctl/default/metrics.jsonl
[ -s "$m" ] || { echo "FAIL: no $m" >&2; fail=1; }
python3 - "$m" <<'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if "timing_s/step" in r]
assert len(steps) == 3, f"expected 3 step rows, got {len(steps)}"
need = ["timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/values", "timing_s/adv",
        "timing_s/update_critic", "timing_s/update_actor", "timing_s/step", "perf/throughput",
        "critic/score/mean", "critic/vf_loss", "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl",
        "actor/entropy", "actor/grad_norm", "response_length/mean"]
missing = [k for k in need if k not in steps[-1]]
assert not missing, f"missing metrics: {missing}"
assert steps[-1]["perf/throughput"] > 0
PY
grep -q "step 3/3" <<<"$err" || { echo "FAIL: no progress line 'step 3/3' in: $err" >&2; fail=1; }
out=$("$v" train trainer.device=cuda trainer.total_training_steps=1 2>&1); rc=$?
[ $rc -eq 6 ] || { echo "FAIL: cuda on a CPU-only libtorch should exit 6, got $rc: $out" >&2; fail=1; }
grep -q "not compiled" <<<"$out" || { echo "FAIL: message should say not compiled in: $out" >&2; fail=1; }
"$v" train data.train_batch_size=0 >/dev/null 2>&1; rc=$?
[ $rc -eq 3 ] || { echo "FAIL: bad config should exit 3, got $rc" >&2; fail=1; }
exit $fail
