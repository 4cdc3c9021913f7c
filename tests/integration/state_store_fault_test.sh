#!/usr/bin/env bash
# Issue 16: the state store under a crash. The real head on its SQLite state.db takes a burst of
# submits (4 clients) and heartbeats (2 nodes); kill -9 in the middle of it; a new head on the
# same state.db must list every job whose submit was acknowledged (201), each once, with the
# config that was sent, and go on numbering after them. A submit in flight at the kill may be
# there or not, never twice. Own VERLCTL_HOME and free ports.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

export VERLCTL_HOME=$(mktemp -d)
name=sf$$
dir=$VERLCTL_HOME/$name
head_pid=
cleanup() {
  [ -n "$head_pid" ] && kill -9 "$head_pid" 2>/dev/null
  "$v" down --name "$name" --timeout 0 >/dev/null 2>&1
  rm -rf "$VERLCTL_HOME"
}
trap cleanup EXIT
read -r port store < <(free_ports 2)

# up writes the state directory (spec, token); the test then runs the head itself.
"$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --skip-preflight >/dev/null 2>&1
"$v" down --name "$name" --timeout 10 >/dev/null 2>&1
check "up and down left the spec and the token" '[ -s "$dir/cluster.json" ] && [ -s "$dir/token" ]'
token=$(head -1 "$dir/token")
: >"$dir/acked"

start_head() {
  "$v" head --state-dir "$dir" >>"$dir/head-test.log" 2>&1 &
  head_pid=$!
  for _ in $(seq 1 100); do
    curl -s -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/cluster" && return 0
    sleep 0.1
  done
  return 1
}

rounds=3
for round in $(seq 1 $rounds); do
  check "round $round: the head starts on the state.db" start_head
  # The burst: each acknowledged submit is written to acked (id tag) before the next is sent.
  python3 - "$port" "$token" "$dir/acked" "$round" <<'EOF' &
import http.client, json, sys, threading, time
port, token, acked_path, rnd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
H = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
lock = threading.Lock()
acked = open(acked_path, "a")
deadline = time.time() + 20

def call(method, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, json.dumps(body), H)
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"{}")

def submitter(k):
    i = 0
    while time.time() < deadline:
        tag = "r%s-c%d-%d" % (rnd, k, i)
        try:
            status, body = call("POST", "/api/jobs", {"kind": "probe", "argv": ["probe", "tag=" + tag]})
        except Exception:
            return  # the head is gone
        if status == 201:
            with lock:
                acked.write("%s %s\n" % (body["id"], tag))
                acked.flush()
        i += 1

def heartbeater(k):
    try:
        status, body = call("POST", "/api/nodes/register", {"name": "hb-%d" % k, "host": "127.0.0.1", "pid": 1,
                                                            "resources": {"cpus": 2, "memory_bytes": 1 << 30}})
        nid = body["id"]
        while time.time() < deadline:
            call("POST", "/api/nodes/%d/heartbeat" % nid, {"tasks": []})
    except Exception:
        return

ts = [threading.Thread(target=submitter, args=(k,)) for k in range(4)]
ts += [threading.Thread(target=heartbeater, args=(k,)) for k in range(2)]
for t in ts: t.start()
for t in ts: t.join()
EOF
  burst=$!
  before=$(wc -l <"$dir/acked")
  # Kill once this round's submits are flowing: at least 20 acknowledged.
  for _ in $(seq 1 200); do [ "$(wc -l <"$dir/acked")" -ge $((before + 20)) ] && break; sleep 0.05; done
  kill -9 "$head_pid"
  wait "$head_pid" 2>/dev/null
  head_pid=
  wait "$burst"
  check "round $round: submits were acknowledged before the kill" '[ "$(wc -l <"$dir/acked")" -ge $((before + 20)) ]'
done

check "a head starts again after the last kill" start_head
# Every job the new head lists, with its tag: "job-N tag".
python3 - "$port" "$token" >"$dir/listed" <<'EOF'
import http.client, json, sys
port, token = int(sys.argv[1]), sys.argv[2]
H = {"Authorization": "Bearer " + token}
def get(path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path, headers=H)
    return json.loads(c.getresponse().read())
for j in get("/api/jobs")["jobs"]:
    argv = get("/api/jobs/" + j["id"])["config"]["argv"]
    print(j["id"], *[a[4:] for a in argv if a.startswith("tag=")])
EOF
acked=$(wc -l <"$dir/acked")
listed=$(wc -l <"$dir/listed")
echo "acknowledged $acked submits over $rounds kills; the restarted head lists $listed jobs" >&2
missing=$(sort "$dir/acked" | comm -23 - <(sort "$dir/listed"))
check "every acknowledged job is listed with the config sent ($acked acked): ${missing:0:200}" '[ -z "$missing" ]'
check "no job id is listed twice" '[ -z "$(cut -d" " -f1 "$dir/listed" | sort | uniq -d)" ]'
check "no submit is stored twice" '[ -z "$(cut -d" " -f2 "$dir/listed" | sort | uniq -d)" ]'
check "no job without its tag" '[ -z "$(awk "NF != 2" "$dir/listed")" ]'
next=$(curl -s -X POST -H "Authorization: Bearer $token" --data '{"kind":"probe","argv":["probe","tag=after"]}' \
  "http://127.0.0.1:$port/api/jobs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"][4:])')
top=$(cut -d" " -f1 "$dir/listed" | cut -c5- | sort -n | tail -1)
check "ids go on after the last one listed ($top -> $next)" '[ "$next" -gt "$top" ]'
kill "$head_pid" 2>/dev/null
wait "$head_pid" 2>/dev/null
head_pid=
[ $failed -eq 0 ] || tail -20 "$dir/head-test.log" >&2
exit $failed
