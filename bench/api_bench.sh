#!/usr/bin/env bash
# The head's API under a bounded wrk load on loopback, against nginx serving a static file of
# the same byte size, in the same run: GET /api/jobs (bearer token, via a wrk Lua script; the
# same script, header included, is used for nginx) and GET /<file>. Prints p50/p99 latency and
# requests/s for both and the ratios.
# Usage: bench/api_bench.sh [verlctl] [duration_s] [connections]   (needs wrk and nginx:
# scripts/setup installs them). A local cluster of its own, 3 jobs (stopped at once, so that
# nothing trains during the load) make /api/jobs a realistic answer. Leaves nothing running.
set -euo pipefail
v=${1:-build/verlctl}
dur=${2:-10}
conns=${3:-8}
[ -x "$v" ] || { echo "no $v: build first (scripts/build)" >&2; exit 1; }
command -v wrk >/dev/null && command -v nginx >/dev/null || { echo "wrk and nginx are needed (scripts/setup)" >&2; exit 1; }

export VERLCTL_HOME=$(mktemp -d)
work=$(mktemp -d)
name=apibench$$
nginx_pid=""
cleanup() {
  [ -n "$nginx_pid" ] && { kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null; } || true
  "$v" down --name "$name" --timeout 5 >/dev/null 2>&1 || true
  rm -rf "$VERLCTL_HOME" "$work"
}
trap cleanup EXIT

read -r port store nport < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
"$v" up --local 1 --name "$name" head.dashboard_port=$port head.store_port=$store --skip-preflight >/dev/null 2>&1
token=$(cat "$VERLCTL_HOME/$name/token")
for i in 1 2 3; do
  id=$("$v" submit --name "$name" --no-wait trainer.total_training_steps=5 2>/dev/null)
  "$v" stop --name "$name" "$id" >/dev/null 2>&1 || true
done
curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/jobs" >"$work/jobs.json"
size=$(stat -c %s "$work/jobs.json")

mkdir -p "$work/nginx/html" "$work/nginx/logs"
cp "$work/jobs.json" "$work/nginx/html/jobs.json"
chmod 755 "$work" "$work/nginx" "$work/nginx/html"  # nginx's workers run as another user
chmod 644 "$work/nginx/html/jobs.json"
cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 256; }
http {
  access_log off;
  default_type application/json;
  client_body_temp_path $work/nginx/tmp;
  server { listen 127.0.0.1:$nport; root $work/nginx/html; }
}
NGINX
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$nport/jobs.json" && break; sleep 0.05; done
[ "$(curl -s "http://127.0.0.1:$nport/jobs.json" | wc -c)" = "$size" ] || { echo "nginx does not serve the file" >&2; exit 1; }

printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "$token" >"$work/auth.lua"
echo "# GET /api/jobs answer: $size bytes ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["jobs"]))' "$work/jobs.json") jobs); wrk -t1 -c$conns -d${dur}s --latency on 127.0.0.1" >&2
wrk -t1 -c"$conns" -d"${dur}s" --latency -s "$work/auth.lua" "http://127.0.0.1:$port/api/jobs" >"$work/head.txt"
wrk -t1 -c"$conns" -d"${dur}s" --latency -s "$work/auth.lua" "http://127.0.0.1:$nport/jobs.json" >"$work/nginx.txt"
cat "$work/head.txt" "$work/nginx.txt" >&2
python3 - "$work/head.txt" "$work/nginx.txt" "$size" <<'PY'
import re, sys
def parse(path):
    t = open(path).read()
    unit = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    lat = {p: float(v) * unit[u] for p, v, u in re.findall(r"^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$", t, re.M)}
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", t).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
    assert not errors, "%s: %s non-2xx answers" % (path, errors.group(1))
    return lat["50"], lat["99"], rps
h, n = parse(sys.argv[1]), parse(sys.argv[2])
print("| server | body | p50 ms | p99 ms | requests/s |")
print("| --- | --- | --- | --- | --- |")
print("| verlctl head, GET /api/jobs | %s B | %.3f | %.3f | %.0f |" % (sys.argv[3], *h))
print("| nginx, static file | %s B | %.3f | %.3f | %.0f |" % (sys.argv[3], *n))
print("ratio head / nginx: p50 %.2fx, p99 %.2fx, requests/s %.2fx" % (h[0] / n[0], h[1] / n[1], h[2] / n[2]))
PY
