#!/usr/bin/env bash
# data/parquet.cc reads what a real parquet writer writes: tests/peers/write_parquet.mjs writes verl's
# gsm8k shape and a table of every type with parquet-wasm (arrow-rs) in every combination of codec
# (uncompressed, snappy, gzip, zstd), dictionary on/off, data page v1/v2 and one or many row groups,
# plus files outside the subset; the unit binary's ParquetPeer test reads them and compares the rows
# with the writer's JSON exactly. hyparquet (a second reader) must agree with the writer's JSON too.
set -u
src=${VERL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${VERL_BINARY_DIR:-$src/build}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup installs nodejs)" >&2; exit 1; }
for pkg in parquet-wasm apache-arrow hyparquet hyparquet-compressors; do
  [ -d "$src/tests/peers/node_modules/$pkg" ] ||
    { echo "FAIL: tests/peers/node_modules/$pkg is missing (scripts/setup runs npm ci in tests/peers)" >&2; exit 1; }
done
tests=$bin/tests/verl_unit_tests
[ -x "$tests" ] || tests=$bin/verl_unit_tests
[ -x "$tests" ] || { echo "FAIL: no verl_unit_tests under $bin (build the verl_unit_tests target)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$src/tests/peers/write_parquet.mjs" "$tmp" 97
check "the peer wrote the fixtures" '[ -s "$tmp/manifest.json" ] && [ "$(ls "$tmp"/*.parquet | wc -l)" -ge 60 ]'

VERL_PARQUET_PEER_DIR=$tmp "$tests" --gtest_filter='ParquetPeer.*' --gtest_brief=1 >"$tmp/gtest.log" 2>&1
rc=$?
grep -E "^\[ peer|Failure|differs|want:|ours:|rows, the writer|Which is|column" "$tmp/gtest.log" | head -60 >&2
check "ours reads every file as the writer wrote it and refuses the rest" '[ $rc -eq 0 ] && grep -q "^\[ peer" "$tmp/gtest.log"'
check "no case was skipped" '! grep -q "SKIPPED" "$tmp/gtest.log"'

# The second reader: hyparquet must return the writer's rows too (so the expected JSON is right).
node --input-type=module -e '
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
const [dir, reader] = process.argv.slice(1);
const sorted = (v) => Array.isArray(v) ? v.map(sorted) : v && typeof v === "object"
  ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v;
let bad = 0, n = 0;
for (const e of JSON.parse(readFileSync(dir + "/manifest.json"))) {
  if (!e.expected) continue;
  const got = JSON.parse(execFileSync("node", [reader, dir + "/" + e.file]).toString());
  const want = JSON.parse(readFileSync(dir + "/" + e.expected));
  ++n;
  if (JSON.stringify(sorted(got)) !== JSON.stringify(sorted(want))) { console.error("hyparquet differs on " + e.file); ++bad; }
}
console.error(`hyparquet: ${n - bad} of ${n} files as written`);
process.exit(bad ? 1 : 0);
' "$tmp" "$src/tests/peers/read_parquet.mjs"
check "hyparquet reads the files as the writer wrote them" '[ $? -eq 0 ]'
exit $failed
