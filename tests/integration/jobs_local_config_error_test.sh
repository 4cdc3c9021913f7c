#!/usr/bin/env bash
# A job config the head refuses, on a real local cluster (up --local 2): `submit` exits 3 naming
# the key path and nothing is queued. Own VERLCTL_HOME and free ports (lib/jobs_local.sh).
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/jobs_local.sh"
jobs_local_up

cerr=$("$v" submit --name "$name" trainer.nnodes=0 2>&1 >/dev/null); rc=$?
check "a config error exits 3 naming trainer.nnodes" '[ $rc -eq 3 ] && grep -q "trainer.nnodes" <<<"$cerr"'
check "nothing was queued" '[ "$("$v" jobs --name "$name" -o json | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"jobs\"]))")" = 0 ]'

jobs_local_down
exit $failed
