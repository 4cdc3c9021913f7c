# Sourced by the tests that run a head on loopback: free_ports N prints N TCP ports of 127.0.0.1
# that were free a moment ago, all distinct (bound together, then closed), on one line.
#   read -r port store < <(free_ports 2)
free_ports() {
  python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])' "$1"
}
