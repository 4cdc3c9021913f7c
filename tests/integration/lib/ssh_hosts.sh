# Sourced by the integration tests that need an SSH cluster: real OpenSSH servers on 127.0.0.2..
# as "hosts" (scripts/services/sshd-loopback.sh, each with its own host key), a work directory,
# free ports for the head, and a cluster spec for them. Nothing here skips: a test that cannot
# get its hosts fails.
#
#   ssh_hosts_start PREFIX N   makes $work (/tmp/PREFIX.XXXXXX), sets VERLCTL_HOME=$work/home,
#                              $sshd_dir, $port (sshd's), $dash and $store (the head's), $hosts
#                              (127.0.0.2 ..), starts the servers (logging at $SSHD_LOG_LEVEL)
#   ssh_hosts_spec NAME [TIMEOUT_S]
#                              writes $work/NAME.yaml (backend ssh over $hosts, the head on
#                              127.0.0.1 with fast heartbeats, nodes' files under $work/remote)
#                              and prints its path
#   ssh_hosts_cleanup CLUSTER...
#                              downs the clusters, stops the servers, kills whatever names $work
#                              still, removes $work; the tests call it from their EXIT trap
: "${VERLCTL:?set VERLCTL to the verlctl binary}" "${VERL_SOURCE_DIR:?set VERL_SOURCE_DIR}"
unset SSH_AUTH_SOCK

fail() { echo "FAIL: $*" >&2; exit 1; }

source "$VERL_SOURCE_DIR/tests/integration/lib/ports.sh"

ssh_hosts_start() {
  local prefix=$1 n=$2 i
  work=$(mktemp -d "/tmp/$prefix.XXXXXX")
  export VERLCTL_HOME=$work/home
  sshd_dir=$work/sshd
  ssh_hosts_n=$n
  hosts=""
  for i in $(seq 1 "$n"); do hosts="$hosts 127.0.0.$((i + 1))"; done
  hosts=${hosts# }
  port=$(free_ports 1 127.0.0.2)
  read -r dash store < <(free_ports 2)
  SSHD_LOG_LEVEL=${SSHD_LOG_LEVEL:-ERROR} "$VERL_SOURCE_DIR/scripts/services/sshd-loopback.sh" start "$n" "$sshd_dir" "$port" ||
    fail "cannot start sshd on 127.0.0.2-$((n + 1))"
}

ssh_hosts_spec() {
  local name=$1 timeout=${2:-6.0} h spec=$work/$1.yaml
  {
    cat <<YAML
name: $name
backend: ssh
head:
  host: 127.0.0.1
  dashboard_port: $dash
  store_port: $store
  heartbeat_interval_s: 0.3
  heartbeat_timeout_s: $timeout
nodes:
YAML
    for h in $hosts; do echo "  - {host: $h}"; done
    cat <<YAML
ssh:
  user: root
  port: $port
  identity_file: $sshd_dir/id_ed25519
  known_hosts: $sshd_dir/known_hosts
  connect_timeout_s: 5
  command_timeout_s: 60
  remote_dir: $work/remote
YAML
  } >"$spec"
  echo "$spec"
}

ssh_hosts_cleanup() {
  set +e
  local c left
  for c in "$@"; do "$VERLCTL" down --name "$c" --timeout 2 >/dev/null 2>&1; done
  "$VERL_SOURCE_DIR/scripts/services/sshd-loopback.sh" stop "$ssh_hosts_n" "$sshd_dir" >/dev/null 2>&1
  left=$(pgrep -f -- "$work/home\|$work/remote" || true)
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  rm -rf "$work"
}
