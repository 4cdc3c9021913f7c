#!/usr/bin/env bash
# Read speed of a 100k-row parquet file in verl's gsm8k shape (zstd, dictionary, data page v1, as
# pandas writes it; written by parquet-wasm = arrow-rs) with data/parquet.cc and with hyparquet
# (node, + hyparquet-compressors for zstd), in the same run: 1 warm-up then 5 runs each, medians.
#   bench/parquet_bench.sh [build dir] [rows]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$src/build}
rows=${2:-100000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
file=$tmp/gsm8k_${rows}.parquet
node "$src/tests/peers/write_parquet.mjs" --bench "$file" "$rows"
ls -l "$file" | awk '{printf "file: %d rows, %.1f MiB\n", '"$rows"', $5 / 1048576}'
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ours() { "$bin/bench/bench_parquet_read" "$file" | sed 's/.*"ms": \([0-9.]*\).*/\1/'; }
peer() { node "$src/tests/peers/read_parquet.mjs" --time "$file" | sed 's/.*"ms":\([0-9.]*\).*/\1/'; }
ours >/dev/null; peer >/dev/null
o=$(for i in 1 2 3 4 5; do ours; done | median)
p=$(for i in 1 2 3 4 5; do peer; done | median)
echo "verlctl data/parquet.cc: $o ms (median of 5)"
echo "hyparquet 1.33.0 (node $(node --version)): $p ms (median of 5)"
awk -v o="$o" -v p="$p" 'BEGIN {printf "ratio hyparquet / ours: %.2f\n", p / o}'
