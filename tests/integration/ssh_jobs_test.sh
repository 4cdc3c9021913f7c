#!/usr/bin/env bash
# Jobs across a 4-host SSH cluster (real OpenSSH servers on 127.0.0.2-5, tests/integration/lib/
# ssh_hosts.sh) with the real trainer, one rank per host: submit -> SUCCEEDED, the four ranks'
# lines each prefixed with its rank and its own host, in the node's job directory over there;
# jobs / status JOB / logs through --address + --token-file as well as by name; rank 0 killed -9
# -> FAILED naming it, its host and the signal within the heartbeat timeout, the other
# three ranks stopped on their hosts; stop -> STOPPED with no rank left anywhere; the head killed
# -9 and restarted -> every job and its logs kept and the running job taken back; max_restarts=1
# with checkpoints on a directory every host shares -> restarted, resumed, SUCCEEDED; down leaves
# no process. Also: the dashboard in Chromium and GET /metrics show the four nodes and the jobs;
# cluster status shows the latest probe run per node. Every wait polls a condition.
set -u
source "$VERL_SOURCE_DIR/tests/integration/lib/ssh_hosts.sh"
source "$VERL_SOURCE_DIR/tests/integration/lib/jobs.sh"
source "$VERL_SOURCE_DIR/tests/integration/lib/dashboard.sh"
v=$VERLCTL
name=sshj
ssh_hosts_start verl_ssh_jobs 4
trap 'ssh_hosts_cleanup $name' EXIT
timeout_s=6
spec=$(ssh_hosts_spec $name $timeout_s)

# One rank per host, CPU slots, small batches, a short SFT warm start, no validation.
tiny="trainer.nnodes=4 trainer.n_gpus_per_node=1 trainer.sft_warmup_steps=2 trainer.val_before_train=false
  trainer.test_freq=-1 data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8
  critic.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
  critic.ppo_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.n=4"

# The trainer ranks of a job on a host: processes whose cwd is that node's job directory.
rank_pids() {  # rank_pids JOB [HOST]
  local p d
  for p in $(pgrep -f -- "$work/remote/bin/verlctl train" || true); do
    d=$(readlink /proc/$p/cwd 2>/dev/null) || continue
    case "$d" in "$work/remote/$name/nodes/"${2:-*}"/jobs/$1") echo "$p" ;; esac
  done
}

out=$("$v" up -f "$spec" --skip-preflight --timeout 120 2>&1)
rc=$?
check "up over 4 ssh hosts" '[ $rc -eq 0 ]' || { echo "$out" >&2; exit 1; }

check "status says no probes ran yet" '"$v" status --name $name | grep -q "^probes: none run yet"'

# 1. A 4-rank job, followed to its end.
out=$("$v" submit --name $name $tiny trainer.total_training_steps=3 2>"$work/submit.err"); rc=$?
serr=$(cat "$work/submit.err")
echo "$serr" | tail -6 >&2
check "submit waits and exits 0 (SUCCEEDED)" '[ $rc -eq 0 ] && grep -q "job-1 SUCCEEDED" <<<"$serr"' || { echo "$serr" >&2; exit 1; }
# The nodes are the spec's 127.0.0.x; their agents all report this machine's hostname as host.
for r in 0 1 2 3; do
  n=$(job_field job-1 "[p[\"node\"] for p in j[\"placement\"] if p[\"rank\"]==$r][0]")
  check "rank $r's lines carry its rank and host" 'grep -q "^\[rank $r $(hostname)\] " <<<"$out"'
  check "rank $r ran in node $n's job directory" '[ -s "$work/remote/$name/nodes/$n/jobs/job-1/logs/rank-$r.attempt-0.err" ]'
done
check "the four ranks ran on four nodes" '[ "$(job_field job-1 "\" \".join(sorted(p[\"node\"] for p in j[\"placement\"]))")" = "$hosts" ]'
check "status JOB has step 3/3 and the score" '"$v" status job-1 --name $name | grep -q "step:     3/3" && "$v" status job-1 --name $name | grep -q "critic/score/mean"'
check "logs --tail 0 -f on an ended job prints nothing" '[ -z "$("$v" logs job-1 --name $name --tail 0 -f 2>/dev/null)" ]'
check "rank 0's metrics reached the head" '[ "$(job_field job-1 "j[\"latest_metrics\"][\"step\"]")" = 3 ]'

# 2. The same cluster by address and token, as from another machine.
addr=127.0.0.1:$dash
check "jobs --address --token-file" '"$v" jobs --address $addr --token-file "$VERLCTL_HOME/$name/token" | grep -q "^job-1 .*SUCCEEDED"'
check "logs by VERLCTL_ADDRESS + VERLCTL_TOKEN" '[ "$(VERLCTL_ADDRESS=$addr VERLCTL_TOKEN=$(cat "$VERLCTL_HOME/$name/token") "$v" logs job-1 --rank 3 | grep -c "^\[rank 3 ")" -ge 1 ]'
check "cluster status by --address lists the four nodes alive" '[ "$("$v" status --address $addr --token-file "$VERLCTL_HOME/$name/token" | grep -cE "^127\.0\.0\.[2-5] +alive")" -eq 4 ]'
check "an explicit --name wins over VERLCTL_ADDRESS" 'VERLCTL_ADDRESS=127.0.0.1:1 VERLCTL_TOKEN=x "$v" jobs --name $name | grep -q "^job-1 "'
echo not-the-token >"$work/wrong_token"
werr=$("$v" jobs --address $addr --token-file "$work/wrong_token" 2>&1 >/dev/null); rc=$?
check "a wrong token is refused with exit 1, naming the token" '[ $rc -eq 1 ] && grep -qi "token" <<<"$werr"'

long="$tiny trainer.total_training_steps=400"
# 3. Rank 0 killed -9 mid-run: the others' collectives break and they exit with an error, and
# one of their agents may report before rank 0's; the failure must still name rank 0.
id=$("$v" submit --name $name --no-wait $long)
wait_for 120 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
victim_host=$(job_field $id "[p[\"node\"] for p in j[\"placement\"] if p[\"rank\"]==0][0]")
victim=$(rank_pids $id $victim_host)
check "$id runs a rank on every host" '[ "$(rank_pids $id | wc -l)" -eq 4 ] && [ -n "$victim" ]'
victim_rank=$(job_field $id "[p[\"rank\"] for p in j[\"placement\"] if p[\"node\"]==\"$victim_host\"][0]")
kill_rank $id "$victim"
check "the job FAILED within the heartbeat timeout" '[ "$(job_field $id "j[\"state\"]")" = FAILED ] && [ $fail_ms -lt $(( timeout_s * 1000 )) ]'
check "the failure names rank $victim_rank, node $victim_host and signal 9" 'grep -q "rank $victim_rank on .* ($victim_host)" <<<"$reason" && grep -q "killed by signal 9" <<<"$reason" && [ "$(job_field $id "j[\"failure\"][\"node\"]")" = $victim_host ]'
check "the failure carries the rank's last lines" '[ "$(job_field $id "len(j[\"failure\"][\"last_lines\"])")" -ge 1 ]'
wait_for 20 '[ -z "$(rank_pids $id)" ]'
check "the other three ranks were stopped on their hosts" '[ -z "$(rank_pids $id)" ]'

# 4. stop.
id=$("$v" submit --name $name --no-wait $long)
wait_for 120 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id runs four ranks" '[ "$(rank_pids $id | wc -l)" -eq 4 ]'
sout=$("$v" stop $id --name $name --grace 5); rc=$?
check "stop exits 0 and says STOPPED" '[ $rc -eq 0 ] && [ "$sout" = "$id STOPPED" ]'
check "no rank of $id is left on any host" '[ -z "$(rank_pids $id)" ]'

# 5. The head killed -9 while a job runs, then started again.
id=$("$v" submit --name $name --no-wait $tiny trainer.total_training_steps=40)
wait_for 120 '[ "$(job_field $id "j[\"step\"]")" -ge 1 ] 2>/dev/null'
check "$id still runs when its head is killed" '[ "$(job_field $id "j[\"state\"]")" = RUNNING ]'
lines_before=$("$v" logs job-1 --name $name | wc -l)
dir=$VERLCTL_HOME/$name
head_pid=$(python3 -c 'import json,sys; print([p["pid"] for p in json.load(open(sys.argv[1]))["processes"] if p["role"]=="head"][0])' "$dir/state.json")
kill -9 "$head_pid"
setsid "$v" head --state-dir "$dir" >>"$dir/logs/head.log" 2>&1 </dev/null &
wait_for 30 '"$v" jobs --name $name >/dev/null 2>&1'
check "the restarted head lists every job" '[ "$("$v" jobs --name $name -o json | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"jobs\"]))")" = 4 ]'
check "job-1's logs are all there" '[ "$("$v" logs job-1 --name $name | wc -l)" -eq "$lines_before" ]'
check "job-2's failure is there" 'job_field job-2 "j[\"failure\"][\"reason\"]" | grep -q "($victim_host)"'
rout=$("$v" logs $id -f --name $name 2>&1); rc=$?
check "the job running across the restart is taken back and SUCCEEDS" '[ "$(job_field $id "j[\"state\"]")" = SUCCEEDED ]'
check "logs -f followed every rank to the end" '[ $rc -eq 0 ] && [ "$(grep -o "^\[rank [0-3] " <<<"$rout" | sort -u | wc -l)" -eq 4 ]'

# 6. max_restarts=1 with checkpoints on a directory all hosts share: rank 0 of the next attempt
# resumes from what rank 0 of the first saved, wherever it is placed.
shared=$work/shared_ckpt
id=$("$v" submit --name $name --no-wait $tiny trainer.total_training_steps=8 trainer.save_freq=1 \
  trainer.max_restarts=1 trainer.default_local_dir=$shared)
wait_for 180 '[ -s "$shared/latest_checkpointed_iteration.txt" ] && [ "$(cat "$shared/latest_checkpointed_iteration.txt")" -ge 2 ]'
victim=$(rank_pids $id 127.0.0.3)
check "the rank on 127.0.0.3 runs after a checkpoint" '[ -n "$victim" ]'
kill -9 $victim
"$v" logs $id -f --name $name >/dev/null 2>&1
check "$id restarted once and SUCCEEDED" '[ "$(job_field $id "j[\"state\"]")" = SUCCEEDED ] && [ "$(job_field $id "j[\"restarts\"]")" = 1 ]'
node0=$(job_field $id "[p[\"node\"] for p in j[\"placement\"] if p[\"rank\"]==0][0]")
check "attempt 2's rank 0 (on $node0) resumed from the shared checkpoint" 'grep -q "resumed from $shared/global_step_" "$work/remote/$name/nodes/$node0/jobs/$id/logs/rank-0.attempt-1.err"'

# 7. The dashboard (Chromium) and GET /metrics see the four nodes and every job's state.
token=$(cat "$VERLCTL_HOME/$name/token")
dashboard_dump "http://127.0.0.1:$dash/dashboard?token=$token" "$work/page.html"
dashboard_state "$work/page.html" >"$work/state.json"
check "the dashboard shows the four nodes alive" 'python3 -c "import json; s=json.load(open(\"$work/state.json\")); n=s[\"nodes\"]; assert s[\"ok\"] and sorted(x[\"name\"] for x in n)==\"$hosts\".split() and all(x[\"state\"]==\"alive\" for x in n), s"'
for h in $hosts; do
  check "the dashboard has $h's row" 'grep -q "<tr data-node=\"$h\" data-state=\"alive\">" "$work/page.html"'
done
check "the dashboard lists job-2 FAILED and job-3 STOPPED" 'grep -q "data-job=\"job-2\" data-state=\"FAILED\"" "$work/page.html" && grep -q "data-job=\"job-3\" data-state=\"STOPPED\"" "$work/page.html"'
curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$dash/metrics" >"$work/metrics.txt"
for h in $hosts; do
  check "/metrics: $h alive" 'grep -q "^verl_node_state{.*node=\"$h\".*state=\"alive\".*} 1" "$work/metrics.txt"'
done
check "/metrics: job-1 SUCCEEDED, job-2 FAILED" 'grep -q "^verl_job_state{.*job=\"job-1\".*state=\"SUCCEEDED\".*} 1" "$work/metrics.txt" && grep -q "^verl_job_state{.*job=\"job-2\".*state=\"FAILED\".*} 1" "$work/metrics.txt"'

# 8. Cluster status names the probe results once there are some; a failed row is shown with
# its node and detail.
"$v" probe -f "$spec" --only shm >/dev/null 2>&1
"$v" probe -f "$spec" --only shm,disk probes.min_free_disk_gib=1000000 >/dev/null 2>&1
pst=$("$v" status --name $name)
check "status shows the latest probe run (job-7), not an older one" 'grep -q "^probes: job-7 SUCCEEDED" <<<"$pst"'
echo "$pst" | tail -12 >&2
for h in $hosts; do
  check "status counts $h's probe rows (shm passes, disk fails)" 'grep -qE "^$h +1 +0 +1 +0" <<<"$pst"'
  check "status shows $h's failed disk row with its detail" 'grep -qE "^$h +disk free +fail +.+" <<<"$pst"'
done
check "status -o json carries the probe rows" '[ "$("$v" status --name $name -o json | python3 -c "import json,sys; p=json.load(sys.stdin)[\"probes\"]; print(sum(r[\"status\"]==\"fail\" for r in p[\"rows\"]))")" = 4 ]'

out=$("$v" down --name $name 2>&1); rc=$?
check "down" '[ $rc -eq 0 ]'
left=$(pgrep -f -- "$work/remote\|$work/home" || true)
check "down leaves no agent, head or rank" '[ -z "$left" ]'
exit $failed
