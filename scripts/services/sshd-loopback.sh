#!/usr/bin/env bash
# Test service: N OpenSSH servers on this machine, one per loopback address, as N "hosts".
#
#   sshd-loopback.sh start N DIR [PORT]   host i (1..N) listens on 127.0.0.(i+1):PORT (default 2222)
#   sshd-loopback.sh stop N DIR           stops them and their sessions' sshd processes
#
# Each host has its own host key (DIR/host-<i>/ssh_host_ed25519_key), so a test can tell them
# apart and swap one host's key for another's ("changed host key"). DIR also gets:
#   id_ed25519[.pub]    the user key pair they accept (DIR/authorized_keys)
#   wrong_ed25519       a key pair they do not accept
#   known_hosts         every host's key, "[127.0.0.x]:PORT ssh-ed25519 ..."
#   port                the port, for stop and the tests
# Each host logs to DIR/host-<i>/sshd.log at $SSHD_LOG_LEVEL (default ERROR; VERBOSE logs one
# "Starting session: command ..." line per command run, which tests count).
# Every sshd runs in the foreground (-D) under its own config (no PAM, StrictModes off so DIR may
# live under /tmp, root may log in with a key); start returns once each answers with its SSH
# banner, never after a fixed sleep, and fails naming the host that does not.
set -euo pipefail

usage() { echo "usage: $0 start N DIR [PORT] | stop N DIR" >&2; exit 2; }
[ $# -ge 3 ] || usage
cmd=$1 n=$2 dir=$3
case "$n" in '' | *[!0-9]*) usage ;; esac

addr() { echo "127.0.0.$(($1 + 1))"; }

# Reads the first bytes the server sends: "SSH-" once it is up.
answers() {
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2" && head -c 4 <&3' _ "$1" "$2" 2>/dev/null | grep -q '^SSH-'
}

stop_one() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # Its sessions are sshd children that outlive the listener: end them too.
    local kids
    kids=$(pgrep -P "$pid" || true)
    kill "$pid" $kids 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" $kids 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

case "$cmd" in
start)
  port=${4:-2222}
  sshd=$(command -v sshd || echo /usr/sbin/sshd)
  [ -x "$sshd" ] || { echo "sshd-loopback: no sshd (install openssh-server)" >&2; exit 1; }
  mkdir -p "$dir" /run/sshd
  chmod 700 "$dir"
  dir=$(cd "$dir" && pwd)
  echo "$port" >"$dir/port"
  [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C verlctl-test -f "$dir/id_ed25519"
  [ -f "$dir/wrong_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C verlctl-wrong -f "$dir/wrong_ed25519"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"
  for i in $(seq 1 "$n"); do
    h="$dir/host-$i"
    a=$(addr "$i")
    mkdir -p "$h"
    [ -f "$h/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C "host-$i" -f "$h/ssh_host_ed25519_key"
    echo "[$a]:$port $(cut -d' ' -f1,2 "$h/ssh_host_ed25519_key.pub")" >>"$dir/known_hosts"
    cat >"$h/sshd_config" <<CONF
ListenAddress $a:$port
HostKey $h/ssh_host_ed25519_key
PidFile $h/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
PrintMotd no
MaxStartups 200:30:400
MaxSessions 100
LogLevel ${SSHD_LOG_LEVEL:-ERROR}
Subsystem sftp internal-sftp
CONF
    stop_one "$h/sshd.pid"
    # Its own session (a caller that ends its process group must not end the servers) and its
    # own output to its log (an inherited stdout would keep the caller's pipe open).
    setsid "$sshd" -D -f "$h/sshd_config" -E "$h/sshd.log" </dev/null >>"$h/sshd.log" 2>&1 &
    echo $! >"$h/sshd.pid"
  done
  for i in $(seq 1 "$n"); do
    a=$(addr "$i")
    ok=0
    for _ in $(seq 1 400); do  # up to ~20 s on a loaded machine
      if answers "$a" "$port"; then ok=1; break; fi
      kill -0 "$(cat "$dir/host-$i/sshd.pid")" 2>/dev/null || break
      sleep 0.05
    done
    if [ "$ok" != 1 ]; then
      echo "sshd-loopback: host-$i ($a:$port) does not answer; its log:" >&2
      cat "$dir/host-$i/sshd.log" >&2 || true
      exit 1
    fi
  done
  ;;
stop)
  for i in $(seq 1 "$n"); do stop_one "$dir/host-$i/sshd.pid"; done
  ;;
*) usage ;;
esac
