#!/usr/bin/env bash
# `verlctl logs -f` keeping up with a rank that writes 50 MB of log: a writer posts the log to
# the head exactly as an agent ships a rank's stdout (POST /api/jobs/<id>/logs, chunks at byte
# offsets, 100-byte lines), as fast as the head takes it, while `verlctl logs <id> -f` follows.
# Prints the writer's ingest rate, the follower's rate over the whole run, and the lag at the
# end (from the writer's last chunk to the follower's last line on its stdout).
# Usage: bench/logs_follow_bench.sh [verlctl] [megabytes]. Leaves nothing running.
set -euo pipefail
v=${1:-build/verlctl}
mb=${2:-50}
[ -x "$v" ] || { echo "no $v: build first (scripts/build)" >&2; exit 1; }
export VERLCTL_HOME=$(mktemp -d)
work=$(mktemp -d)
name=logbench$$
follower=""
cleanup() {
  [ -n "$follower" ] && { kill "$follower" 2>/dev/null; wait "$follower" 2>/dev/null; } || true
  "$v" down --name "$name" --timeout 5 >/dev/null 2>&1 || true
  rm -rf "$VERLCTL_HOME" "$work"
}
trap cleanup EXIT
read -r port store < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
"$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --skip-preflight >/dev/null 2>&1
token=$(cat "$VERLCTL_HOME/$name/token")
# A job that waits for a second node which never comes: it runs nothing, so the log is the
# writer's alone and nothing else loads the machine.
id=$("$v" submit --name "$name" --no-wait trainer.nnodes=2)
"$v" logs --name "$name" "$id" -f >"$work/follow.out" 2>"$work/follow.err" &
follower=$!
python3 - "$port" "$token" "$id" "$mb" "$work/follow.out" <<'PY'
import http.client, json, os, sys, time
port, token, job, mb, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
line_len, chunk_lines = 100, 2500                 # 100-byte lines, 250 kB chunks
total_lines = mb * 1000 * 1000 // line_len
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
hdr = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
t0 = time.monotonic()
offset, n = 0, 0
resent, errors = 0, {}
while n < total_lines:
    k = min(chunk_lines, total_lines - n)
    data = "".join("line %09d %s\n" % (n + i, "x" * (line_len - 16)) for i in range(k))
    body = json.dumps({"rank": 0, "host": "bench", "chunks": [{"stream": "stdout", "offset": offset, "data": data}]})
    # As an agent does: a chunk the head did not take is sent again at the same offset.
    for attempt in range(50):
        conn.request("POST", "/api/jobs/%s/logs" % job, body, hdr)
        r = conn.getresponse(); answer = r.read()
        if r.status == 200: break
        resent += 1
        errors[answer[:120]] = errors.get(answer[:120], 0) + 1
        time.sleep(0.05)
    assert r.status == 200, "chunk at offset %d: %d %s" % (offset, r.status, answer[:300])
    offset += len(data); n += k
t_written = time.monotonic()
# The follower is done when its last line is the writer's last line.
last = "line %09d" % (total_lines - 1)
while True:
    with open(out, "rb") as f:
        try:
            f.seek(-200, os.SEEK_END)
        except OSError:
            f.seek(0)
        if last.encode() in f.read(): break
    if time.monotonic() - t_written > 300: sys.exit("the follower did not catch up within 300 s")
    time.sleep(0.01)
t_followed = time.monotonic()
lines = sum(1 for _ in open(out, "rb"))
assert lines == total_lines, "follower printed %d lines of %d" % (lines, total_lines)
w, f = t_written - t0, t_followed - t0
print("| log | writer (POST) | follower (logs -f) | lag at the end | chunks resent |")
print("| --- | --- | --- | --- | --- |")
print("| %d MB, %d lines | %.1f s, %.1f MB/s | %.1f s, %.1f MB/s | %.2f s | %d of %d |" % (mb, total_lines, w, offset / w / 1e6, f, offset / f / 1e6, t_followed - t_written, resent, total_lines // chunk_lines))
for e, k in errors.items(): print("resent %d times after: %s" % (k, e.decode(errors="replace")))
PY
"$v" stop --name "$name" "$id" --grace 1 >/dev/null 2>&1 || true
wait "$follower" || true
follower=""
