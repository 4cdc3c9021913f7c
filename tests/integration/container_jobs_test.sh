#!/usr/bin/env bash
# Jobs in a real container engine: a local cluster with container.runtime=podman runs its
# preflight probes and a trainer rank inside podman containers. up --dry-run shows the run line
# per node (the embedded template, and a site's override); the probes see the container's
# /dev/shm (--shm-size); a short job SUCCEEDS; while a job runs its rank is in a container of
# the expected name, in a PID namespace of its own; a command job (submit -- CMD) runs in one too; stop -> STOPPED with no container and no
# rank left; an agent killed -9 takes its containers with it (its client gets SIGTERM, which
# podman passes in); down leaves no process and no container; a rank that ignores SIGTERM is
# killed with its container once the stop's grace is over.
#
# The engine is rootful podman with a storage, a runtime directory and a config of this test's
# own (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF), so it runs beside anything else on the host:
# runc (crun refuses a hybrid cgroup hierarchy), cgroupfs (no systemd), vfs storage, events in a
# file. The image is made here without any registry: `podman import` of a tarball that holds
# only merged-/usr symlinks; the host's /usr and /etc are mounted read-only, and verlctl's build
# directory at its own path, so the verlctl that agents run exists inside.
#
# This host (a VM sandbox) refuses to raise any hard rlimit, even for root, so the embedded
# run line's --ulimit memlock=-1 cannot start a container here. The test overrides the podman
# template the way a site would (VERLCTL_TEMPLATE_DIR): the same file with the host's own
# limits in place of memlock=-1.
set -u
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/ports.sh"
v=${VERLCTL:?}
src=${VERL_SOURCE_DIR:?}
source "${VERL_SOURCE_DIR:?}/tests/integration/lib/check.sh"

command -v podman >/dev/null && command -v runc >/dev/null && command -v catatonit >/dev/null || {
  echo "FAIL: podman, runc and catatonit are needed: scripts/setup installs them" >&2
  exit 1
}

tmp=$(mktemp -d)
export VERLCTL_HOME=$tmp/home
name=ctr$$
dir=$VERLCTL_HOME/$name
mkdir -p "$VERLCTL_HOME" "$tmp/templates/container"

export CONTAINERS_CONF=$tmp/containers.conf CONTAINERS_STORAGE_CONF=$tmp/storage.conf
cat >"$CONTAINERS_CONF" <<EOF
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "vfs"
graphroot = "$tmp/storage"
runroot = "$tmp/run"
EOF

cleanup() {
  "$v" down --name "ctr$$" --timeout 0 >/dev/null 2>&1
  "$v" down --name "ctrdeaf$$" --timeout 0 >/dev/null 2>&1
  podman rm -af -t 0 >/dev/null 2>&1
  podman rmi -af >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

# The image: nothing but the merged-/usr symlinks and a /tmp.
mkdir -p "$tmp/rootfs/usr" "$tmp/rootfs/etc" "$tmp/rootfs/tmp"
chmod 1777 "$tmp/rootfs/tmp"
for l in bin lib lib64 sbin; do ln -s usr/$l "$tmp/rootfs/$l"; done
tar -C "$tmp/rootfs" -cf "$tmp/image.tar" .
image=localhost/verlctl-test:$$
podman import -q "$tmp/image.tar" "$image" >/dev/null
check "podman imports the test image" 'podman image exists "$image"'

# The site template: the embedded podman.argv with this host's hard limits for memlock (raising
# it is refused here) and for nofile and nproc (podman's defaults are above them; its conmon
# runs with RLIMIT_NPROC 32768, which the container cannot exceed).
python3 - "$src/templates/container/podman.argv" "$tmp/templates/container/podman.argv" <<'EOF'
import resource, sys
def hard(r, cap=None):
    h = resource.getrlimit(r)[1]
    if h == resource.RLIM_INFINITY: return "-1" if cap is None else str(cap)
    return str(h if cap is None else min(h, cap))
text = open(sys.argv[1]).read()
assert "\nmemlock=-1\n" in text, "the embedded template has no memlock=-1 line"
site = ("# site: this host refuses to raise hard rlimits: keep its own\nmemlock=%s\n--ulimit\nnofile=%s\n"
        "--ulimit\nnproc=%s\n") % (hard(resource.RLIMIT_MEMLOCK), hard(resource.RLIMIT_NOFILE),
                                   hard(resource.RLIMIT_NPROC, 32768))
open(sys.argv[2], "w").write(text.replace("\nmemlock=-1\n", "\n" + site))
EOF

read -r port store < <(free_ports 2)
build=$(dirname "$(readlink -f "$v")")
spec=(head.dashboard_port=$port head.store_port=$store head.heartbeat_interval_s=0.3 head.heartbeat_timeout_s=4
      container.runtime=podman container.image=$image container.shm_size=3g
      "container.mounts=[\"/usr:/usr:ro\",\"/etc:/etc:ro\",\"$build:$build:ro\"]")

# 1. --dry-run: the run line per node, from the embedded template, then from the site's.
dry=$("$v" up --local 2 --name "$name" "${spec[@]}" --dry-run 2>&1); rc=$?
echo "$dry" | grep -A2 "^# ranks on node-0" >&2
line0=$(grep -A2 "^# ranks on node-0 run in a podman container" <<<"$dry" | tail -1)
check "dry-run exits 0 and shows a run line per node" '[ $rc -eq 0 ] && [ "$(grep -c "^podman run " <<<"$dry")" -eq 2 ]'
check "the line has the issue's flags and the spec's settings" 'grep -q -- "^podman run --rm --init --name verlctl-$name-job-N-0-0 --network host --shm-size 3g --ulimit memlock=-1 -v /usr:/usr:ro -v /etc:/etc:ro -v $build:$build:ro -v $dir/jobs/job-N:$dir/jobs/job-N -w $dir/jobs/job-N " <<<"$line0" && grep -q -- " $image $build/verlctl train -f job.yaml --rank 0\$" <<<"$line0"'
check "dry-run starts nothing" '[ ! -e "$dir/state.json" ]'
export VERLCTL_TEMPLATE_DIR=$tmp/templates
check "dry-run shows the site's template" '"$v" up --local 1 --name "$name" "${spec[@]}" --dry-run 2>&1 | grep -q -- "--ulimit memlock=[0-9-]* --ulimit nofile="'
bad=$("$v" up --local 1 --name "$name" "${spec[@]}" container.shm_size=lots --dry-run 2>&1); rc=$?
check "a bad container setting is exit 3 naming the key" '[ $rc -eq 3 ] && grep -q "container.shm_size" <<<"$bad"'

# 2. up with its preflight: the probes run in containers and see their /dev/shm (3 GiB).
out=$("$v" up --local 1 --name "$name" "${spec[@]}" --timeout 60 2>&1); rc=$?
echo "$out" | grep -E "^node-0 +(shm|disk|report)" >&2
check "up and its preflight pass" '[ $rc -eq 0 ]' || { echo "$out" >&2; "$v" logs job-1 --name "$name" >&2; exit 1; }
check "the shm probe saw the container's --shm-size 3g" 'grep -qE "^node-0 +shm +size \[GiB\] +3 " <<<"$out"'
check "the probe's log shows the podman run line" '"$v" logs job-1 --name "$name" | grep -q "verlctl agent: job-1/0/0 .*: podman run --rm --init --name verlctl-$name-job-1-0-0 "'

tiny="trainer.nnodes=1 trainer.n_gpus_per_node=1 trainer.sft_warmup_steps=2 trainer.val_before_train=false
  trainer.test_freq=-1 data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8
  critic.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
  critic.ppo_micro_batch_size_per_gpu=16 actor_rollout_ref.rollout.n=4"
job_field() {  # job_field JOB python-expression-over-j
  "$v" status "$1" --name "$name" -o json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print($2)" 2>/dev/null
}
wait_for() {  # wait_for SECONDS 'condition'
  local until=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$until" ]; do eval "$2" && return 0; sleep 0.2; done
  eval "$2"
}
containers() { podman ps -a --format '{{.Names}}'; }
# Live (not zombie) verlctl processes that run a rank of this cluster's jobs, seen from the
# host (the podman client's command line names the rank too: its comm is podman).
rank_pids() {
  local p
  for p in $(pgrep -f -- "train -f job.yaml" || true); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = verlctl ] || continue
    case "$(readlink /proc/$p/cwd 2>/dev/null)" in "$dir"/*) [ "$(ps -o stat= -p "$p" | cut -c1)" = Z ] || echo "$p" ;; esac
  done
}

# 3. A short job in a container: SUCCEEDED, its files in the job directory on the host.
serr=$("$v" submit --name "$name" $tiny trainer.total_training_steps=3 2>&1 >/dev/null); rc=$?
echo "$serr" | tail -3 >&2
check "a job in a container SUCCEEDS" '[ $rc -eq 0 ] && grep -q "job-2 SUCCEEDED" <<<"$serr"'
check "its metrics are on the host, through the mount" '[ "$(wc -l <"$dir/jobs/job-2/checkpoints/verlctl/default/metrics.jsonl")" -ge 3 ]'
check "its container is gone" '[ -z "$(containers)" ]'

# 3b. A command job (submit -- CMD) runs in the container as well, in its --working-dir copy.
mkdir -p "$tmp/cmdsrc"
echo 'import os; print("inside", os.getcwd(), open("/proc/1/comm").read().strip(), "rank", os.environ["RANK"])' >"$tmp/cmdsrc/where.py"
cout=$("$v" submit --name "$name" --working-dir "$tmp/cmdsrc" -- /usr/bin/python3 where.py 2>&1); rc=$?
check "a command job runs in the container (PID 1 its init), in the working directory's copy" \
  '[ $rc -eq 0 ] && grep -qE "inside $dir/jobs/job-3/work (podman-init|catatonit) rank 0\$" <<<"$cout"'
check "its container is gone" '[ -z "$(containers)" ]'

# 4. A running job: in its container, in a PID namespace of its own; stop ends both.
id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=400)
wait_for 90 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id runs in container verlctl-$name-$id-0-0" '[ "$(containers)" = "verlctl-$name-$id-0-0" ]'
rank=$(rank_pids | head -1)
check "its rank (pid ${rank:-none}) is in the container's PID namespace, not the host's" '[ -n "$rank" ] && [ "$(readlink /proc/$rank/ns/pid)" != "$(readlink /proc/self/ns/pid)" ] && [ "$(readlink /proc/$rank/ns/pid)" = "$(readlink /proc/$(podman inspect --format "{{.State.Pid}}" "verlctl-$name-$id-0-0")/ns/pid)" ]'
check "it sees its variables inside" 'tr "\0" "\n" </proc/$rank/environ | grep -qx "VERLCTL_JOB=$id" && tr "\0" "\n" </proc/$rank/environ | grep -qx "NCCL_SOCKET_IFNAME==lo"'
check "their values are not on the podman command line" 'grep -q -- " -e VERLCTL_JOB " "$dir/jobs/$id/logs/rank-0.attempt-0.err" && ! grep -q "VERLCTL_JOB=" "$dir/jobs/$id/logs/rank-0.attempt-0.err"'
sout=$("$v" stop $id --name "$name" --grace 5); rc=$?
check "stop says STOPPED" '[ $rc -eq 0 ] && [ "$sout" = "$id STOPPED" ]'
wait_for 10 '[ -z "$(containers)" ]'
check "stop leaves no container" '[ -z "$(containers)" ]'
check "stop leaves no rank" '[ -z "$(rank_pids)" ]'

# 5. The agent killed -9 while a rank runs: its podman client gets SIGTERM (PR_SET_PDEATHSIG),
# passes it into the container, and the rank and its container end.
id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=400)
wait_for 90 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id runs in its container" '[ "$(containers)" = "verlctl-$name-$id-0-0" ]'
agent=$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p["role"]=="agent"][0])' "$dir/state.json")
kill -9 "$agent"
wait_for 20 '[ -z "$(containers)" ] && [ -z "$(rank_pids)" ]'
check "an agent killed -9 leaves no container" '[ -z "$(containers)" ]'
check "an agent killed -9 leaves no rank" '[ -z "$(rank_pids)" ]'

# 6. down: nothing of the cluster is left.
"$v" down --name "$name" >/dev/null 2>&1
check "down leaves no verlctl process of the cluster" '[ -z "$(pgrep -f -- "$dir" || true)" ]'
check "down leaves no container" '[ -z "$(containers)" ]'

# 7. A rank that ignores SIGTERM: a second cluster whose template runs every task under a shell
# that ignores it (the rank inherits that). The stop outlives its grace; SIGKILL to the podman
# client would not reach the container, so the agent kills the container by name first
# (templates/container/podman-kill.argv): nothing is left.
mkdir -p "$tmp/deaf/container"
python3 - "$tmp/templates/container/podman.argv" "$tmp/deaf/container/podman.argv" <<'PY'
import sys
text = open(sys.argv[1]).read()
inner = "{{#inner}}\n{{.}}\n{{/inner}}\n"
assert text.endswith(inner), "the podman template does not end with the inner command"
open(sys.argv[2], "w").write(text[: -len(inner)] + "/usr/bin/sh\n-c\ntrap '' TERM; \"$@\"\nsh\n" + inner)
PY
name=ctrdeaf$$
dir=$VERLCTL_HOME/$name
out=$(VERLCTL_TEMPLATE_DIR=$tmp/deaf "$v" up --local 1 --name "$name" "${spec[@]}" --skip-preflight --timeout 60 2>&1); rc=$?
check "up of the deaf cluster" '[ $rc -eq 0 ]' || echo "$out" >&2
id=$("$v" submit --name "$name" --no-wait $tiny trainer.total_training_steps=400)
wait_for 90 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id runs in its container" '[ "$(containers)" = "verlctl-$name-$id-0-0" ]'
sout=$("$v" stop $id --name "$name" --grace 1); rc=$?
check "stop says STOPPED" '[ $rc -eq 0 ] && [ "$sout" = "$id STOPPED" ]'
check "the rank ignored SIGTERM: the agent used SIGKILL" 'grep -q "task $id/0/0 did not end within its grace: SIGKILL" "$dir/logs/agent-0.log"'
wait_for 10 '[ -z "$(containers)" ]'
check "the container was killed by name: none is left" '[ -z "$(containers)" ]'
check "no rank is left" '[ -z "$(rank_pids)" ]'
"$v" down --name "$name" >/dev/null 2>&1
check "down leaves no verlctl process of the cluster" '[ -z "$(pgrep -f -- "$dir" || true)" ]'
exit $failed
