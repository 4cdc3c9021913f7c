# Sourced by the tests that open the dashboard in Debian's headless Chromium (no skip: a missing
# Chromium fails the test). Expects $work (a scratch directory).
#   dashboard_dump URL OUT   renders URL (fetches and a few refreshes run within
#                            --virtual-time-budget) and writes the DOM to OUT, stderr to OUT.err
#   dashboard_state FILE     prints the page's own record of what it rendered (#verl-state, JSON)
chromium=/usr/bin/chromium
[ -x "$chromium" ] || { echo "FAIL: $chromium is missing (scripts/setup installs it)" >&2; exit 1; }

dashboard_dump() {
  timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage \
    --user-data-dir="$(mktemp -d -p "$work")" --virtual-time-budget=8000 --dump-dom "$1" >"$2" 2>"$2.err"
}

dashboard_state() {
  python3 -c '
import html, re, sys
m = re.search(r"<pre id=\"verl-state\"[^>]*>(.*?)</pre>", open(sys.argv[1]).read(), re.S)
print(html.unescape(m.group(1)) if m else "{}")' "$1"
}
