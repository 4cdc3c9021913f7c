#!/usr/bin/env bash
# verl's data files as a user passes them: `config validate` checks data.train_files/val_files
# (parquet footer or first JSON row, the prompt column) and names the file with its row, line or
# column, exit 3; `verlctl train` trains on a parquet file in verl's gsm8k shape written by a real
# writer (tests/data/parquet, parquet-wasm = arrow-rs), with filter_overlong_prompts and truncation.
set -u
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pq=$src/tests/data/parquet/gsm8k_snappy_dict_v2_rgN.parquet

out=$("$v" config validate data.train_files="['$pq', '$pq']" data.val_files="$pq" 2>&1)
check "a parquet file and a list of them validate" '[ $? -eq 0 ]'
printf '[{"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "arithmetic", "reward_model": {"ground_truth": "2"}}]\n' > "$work/rows.json"
printf '{"prompt": "1+1=", "data_source": "arithmetic", "reward_model": {"ground_truth": "2"}}\n' > "$work/rows.jsonl"
"$v" config validate data.train_files="$work/rows.json" data.val_files="$work/rows.jsonl" >/dev/null 2>&1
check "a .json array and .jsonl validate" '[ $? -eq 0 ]'

cp "$work/rows.jsonl" "$work/train.parquet"
printf '{"question": "1+1="}\n' > "$work/noprompt.jsonl"
out=$("$v" config validate data.train_files="$work/train.parquet" data.val_files="['$work/missing.parquet', '$work/noprompt.jsonl', '$work/x.csv']" 2>&1); rc=$?
check "bad data files exit 3" '[ $rc -eq 3 ]'
for want in "4 problems" "data.train_files" "$work/train.parquet: not a readable parquet file" \
            "cannot open data file $work/missing.parquet" "$work/noprompt.jsonl:1: row has no 'prompt' key" \
            "$work/x.csv: unknown data file format"; do
  check "validate names: $want" 'grep -qF -- "$want" <<<"$out"'
done
out=$("$v" config validate data.train_files="$pq" data.val_files="$pq" data.prompt_key=question 2>&1)
check "a missing prompt column names the columns" 'grep -qF "no column '"'"'question'"'"' (data.prompt_key); the columns are: data_source, prompt" <<<"$out"'
out=$("$v" config validate data.train_files="$src/tests/data/parquet/unsupported_delta.parquet" data.val_files="$pq" 2>&1)
check "an encoding outside the subset names the column" 'grep -qF "column '"'"'i64'"'"': is encoded with DELTA_BINARY_PACKED" <<<"$out"'
"$v" config validate data.truncation=middle >/dev/null 2>&1
check "data.truncation=middle is verl's" '[ $? -eq 0 ]'
"$v" config validate data.truncation=centre >/dev/null 2>&1
check "an unknown data.truncation exits 3" '[ $? -eq 3 ]'

# Training on the parquet file (the built-in model and its character tokenizer: each prompt is
# 153..175 characters, so a length limit drops or cuts them).
if "$v" --version | grep -q "libtorch"; then
  cd "$work"
  common="trainer.total_training_steps=1 trainer.test_freq=-1 data.train_files=$pq data.val_files=$pq
          data.train_batch_size=4 data.val_batch_size=4 actor_rollout_ref.actor.ppo_mini_batch_size=4
          critic.ppo_mini_batch_size=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
          critic.ppo_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
          actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 actor_rollout_ref.model.max_position_embeddings=256"
  out=$("$v" train $common data.max_prompt_length=160 data.truncation=middle 2>&1); rc=$?
  check "trains on parquet with truncation=middle" '[ $rc -eq 0 ]'
  [ $rc -eq 0 ] || echo "$out" | tail -5 >&2
  out=$("$v" train $common data.max_prompt_length=160 2>&1); rc=$?
  check "truncation=error names the parquet row" '[ $rc -eq 3 ] && grep -qF "$pq: row " <<<"$out"'
  out=$("$v" train $common data.max_prompt_length=160 data.filter_overlong_prompts=true 2>&1); rc=$?
  check "filter_overlong_prompts drops rows and says how many" '[ $rc -eq 0 ] && grep -qE "dropped [0-9]+ of 20 rows" <<<"$out"'
  [ $rc -eq 0 ] || echo "$out" | tail -5 >&2
fi
exit $failed
