# Sourced by every test that runs a head, an sshd or a listener of its own: the one way the shell
# tests pick ports. free_ports N [HOST] prints N TCP ports of HOST (default 127.0.0.1) that were
# free a moment ago, all distinct (bound together, then closed), on one line.
#   read -r port store < <(free_ports 2)
#   sshd_port=$(free_ports 1 127.0.0.2)
free_ports() {
  python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind((sys.argv[2], 0))
print(*[s.getsockname()[1] for s in ss])' "$1" "${2:-127.0.0.1}"
}
