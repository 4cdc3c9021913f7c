#!/usr/bin/env bash
# Start-up cost of the commands that must never load libtorch, against `true` in the same run.
# Usage: bench/startup_bench.sh [build-dir]   (needs hyperfine; scripts/setup installs it)
# Prints hyperfine's table and each command's ratio to `true`; goal: under 20 ms each.
set -euo pipefail
build=${1:-build}
v="$build/verlctl"
[ -x "$v" ] || { echo "no $v: build first (scripts/build)" >&2; exit 1; }
out=$(mktemp)
hyperfine -N --warmup 20 --runs 200 --export-json "$out" \
  'true' "$v --help" "$v config show" "$v config validate" >&2
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["median"]
print(f"{'command':40} {'median ms':>10} {'mean ms':>10} {'ratio to true':>14}")
for x in r:
    print(f"{x['command']:40} {x['median']*1e3:10.2f} {x['mean']*1e3:10.2f} {x['median']/base:14.1f}")
PY
rm -f "$out"
