#!/usr/bin/env bash
# The config commands as a user runs them: exit codes, every error named, json output.
set -u
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

out=$("$v" config validate -f "$src/tests/data/broken_job.yaml" 2>&1); rc=$?
check "broken file exits 3" '[ $rc -eq 3 ]'
for want in "broken_job.yaml:4:3" "data.max_prompt_lenght" "did you mean 'data.max_prompt_length'" \
            "actor_rollout_ref.rollout.temperature" "actor_rollout_ref.actor.clip_ratio" \
            "algorithm.adv_estimator" "did you mean 'grpo'" "trainer.logger" "hint:"; do
  check "error names $want" 'grep -qF -- "$want" <<<"$out"'
done

"$v" config validate >/dev/null 2>&1
check "default job validates" '[ $? -eq 0 ]'

json=$("$v" config validate -f "$src/tests/data/broken_job.yaml" -o json 2>/dev/null); rc=$?
check "json validate exits 3" '[ $rc -eq 3 ]'
check "json validate lists issues" 'python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert not d[\"valid\"] and len(d[\"issues\"])>=5" "$json"'

"$v" config show trainer.nnode=2 >/dev/null 2>&1
check "unknown override exits 3" '[ $? -eq 3 ]'
show=$("$v" config show -o json trainer.total_training_steps=7 "trainer.logger=[console]")
check "show applies overrides" 'python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d[\"trainer\"][\"total_training_steps\"]==7 and d[\"trainer\"][\"logger\"]==[\"console\"]" "$show"'

"$v" config lint trainer.nnodes=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 critic.ppo_micro_batch_size_per_gpu=8 >/dev/null 2>&1
check "lint warns but exits 0" '[ $? -eq 0 ]'
"$v" config lint --strict trainer.nnodes=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 critic.ppo_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.gpu_memory_utilization=0.5 >/dev/null 2>&1
check "lint --strict exits 5 on warnings" '[ $? -eq 5 ]'
"$v" config lint --strict >/dev/null 2>&1
check "the default job lints clean" '[ $? -eq 0 ]'

"$v" config show --no-such-option >/dev/null 2>&1
check "unknown option exits 2" '[ $? -eq 2 ]'
"$v" help exit-codes | grep -q "^124 *timed-out"
check "exit-code table" '[ $? -eq 0 ]'
exit $failed
