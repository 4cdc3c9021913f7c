#!/usr/bin/env bash
# Issue 16, case 7: SIGINT while up runs its preflight stops what that up started (exit 130),
# as the man page says; before, the head and agents were left running with the state "up".
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

export VERLCTL_HOME=$(mktemp -d)
name=int$$
dir=$VERLCTL_HOME/$name
log=$(mktemp)
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME" "$log"
}
trap cleanup EXIT
read -r port store < <(free_ports 2)
leftovers() { pgrep -f -- "$VERLCTL_HOME" | grep -v "^$$\$" || true; }

"$v" up --local 2 --name "$name" head.dashboard_port=$port head.store_port=$store >"$log" 2>&1 &
up=$!
for _ in $(seq 1 300); do grep -q "preflight: probing" "$log" && break; sleep 0.1; done
check "up reached its preflight" 'grep -q "preflight: probing" "$log"'
kill -INT $up
wait $up; rc=$?
check "an interrupted up exits 130 (got $rc)" '[ $rc -eq 130 ]'
check "it says it stops the cluster" 'grep -q "interrupted: stopping cluster $name" "$log"'
for _ in $(seq 1 50); do [ -z "$(leftovers)" ] && break; sleep 0.1; done
check "no head or agent is left running: $(leftovers)" '[ -z "$(leftovers)" ]'
state=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$dir/state.json" 2>/dev/null)
check "the state is not up (got $state)" '[ "$state" != up ]'
[ $failed -eq 0 ] || cat "$log" >&2
exit $failed
