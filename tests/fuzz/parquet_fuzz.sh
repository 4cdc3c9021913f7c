#!/usr/bin/env bash
# Builds the parquet reader's libFuzzer target with clang (ASan + UBSan) and runs it for a while,
# seeded with the committed fixtures (tests/data/parquet/*.parquet).
#   tests/fuzz/parquet_fuzz.sh [seconds, default 60] [work dir, default build-fuzz]
# Exits non-zero when libFuzzer finds a crash, a leak or an allocation over 2 GiB (the input is left
# in the work dir as crash-*/oom-*; rerun it with: <work dir>/parquet_fuzz <file>).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
work=${2:-$src/build-fuzz}
mkdir -p "$work/corpus"
cxx=${CXX_FUZZ:-clang++}
"$cxx" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src" "$src/tests/fuzz/parquet_fuzz.cc" "$src/data/parquet.cc" "$src/data/thrift_compact.cc" \
  "$src/common/error.cc" -lsnappy -lzstd -lz -o "$work/parquet_fuzz"
cp -n "$src"/tests/data/parquet/*.parquet "$work/corpus/" 2>/dev/null || true
cd "$work"
./parquet_fuzz -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 corpus
