#!/usr/bin/env bash
# A private SLURM cluster on this one machine, for tests: munge with its own key and socket,
# slurmctld, and N slurmd daemons (node1..nodeN, all this host, each on its own port), every
# file under DIR. Nothing under /etc is read or written: SLURM_CONF points at DIR/slurm.conf.
#
#   slurm-cluster.sh start N DIR   start it; returns when sinfo shows all N nodes idle
#   slurm-cluster.sh stop DIR      cancel its jobs, stop every daemon and job step it started
#   (`stop N DIR` is accepted too)
#
# After start, `source DIR/env` sets SLURM_CONF for sbatch/squeue/scancel; the partition is
# "debug". stop leaves DIR in place (the caller made it, the caller removes it).
# The setup follows what works on a 2-core VM without cgroups: proctrack/linuxproc, task/none,
# select/cons_tres with CR_CPU, config_overrides so that the nodes' declared CPUs win.
set -euo pipefail

usage() { echo "usage: $0 start N DIR | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
shift

# A TCP port nobody listens on, from a range away from the ephemeral ports and common defaults.
free_port() {
  local p
  for _ in $(seq 200); do
    p=$(( 20000 + RANDOM % 20000 ))
    if [ -z "$(ss -Htln "sport = :$p")" ] && ! grep -qx "$p" "$1" 2>/dev/null; then
      echo "$p" >>"$1"
      echo "$p"
      return 0
    fi
  done
  echo "slurm-cluster: no free port found" >&2
  return 1
}

# Every process whose environment names this cluster's slurm.conf: the daemons, slurmstepd and
# the job steps they ran. The environment, not the command line, because slurmstepd and the
# jobs do not name the file.
cluster_pids() {
  local conf=$1 pid
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$pid" = $$ ] && continue
    if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$conf"; then echo "$pid"; fi
  done
}

wait_gone() {  # wait_gone SECONDS PID...
  local until=$(( $(date +%s) + $1 )) p left
  shift
  while :; do
    left=""
    for p in "$@"; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
    [ -z "$left" ] && return 0
    [ "$(date +%s)" -ge "$until" ] && return 1
    sleep 0.1
  done
}

start() {
  local n=$1 dir
  dir=$(cd "$2" && pwd)
  local host
  host=$(hostname -s)
  mkdir -p "$dir/munge" "$dir/log" "$dir/run" "$dir/state" "$dir/spool"
  chmod 0700 "$dir/munge"
  : >"$dir/ports"

  # munge: own key, socket, pid, log and seed; started first, slurm authenticates through it.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  local i
  for i in $(seq 100); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.05; done
  [ -S "$dir/munge/munge.socket" ] || { echo "slurm-cluster: munged did not start, see $dir/log/munged.log" >&2; return 1; }

  local ctld_port
  ctld_port=$(free_port "$dir/ports")
  {
    echo "ClusterName=verltest"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$ctld_port"
    echo "SlurmUser=$(id -un)"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
    echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SchedulerType=sched/backfill"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "SlurmdTimeout=30"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    echo "MinJobAge=30"
    echo "SchedulerParameters=sched_interval=1"
    for i in $(seq "$n"); do
      echo "NodeName=node$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port "$dir/ports") CPUs=1 RealMemory=256 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
  export SLURM_CONF=$dir/slurm.conf

  : >"$dir/run/pids"
  # -D: in the foreground of a background job of ours, so that stop finds them by pid.
  setsid slurmctld -D -i -f "$SLURM_CONF" >>"$dir/log/slurmctld.out" 2>&1 &
  echo $! >>"$dir/run/pids"
  for i in $(seq "$n"); do
    setsid slurmd -D -N "node$i" -f "$SLURM_CONF" >>"$dir/log/slurmd-node$i.out" 2>&1 &
    echo $! >>"$dir/run/pids"
  done

  # Ready when every node is idle (the controller has heard from each slurmd).
  local until=$(( $(date +%s) + 90 )) idle=0
  while :; do
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    [ "$idle" -ge "$n" ] && break
    if [ "$(date +%s)" -ge "$until" ]; then
      echo "slurm-cluster: only $idle of $n nodes idle after 90 s; logs in $dir/log" >&2
      sinfo -N >&2 || true
      tail -n 5 "$dir"/log/*.log >&2 || true
      return 1
    fi
    for p in $(cat "$dir/run/pids"); do
      kill -0 "$p" 2>/dev/null || { echo "slurm-cluster: a daemon (pid $p) exited; logs in $dir/log" >&2; tail -n 20 "$dir"/log/*.out "$dir"/log/*.log >&2; return 1; }
    done
    sleep 0.2
  done
  echo "slurm-cluster: $n nodes idle (SLURM_CONF=$SLURM_CONF)" >&2
}

stop() {
  local dir
  dir=$(cd "$1" 2>/dev/null && pwd) || return 0
  local conf=$dir/slurm.conf
  if [ -f "$conf" ] && [ -f "$dir/run/pids" ]; then
    export SLURM_CONF=$conf
    # Cancel the jobs first so that slurmd ends their steps itself; then whatever is left.
    local jobs
    jobs=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
    [ -n "$jobs" ] && timeout 10 scancel $jobs 2>/dev/null || true
    local until=$(( $(date +%s) + 20 ))
    while [ -n "$(timeout 5 squeue -h -o %i 2>/dev/null || true)" ] && [ "$(date +%s)" -lt "$until" ]; do sleep 0.2; done
    local pids
    pids=$(cat "$dir/run/pids")
    kill $pids 2>/dev/null || true
    wait_gone 10 $pids || kill -9 $pids 2>/dev/null || true
    pids=$(cluster_pids "$conf")
    if [ -n "$pids" ]; then
      kill $pids 2>/dev/null || true
      wait_gone 5 $pids || kill -9 $pids 2>/dev/null || true
    fi
    rm -f "$dir/run/pids"
  fi
  if [ -f "$dir/munge/munged.pid" ]; then
    local mp
    mp=$(cat "$dir/munge/munged.pid")
    kill "$mp" 2>/dev/null || true
    wait_gone 5 "$mp" || kill -9 "$mp" 2>/dev/null || true
    rm -f "$dir/munge/munged.pid"
  fi
}

case $cmd in
  start) [ $# -eq 2 ] || usage; start "$1" "$2" ;;
  stop) if [ $# -eq 2 ]; then stop "$2"; else stop "$1"; fi ;;
  *) usage ;;
esac
