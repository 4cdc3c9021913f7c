#!/usr/bin/env bash
# The job preflight and scaling health on a 2-host SSH cluster (real OpenSSH servers on
# 127.0.0.2-3, tests/integration/lib/ssh_hosts.sh), each node with its own directory:
#  - a dataset present on node 0 but not on node 1 (relative to the job directory): submit exits 3 before any
#    rank starts, naming node 1 and the file; no rank log exists on either node;
#  - --skip-job-preflight starts the ranks of the same job anyway (they then fail in the trainer);
#  - a two-node CPU job passes the preflight on both nodes (event PREFLIGHT), succeeds, and
#    `status JOB -o json` has `scaling` with a communication share between 0 and 1 and verdicts;
#  - a node that declares more GPUs than it has (nodes[].resources) keeps up from finishing,
#    naming the node.
set -u
source "$VERL_SOURCE_DIR/tests/integration/lib/ssh_hosts.sh"
source "$VERL_SOURCE_DIR/tests/integration/lib/jobs.sh"
v=$VERLCTL
name=pflt
ssh_hosts_start verl_job_preflight 2
trap 'ssh_hosts_cleanup $name ${name}g' EXIT
spec=$(ssh_hosts_spec $name 6)
read -r h0 h1 <<<"$hosts"

out=$("$v" up -f "$spec" --skip-preflight --timeout 120 2>&1)
rc=$?
check "up over 2 ssh hosts" '[ $rc -eq 0 ]' || { echo "$out" >&2; exit 1; }

tiny="trainer.nnodes=2 trainer.n_gpus_per_node=1 trainer.val_before_train=false trainer.test_freq=-1
  data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 critic.ppo_mini_batch_size=8
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 critic.ppo_micro_batch_size_per_gpu=8
  actor_rollout_ref.rollout.n=4"
# Relative to the job directory (nodes/<host>/jobs/job-N), as the ranks resolve them; the data
# sits next to the jobs folder, since a job directory belongs to its job alone (an earlier,
# unowned one is moved aside when the job claims it).
files="data.train_files=../../data/train.jsonl data.val_files=../../data/val.jsonl"

# 1. The data is on node 0 only.
mkdir -p "$work/remote/$name/nodes/$h0/data"
for f in train val; do
  echo '{"prompt": [{"role": "user", "content": "1+2="}], "data_source": "openai/gsm8k", "reward_model": {"ground_truth": "3"}}' \
    >"$work/remote/$name/nodes/$h0/data/$f.jsonl"
done
"$v" submit --name $name $tiny $files trainer.total_training_steps=2 >/dev/null 2>"$work/submit1.err"
rc=$?
err=$(cat "$work/submit1.err")
echo "$err" | tail -8 >&2
check "submit exits 3 when the preflight fails" '[ $rc -eq 3 ]'
check "the error names node 1 and the missing file" 'grep -q "job preflight failed on $h1" <<<"$err" && grep -q "data/train.jsonl" <<<"$err"'
check "the failure names node 1, not node 0" '[ "$(job_field job-1 "j[\"failure\"][\"node\"]")" = "$h1" ]'
check "the failure lists the failed check with its key" '[ "$(job_field job-1 "j[\"failure\"][\"preflight\"][0][\"key\"]")" = data.train_files ]'
check "no rank started on either node" '! ls "$work/remote/$name/nodes/"*/jobs/job-1/logs/rank-* >/dev/null 2>&1'

# 2. --skip-job-preflight: the ranks start, and node 1's fails reading the data.
"$v" submit --name $name --skip-job-preflight $tiny $files trainer.total_training_steps=2 >/dev/null 2>"$work/submit2.err"
rc=$?
check "without the preflight the ranks start and the job fails in them" '[ $rc -eq 1 ] && ls "$work/remote/$name/nodes/$h1/jobs/job-2/logs/"rank-* >/dev/null 2>&1'

# 3. A two-node CPU job on the built-in task: preflight passed on both, then SUCCEEDED.
"$v" submit --name $name $tiny trainer.sft_warmup_steps=0 trainer.total_training_steps=3 >/dev/null 2>"$work/submit3.err"
rc=$?
tail -4 "$work/submit3.err" >&2
check "the 2-node job SUCCEEDED" '[ $rc -eq 0 ]' || cat "$work/submit3.err" >&2
check "event PREFLIGHT says it passed on both nodes" \
  '[ "$(job_field job-3 "[e[\"detail\"] for e in j[\"events\"] if e[\"state\"]==\"PREFLIGHT\"][0].split(\" (\")[0]")" = "passed on $h0, $h1" ]'
# In job-3, not job-1: there node 1's failure may end the job before node 0's preflight has run
# (the head then never orders it, or stops it), so job-1's node-0 log may rightly be missing.
check "node 0's preflight ran in its job directory" '[ -s "$work/remote/$name/nodes/$h0/jobs/job-3/logs/preflight-$h0.attempt-0.out" ]'
share=$(job_field job-3 'j["scaling"]["comm_share"]')
echo "scaling: $(job_field job-3 'j["scaling"]')" >&2
check "scaling has a communication share between 0 and 1" 'python3 -c "import sys; s=float(sys.argv[1]); sys.exit(0 if 0 < s < 1 else 1)" "$share"'
check "the comm share has a verdict" '[[ "$(job_field job-3 "[c[\"status\"] for c in j[\"scaling\"][\"checks\"] if c[\"name\"]==\"comm_share\"][0]")" =~ ^(pass|warn)$ ]]'
check "GPU checks are skipped on CPU ranks, with a reason" '[ "$(job_field job-3 "[c[\"status\"] for c in j[\"scaling\"][\"checks\"] if c[\"name\"]==\"gpu_util\"][0]")" = skip ]'
check "tokens/s per rank is there" 'python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$(job_field job-3 "j[\"scaling\"][\"tokens_per_s_per_rank\"]")"'
check "status JOB shows the scaling rows" '"$v" status job-3 --name $name | grep -qE "^    (pass|warn)  comm_share"'
"$v" down --name $name --timeout 10 >/dev/null 2>&1

# 4. Declared resources: 127.0.0.3 declares a GPU it does not have; up fails naming it.
sed "s/  - {host: $h1}/  - {host: $h1, resources: {gpus: 1}}/; s/^name: $name/name: ${name}g/" "$spec" >"$work/gpus.yaml"
out=$("$v" up -f "$work/gpus.yaml" --skip-preflight --timeout 60 2>&1)
rc=$?
# Over SSH up shows the last line of the node's agent log: the hint, which repeats the facts.
check "up fails when a node declares GPUs it lacks, naming it" '[ $rc -ne 0 ] && grep -q "$h1 (nodes\[1\].resources) declares 1 GPUs: declare at most 0" <<<"$out"' || echo "$out" >&2

exit $failed
