#!/usr/bin/env bash
# The dashboard and GET /metrics as a person and a scraper see them: a real local cluster
# (up --local 1), a real short job, and Debian's headless Chromium opening
# /dashboard?token=...: the node row with its resources and health, the job and its final
# state, charts that hold data points (score, losses, throughput, timing breakdown), "no GPUs"
# on a GPU-less cluster; without the token the page answers 401 and its banner says so; a head
# that is gone gives the "does not answer" banner. /metrics: a valid exposition whose values
# match the job's. Own VERLCTL_HOME, free ports; leaves no process behind.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"
export VERLCTL_HOME=$(mktemp -d)
name=dash$$
work=$(mktemp -d)
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/dashboard.sh"
cleanup() {
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME" "$work"
}
trap cleanup EXIT

read -r port store < <(free_ports 2)
base=http://127.0.0.1:$port

"$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --timeout 60 --skip-preflight >/dev/null 2>"$work/up.err"
rc=$?
check "up exits 0" '[ $rc -eq 0 ]' || cat "$work/up.err" >&2
[ $rc -eq 0 ] || exit 1
token=$(cat "$VERLCTL_HOME/$name/token")

# A short real job: 2 SFT steps, 4 PPO steps, validation every 2 (val score has points).
job_args="trainer.total_training_steps=4 trainer.sft_warmup_steps=2 trainer.test_freq=2"
t0=$(date +%s)
"$v" submit --name "$name" $job_args >"$work/job.out" 2>"$work/job.err"; rc=$?
echo "submit took $(( $(date +%s) - t0 )) s" >&2
check "the job succeeds (submit exits 0)" '[ $rc -eq 0 ]' || tail -20 "$work/job.err" >&2
id=$("$v" jobs --name "$name" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["id"])')
check "the job has an id" '[ -n "$id" ]'

dashboard_dump "$base/dashboard?token=$token&refresh_ms=1000" "$work/page.html"; rc=$?
check "chromium rendered the page" '[ $rc -eq 0 ] && [ -s "$work/page.html" ]' || tail -5 "$work/page.html.err" >&2
dashboard_state "$work/page.html" >"$work/state.json"
cat "$work/state.json" >&2; echo >&2
py() { python3 -c "import json,sys; s=json.load(open('$work/state.json')); $1"; }
check "page loaded without error" 'py "assert s[\"ok\"] is True and s[\"error\"] is None, s"'
check "page refreshed more than once" 'py "assert s[\"refreshes\"] >= 2, s"'
check "page names the cluster" 'py "assert s[\"cluster\"] == \"$name\", s"'
check "node row: node-0 alive with its CPUs" 'py "n=s[\"nodes\"]; assert len(n)==1 and n[0][\"name\"]==\"node-0\" and n[0][\"state\"]==\"alive\" and n[0][\"cpus\"]>=1, n"'
check "node row in the DOM with its health" 'grep -q "<tr data-node=\"node-0\" data-state=\"alive\">" "$work/page.html"'
check "node row shows the memory" 'grep -Eq "<td>[0-9.]+ (GiB|MiB)</td>" "$work/page.html"'
check "job row with its final state" 'grep -q "data-job=\"$id\" data-state=\"SUCCEEDED\"" "$work/page.html"'
check "job selected, steps shown" 'py "assert s[\"selected\"]==\"$id\" and s[\"jobs\"][0][\"step\"]==4, s"'
check "job events listed (PENDING .. SUCCEEDED)" 'grep -q "<li data-state=\"PENDING\">" "$work/page.html" && grep -q "<li data-state=\"SUCCEEDED\">" "$work/page.html"'
# Rows: step 0 (the initial validation) and steps 1..4; each chart holds what the trainer wrote.
check "score chart: training and val score points" 'py "c=s[\"charts\"][\"chart-score\"]; assert \"critic/score/mean\" in c[\"series\"] and \"val/score/mean\" in c[\"series\"] and c[\"points\"]==7, c"'
check "loss chart: pg_loss and vf_loss of every step" 'py "c=s[\"charts\"][\"chart-loss\"]; assert {\"actor/pg_loss\",\"critic/vf_loss\"} <= set(c[\"series\"]) and c[\"points\"]>=8, c"'
check "throughput chart has 4 points" 'py "c=s[\"charts\"][\"chart-throughput\"]; assert c[\"series\"]==[\"perf/throughput\"] and c[\"points\"]==4, c"'
check "timing chart: the phases" 'py "c=s[\"charts\"][\"chart-timing\"]; assert {\"timing_s/gen\",\"timing_s/update_actor\",\"timing_s/update_critic\",\"timing_s/adv\"} <= set(c[\"series\"]), c"'
check "canvas elements carry their points" 'grep -q "id=\"chart-throughput\" [^>]*data-points=\"4\"" "$work/page.html" || grep -q "data-points=\"4\"[^>]*id=\"chart-throughput\"" "$work/page.html"'
check "no GPUs on this cluster" 'py "assert s[\"gpus\"] is False, s" && grep -q "data-gpus=\"no\"" "$work/page.html"'

# A screenshot a person can look at (kept when DASHBOARD_SCREENSHOT names a file).
if [ -n "${DASHBOARD_SCREENSHOT:-}" ]; then
  timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage \
    --user-data-dir="$(mktemp -d -p "$work")" --virtual-time-budget=8000 --window-size=1400,1600 \
    --screenshot="$DASHBOARD_SCREENSHOT" "$base/dashboard?token=$token" >/dev/null 2>&1
fi

# Without the token, or with another: 401, and the page's banner says what to do.
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/dashboard")
check "dashboard without token: 401" '[ "$code" = 401 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/dashboard?token=wrong$token")
check "dashboard with a wrong token: 401" '[ "$code" = 401 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$base/dashboard")
check "dashboard with the header: 200" '[ "$code" = 200 ]'
dashboard_dump "$base/dashboard" "$work/noauth.html"
dashboard_state "$work/noauth.html" >"$work/state.json"
check "no-token page: error kind token" 'py "assert s[\"ok\"] is False and s[\"error_kind\"]==\"token\", s"'
check "no-token page: banner names 401 and the token file" 'grep -q "<div id=\"banner\" class=\"banner\" role=\"alert\" data-kind=\"token\">401: this address carries no token" "$work/noauth.html" && grep -q "/token" "$work/noauth.html"'
check "no-token page shows no node" '! grep -q "data-node=" "$work/noauth.html"'

# GET /metrics: the token as header or ?token=, never without.
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/metrics")
check "metrics without token: 401" '[ "$code" = 401 ]'
curl -s -D "$work/metrics.h" -H "Authorization: Bearer $token" "$base/metrics" >"$work/metrics.txt"
curl -s "$base/metrics?token=$token" >"$work/metrics2.txt"
check "metrics with ?token=: the same families" '[ "$(grep "^# TYPE" "$work/metrics.txt")" = "$(grep "^# TYPE" "$work/metrics2.txt")" ]'
check "metrics content type is the text format" 'grep -qi "^content-type: text/plain; version=0.0.4" "$work/metrics.h"'
"$v" status --name "$name" "$id" -o json >"$work/job.json"
python3 - "$work/metrics.txt" "$work/job.json" "$id" "$name" <<'PY' >&2; rc=$?
import json, re, sys
text, job, jid, cluster = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
# A valid exposition: every sample line is name{labels} value, under its family's HELP and TYPE.
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$')
typed, values = set(), {}
for line in text.splitlines():
    if line.startswith("# TYPE "):
        typed.add(line.split()[2]); continue
    if line.startswith("# HELP "): continue
    m = sample.match(line)
    assert m, "not a sample line: %r" % line
    assert m.group(1) in typed, "sample before its TYPE: %r" % line
    values[line.rsplit(" ", 1)[0]] = float(line.rsplit(" ", 1)[1])
def get(name, **labels):
    for k, v in values.items():
        if k.split("{")[0] == name and all('%s="%s"' % (a, b) in k for a, b in labels.items()): return v
    raise AssertionError("no %s %s in /metrics" % (name, labels))
if "job" in job: job = job["job"]
assert get("verl_cluster_info", cluster=cluster) == 1
assert get("verl_node_state", node="node-0", state="alive") == 1
assert get("verl_node_state", node="node-0", state="lost") == 0
assert get("verl_job_state", job=jid, state="SUCCEEDED") == 1
assert get("verl_job_state", job=jid, state="RUNNING") == 0
assert get("verl_job_step", job=jid) == job["step"] == 4
assert get("verl_job_total_steps", job=jid) == job["total_steps"]
lm = job["latest_metrics"]
assert abs(get("verl_job_score_mean", job=jid) - lm["critic/score/mean"]) < 1e-9
assert abs(get("verl_job_throughput_tokens_per_second", job=jid) - lm["perf/throughput"]) <= 1e-9 * lm["perf/throughput"]
assert get("verl_job_metric", job=jid, metric="actor/pg_loss") == lm["actor/pg_loss"]
print("metrics: %d samples, job %s step %d score %.4f" % (len(values), jid, job["step"], lm["critic/score/mean"]))
PY
check "metrics: valid exposition, values match the job" '[ $rc -eq 0 ]'

# A head that does not answer: the page, saved while the head was up, opened again after down
# (its API calls now fail at the network level) says so in its banner.
curl -s -H "Authorization: Bearer $token" "$base/dashboard" >"$work/saved.html"
"$v" down --name "$name" --timeout 10 >/dev/null 2>&1
dashboard_dump "file://$work/saved.html?token=$token" "$work/down.html"
dashboard_state "$work/down.html" >"$work/state.json"
check "head gone: error kind unreachable" 'py "assert s[\"ok\"] is False and s[\"error_kind\"]==\"unreachable\", s"'
check "head gone: banner says it does not answer" 'grep -q "data-kind=\"unreachable\">the head at .* does not answer" "$work/down.html"'

[ $failed -eq 0 ] && echo "dashboard_test: all passed" >&2
exit $failed
