#!/usr/bin/env bash
# A verlctl without its trainer module next to it says so, names where it looked, exits 6 —
# and a bad config is still caught first (exit 3), without loading anything.
set -u
v=${VERLCTL:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$v" "$tmp/verlctl"
fail=0
err=$(env -u VERLCTL_TRAINER_MODULE "$tmp/verlctl" train 2>&1); rc=$?
[ $rc -eq 6 ] || { echo "FAIL: expected exit 6, got $rc: $err" >&2; fail=1; }
grep -q "not compiled into this build" <<<"$err" || { echo "FAIL: message: $err" >&2; fail=1; }
grep -qF "$tmp/libverlctl_trainer.so" <<<"$err" || { echo "FAIL: does not name where it looked: $err" >&2; fail=1; }
env -u VERLCTL_TRAINER_MODULE "$tmp/verlctl" train trainer.nnodes=0 >/dev/null 2>&1; rc=$?
[ $rc -eq 3 ] || { echo "FAIL: bad config should exit 3 before loading the module, got $rc" >&2; fail=1; }
exit $fail
