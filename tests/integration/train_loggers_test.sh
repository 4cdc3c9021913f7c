#!/usr/bin/env bash
# trainer.logger as a verl user sets it, on a tiny built-in job: '[console,file,tensorboard]'
# writes verl's file-logger lines and TensorBoard event files (read back by a protobuf runtime,
# tests/peers/read_tfevents.py) beside our metrics.jsonl; `console` alone still writes
# metrics.jsonl; wandb/mlflow are skipped with one warning each; VERL_FILE_LOGGER_PATH and
# TENSORBOARD_DIR move the files; an unknown name is exit 3; a full disk is exit 1 naming the file.
set -u
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
name=unused
source "$src/tests/integration/lib/jobs.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset VERL_FILE_LOGGER_PATH VERL_FILE_LOGGER_ROOT TENSORBOARD_DIR
peer=$src/tests/peers/read_tfevents.py
small="trainer.total_training_steps=2 trainer.sft_warmup_steps=2 trainer.test_freq=2 trainer.save_freq=2
  data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=4 critic.ppo_mini_batch_size=4
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 critic.ppo_micro_batch_size_per_gpu=8
  data.val_batch_size=32 data.builtin.val_size=32 trainer.device=cpu"

# 1. console + file + tensorboard: three outputs beside metrics.jsonl.
err=$("$v" train $small trainer.experiment_name=all 'trainer.logger=[console,file,tensorboard]' 2>&1); rc=$?
check "train with [console,file,tensorboard] exits 0" '[ $rc -eq 0 ]' || echo "$err" >&2
check "the progress line is there" 'grep -q "step 2/2" <<<"$err"'
check "metrics.jsonl is written" '[ -s checkpoints/verlctl/all/metrics.jsonl ]'
check "verl's file logger is at ./<project>/<experiment>.jsonl" '[ -s verlctl/all.jsonl ]'
check "the log names the file logger and tensorboard paths" \
  'grep -q "file logger: ./verlctl/all.jsonl" <<<"$err" && grep -q "tensorboard: tensorboard_log/verlctl/all" <<<"$err"'
tb=$(ls tensorboard_log/verlctl/all/events.out.tfevents.* 2>/dev/null | head -1)
check "one event file in tensorboard_log/<project>/<experiment>" '[ -n "$tb" ] && [ "$(ls tensorboard_log/verlctl/all | wc -l)" -eq 1 ]'
/usr/bin/python3 "$peer" "$tb" > events.jsonl; rc=$?
check "the peer reads the event file" '[ $rc -eq 0 ]'
check "verl's lines, TensorBoard's events and metrics.jsonl agree" 'python3 - <<PY
import json, math
ours = [json.loads(l) for l in open("checkpoints/verlctl/all/metrics.jsonl")]
verl = [json.loads(l) for l in open("verlctl/all.jsonl")]
events = [json.loads(l) for l in open("events.jsonl")]
assert [r["step"] for r in ours] == [0, 1, 2], [r["step"] for r in ours]
assert all(set(v) == {"step", "data"} for v in verl), verl[0].keys()
for o, w in zip(ours, verl):
    assert o["step"] == w["step"] and {k: x for k, x in o.items() if k != "step"} == w["data"]
assert events[0]["file_version"] == "brain.Event:2"
scalars = [e for e in events if "values" in e]
assert [e["step"] for e in scalars] == [0, 1, 2]
for o, e in zip(ours, scalars):
    for k, x in o.items():
        if k == "step" or x is None: continue
        assert math.isclose(e["values"][k], x, rel_tol=1e-6, abs_tol=1e-30), (k, e["values"][k], x)
PY'
check "the step rows carry the metrics verl reports" 'python3 - <<PY
import json
rows = [json.loads(l) for l in open("checkpoints/verlctl/all/metrics.jsonl")]
last = rows[-1]
need = ["critic/rewards/max", "critic/rewards/min", "critic/returns/max", "critic/returns/min",
        "critic/values/max", "critic/values/min", "critic/vf_explained_var", "prompt_length/clip_ratio",
        "timing_s/save_checkpoint", "timing_s/update_weights", "timing_per_token_ms/gen",
        "timing_per_token_ms/values", "timing_per_token_ms/adv", "timing_per_token_ms/update_critic",
        "timing_per_token_ms/update_actor", "perf/time_per_step", "perf/max_memory_allocated_gb",
        "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb"]
missing = [k for k in need if k not in last]
assert not missing, missing
assert last["perf/time_per_step"] == last["timing_s/step"]
assert last["perf/cpu_memory_used_gb"] > 0 and last["perf/max_memory_allocated_gb"] == 0  # CPU run
assert last["critic/returns/min"] <= last["critic/returns/mean"] <= last["critic/returns/max"]
assert last["critic/vf_explained_var"] <= 1
assert "timing_s/save_checkpoint" not in rows[1], "step 1 saved nothing (save_freq=2)"
PY'

# 2. console alone: metrics.jsonl still, and no verl file or event file.
err=$("$v" train $small trainer.experiment_name=con trainer.logger=console 2>&1); rc=$?
check "train with trainer.logger=console exits 0" '[ $rc -eq 0 ]' || echo "$err" >&2
check "metrics.jsonl is written with console alone" '[ "$(wc -l < checkpoints/verlctl/con/metrics.jsonl)" -eq 3 ]'
check "no verl file and no event file with console alone" '[ ! -e verlctl/con.jsonl ] && [ ! -e tensorboard_log/verlctl/con ]'
check "the console line is there" 'grep -q "step 2/2" <<<"$err"'

# 3. service loggers are skipped with one warning each; env variables move verl's files.
err=$(VERL_FILE_LOGGER_PATH=$work/moved/verl.jsonl TENSORBOARD_DIR=$work/moved/tb \
  "$v" train $small trainer.experiment_name=svc 'trainer.logger=[wandb,mlflow,file,tensorboard]' 2>&1); rc=$?
check "train with wandb and mlflow exits 0" '[ $rc -eq 0 ]' || echo "$err" >&2
check "one warning for wandb" '[ "$(grep -c "trainer.logger: .wandb. .*skipped" <<<"$err")" -eq 1 ]'
check "one warning for mlflow" '[ "$(grep -c "trainer.logger: .mlflow. .*skipped" <<<"$err")" -eq 1 ]'
check "the warning says where the metrics are" 'grep -q "still goes to checkpoints/verlctl/svc/metrics.jsonl" <<<"$err"'
check "no console progress line without console" '! grep -q "step 2/2" <<<"$err"'
check "metrics.jsonl is written without console or file" '[ -s checkpoints/verlctl/svc/metrics.jsonl ]'
check "VERL_FILE_LOGGER_PATH moves verl's file" '[ "$(wc -l < moved/verl.jsonl)" -eq 3 ] && [ ! -e verlctl/svc.jsonl ]'
check "TENSORBOARD_DIR moves the event files" 'ls moved/tb/events.out.tfevents.* >/dev/null 2>&1 && [ ! -e tensorboard_log/verlctl/svc ]'

# 4. an unknown name: exit 3 before anything runs, naming the known ones.
err=$("$v" train $small 'trainer.logger=[console,tensorbord]' 2>&1); rc=$?
check "an unknown logger exits 3" '[ $rc -eq 3 ]' || echo "$err" >&2
check "the error suggests tensorboard and lists verl's names" \
  'grep -q "did you mean .tensorboard." <<<"$err" && grep -q "vemlp_wandb" <<<"$err"'
out=$("$v" config lint trainer.logger=wandb 2>&1)
check "config lint warns about a skipped logger" 'grep -q "wandb" <<<"$out" && grep -q "skipped" <<<"$out"'

# 5. a full disk under verl's file logger: an error naming the file, not an abort.
err=$(VERL_FILE_LOGGER_PATH=/dev/full "$v" train $small trainer.experiment_name=full trainer.logger=file 2>&1); rc=$?
check "a full disk exits 1" '[ $rc -eq 1 ]' || echo "rc=$rc: $err" >&2
check "the error names the file and the reason" 'grep -q "file logger: cannot write /dev/full: No space left on device" <<<"$err"'
exit $failed
