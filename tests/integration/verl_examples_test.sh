#!/usr/bin/env bash
# verl's own launch scripts, as a user pastes them (tests/data/verl/examples/, copied from verl's
# examples/), with local paths for the model and data: each script runs with a stand-in
# `python3` on PATH that records the Hydra overrides it would pass to verl.trainer.main_ppo, and
# `verlctl config validate` gets those overrides. No key may be unknown; every error must name a
# feature as not supported; the scripts that use only what verlctl implements must validate.
set -u
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
source "$src/tests/integration/lib/jobs.sh"
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/home/data/gsm8k" "$work/home/data/math" "$work/model"
cat > "$work/bin/python3" <<'SH'
#!/bin/sh
[ "$1" = "-m" ] && shift 2
for a in "$@"; do printf '%s\n' "$a"; done > "$VERL_ARGS_OUT"
SH
chmod +x "$work/bin/python3"
# The scripts read $HOME/data/{gsm8k,math}/{train,test}.parquet: real parquet files in verl's shape.
for d in gsm8k math; do
  for f in train test; do cp "$src/tests/data/parquet/gsm8k_snappy_dict_v2_rgN.parquet" "$work/home/data/$d/$f.parquet"; done
done

for s in "$src"/tests/data/verl/examples/*.sh; do
  name=$(basename "$s")
  VERL_ARGS_OUT=$work/args PATH="$work/bin:$PATH" HOME="$work/home" bash "$s" >/dev/null 2>&1
  mapfile -t args < "$work/args"
  check "$name: the script passes its overrides" '[ ${#args[@]} -gt 20 ]'
  out=$(HOME="$work/home" "$v" config validate "${args[@]}" actor_rollout_ref.model.path="$work/model" \
        critic.model.path="$work/model" 2>&1); rc=$?
  check "$name: validates (0) or refuses (3)" '[ $rc -eq 0 ] || [ $rc -eq 3 ]' || echo "$out" >&2
  check "$name: no unknown key" '! grep -q "unknown key" <<<"$out"' || grep "unknown key" <<<"$out" >&2
  check "$name: every error names a feature as not supported" \
    '! grep "^error: " <<<"$out" | grep -v "not supported"' || grep "^error: " <<<"$out" >&2
  echo "$name: exit $rc, $(grep -c '^error: ' <<<"$out") errors, $(grep -c '^warning: ' <<<"$out") warnings" >&2
  case $name in *lora*) check "$name: its LoRA keys are taken (actor LoRA is implemented)" \
                         '! grep -E "^(error|warning): .*(lora|target_modules)" <<<"$out"';; esac
  case $name in *rm_seq_balance*) check "$name: the reward model is named" 'grep -q "reward_model.enable: not supported" <<<"$out"';; esac
  case $name in *run_gemma*) check "$name: validates" '[ $rc -eq 0 ]' || echo "$out" >&2
                             check "$name: rollout.name=vllm is taken" '! grep -q "rollout.name" <<<"$out"';; esac
done
exit $failed
