#!/usr/bin/env bash
# trainer/rewards and trainer/val_metrics against verl's own Python (tests/peers/verl_reward:
# verl's gsm8k.py, math_reward.py, math_dapo.py and metric_utils.py, TinyZero's countdown.py,
# copied unchanged): every (response, ground truth) pair of a seeded near-miss corpus must get
# the same score, dict fields and pred, and every random validation batch the same
# val-core/val-aux metrics, bit for bit. Fails (never skips) when python3, numpy or the
# verl_reward_peer tool is missing.
set -u
src=${VERL_SOURCE_DIR:?}
bin=${VERL_BINARY_DIR:?}/tests/verl_reward_peer
count=${REWARD_PEER_COUNT:-6000}
seed=${REWARD_PEER_SEED:-11}
py=${REWARD_PEER_PYTHON:-/usr/bin/python3}
peer="$src/tests/peers/verl_reward"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

if ! [ -x "$py" ]; then echo "FAIL: $py is missing (verl's reward functions are Python)" >&2; exit 1; fi
if ! "$py" -c 'import numpy' 2>/dev/null; then echo "FAIL: $py has no numpy (metric_utils.py needs it)" >&2; exit 1; fi
if ! [ -x "$bin" ]; then echo "FAIL: $bin is missing (ninja -C build verl_reward_peer)" >&2; exit 1; fi

"$py" "$peer/make_corpus.py" "$count" "$seed" "$tmp/requests.jsonl"
check "the corpus has $count pairs and the validation batches" '[ "$(wc -l <"$tmp/requests.jsonl")" -gt "$count" ]'
"$bin" <"$tmp/requests.jsonl" >"$tmp/ours.jsonl"
check "verl_reward_peer exits 0" '[ $? -eq 0 ]'
"$py" "$peer/peer.py" <"$tmp/requests.jsonl" >"$tmp/peer.jsonl"
check "verl's Python scores the corpus" '[ $? -eq 0 ]'
check "scores and metrics are identical to verl's" '"$py" "$peer/compare.py" "$tmp/requests.jsonl" "$tmp/ours.jsonl" "$tmp/peer.jsonl" >&2'
# The comparison itself can fail: a changed score must be seen.
sed '0,/"score": 1.0/s//"score": 0.5/' "$tmp/peer.jsonl" >"$tmp/peer_bad.jsonl"
check "a changed score is reported as a mismatch" '! "$py" "$peer/compare.py" "$tmp/requests.jsonl" "$tmp/ours.jsonl" "$tmp/peer_bad.jsonl" >/dev/null'
exit $failed
