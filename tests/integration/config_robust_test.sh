#!/usr/bin/env bash
# Issue 16: inputs that crashed or misled the config commands. Each must end in a clear
# invalid-config error (exit 3) naming the key, never a signal or exit 1 ("a bug").
set -u
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
long=$(python3 -c "print('k'*100000)")

# Case 2: std::regex recursed once per character and overflowed the stack (SIGSEGV, 139).
out=$("$v" config validate "+$long=1" 2>&1); rc=$?
check "a 100k-character key exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... saying how long the key is" 'grep -q "100000 characters long" <<<"$out"'
out=$("$v" config validate "+x=\${$long}" 2>&1); rc=$?
check "\${ + 100k characters + } exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... naming the key" 'grep -q "x:" <<<"$out"'
out=$("$v" config validate "trainer.total_training_steps=$(python3 -c "print('1'*100000)")" 2>&1); rc=$?
check "a 100k-digit number exits 3 (got $rc)" '[ $rc -eq 3 ]'

# Case 3: references of references multiplied without bound; a self-reference is a cycle.
out=$("$v" config validate '+x=${x}${x}${x}${x}${x}' 2>&1); rc=$?
check "a self-reference exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... as a cycle through x" 'grep -q "cycle through .x." <<<"$out"'
args=("+l0=$(python3 -c "print('a'*64)")")
for i in $(seq 1 12); do args+=("+l$i=\${l$((i-1))}\${l$((i-1))}\${l$((i-1))}\${l$((i-1))}"); done
out=$(timeout 20 "$v" config validate "${args[@]}" 2>&1); rc=$?
check "references of references that grow past the bound exit 3 (got $rc)" '[ $rc -eq 3 ]'
check "... naming the key and the bound" 'grep -q "longer than 1024 KiB" <<<"$out"'

# Case 9: validation gaps.
out=$("$v" config validate ++ 2>&1); rc=$?
check "a bare ++ is a usage error, exit 2 (got $rc)" '[ $rc -eq 2 ]'
check "... naming it" 'grep -q "on its own is not an override" <<<"$out"'
out=$("$v" config validate actor_rollout_ref.actor.optim.lr=1e999 2>&1); rc=$?
check "lr=1e999 exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... without calling it null" '! grep -q "value null" <<<"$out"'
check "... saying it is past the range" 'grep -q "value 1e999 is past the range of a float" <<<"$out"'
check "... naming the key" 'grep -q "actor_rollout_ref.actor.optim.lr" <<<"$out"'
printf 'trainer:\n  experiment_name: "a\xffb"\n' >"$tmp/bad_utf8.yaml"
out=$("$v" config validate -f "$tmp/bad_utf8.yaml" 2>&1); rc=$?
check "invalid UTF-8 in a file exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... at its line and column" 'grep -q "bad_utf8.yaml:2:22" <<<"$out"'
printf 'trainer:\n  experiment_name: "a\\0b"\n' >"$tmp/nul.yaml"
out=$("$v" config validate -f "$tmp/nul.yaml" 2>&1); rc=$?
check "a NUL in experiment_name exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... naming the key" 'grep -q "trainer.experiment_name: contains a NUL" <<<"$out"'
printf 'name: ../../etc\nbackend: local\n' >"$tmp/cluster.yaml"
out=$("$v" config validate --kind cluster -f "$tmp/cluster.yaml" 2>&1); rc=$?
check "a cluster named ../../etc exits 3 (got $rc)" '[ $rc -eq 3 ]'
check "... naming the key" 'grep -q "^error: name:" <<<"$out"'
exit $failed
