#!/usr/bin/env bash
# The job commands against a cluster that was never brought up: exit 4 with the hint to start
# one. No cluster, no ports; own VERLCTL_HOME.
set -u
v=${VERLCTL:?}
name=nosuch$$
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs.sh"
export VERLCTL_HOME=$(mktemp -d)
trap 'rm -rf "$VERLCTL_HOME"' EXIT

for cmd in "jobs" "status job-1" "logs job-1" "stop job-1" "submit trainer.total_training_steps=1"; do
  out=$("$v" $cmd --name "$name" 2>&1 >/dev/null); rc=$?
  check "$cmd: no cluster, exit 4 with the hint" '[ $rc -eq 4 ] && grep -q "verlctl up --local 1" <<<"$out"' || echo "$out" >&2
done
exit $failed
