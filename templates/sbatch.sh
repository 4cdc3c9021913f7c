#!/bin/bash
# The batch script of a verlctl cluster, rendered from templates/sbatch.sh by `verlctl up`
# (backend slurm) into the cluster's state directory and submitted with `sbatch --parsable`.
# Every value below is already quoted for the shell by verlctl. The state directory and the
# verlctl binary must be at the same paths on every node (a shared home or file system).
#
# The batch step runs on the first node of the allocation, the one `scontrol show hostnames`
# lists first: that is the head. It starts `verlctl head` there, writes the head's address
# for `verlctl up` (which waits for it), starts one agent per node with srun, and ends when the
# head ends (after `verlctl down` asked it to). scancel or the time limit ends every step: the
# head is this script's child and the agents are srun's tasks, so nothing is left behind.
#SBATCH --job-name={{job_name}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node=1
{{#gpus_per_node}}#SBATCH --gpus-per-node={{gpus_per_node}}
{{/gpus_per_node}}#SBATCH --cpus-per-task={{cpus_per_task}}
{{#partition}}#SBATCH --partition={{partition}}
{{/partition}}{{#account}}#SBATCH --account={{account}}
{{/account}}#SBATCH --time={{time}}
#SBATCH --output={{output}}
#SBATCH --error={{error}}
set -u

head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
# Agents dial the address slurm reaches the head node by (its NodeAddr), else its name.
head_addr=$(scontrol show node -o "$head_node" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
[ -n "$head_addr" ] || head_addr=$head_node
echo "verlctl: slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST; head on $head_node ($head_addr)"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT
trap 'exit 143' TERM INT

{{head_command}} >>{{head_log}} 2>&1 &
pids+=($!)
printf '%s\n' "$head_addr" >{{head_host_file}}.tmp && mv -f {{head_host_file}}.tmp {{head_host_file}}

# One agent per node. SLURM_NODEID (0 on the head node) gives the name node-<i> the head
# expects; %n in the log's name is the same index. An agent that dies leaves the others be.
export VERLCTL_HEAD_ADDRESS="$head_addr:{{dashboard_port}}"
srun --nodes={{nodes}} --ntasks-per-node=1 --kill-on-bad-exit=0 --open-mode=append --output={{agent_log}} \
  /bin/sh -c 'exec "$@" --head "$VERLCTL_HEAD_ADDRESS" --node "node-$SLURM_NODEID"' verlctl-agent \
  {{agent_command}} &
pids+=($!)

wait "${pids[0]}"
head_rc=$?
echo "verlctl: the head exited with code $head_rc"
# The agents leave when the head shuts down; the EXIT trap ends any that did not.
for _ in $(seq 100); do kill -0 "${pids[1]}" 2>/dev/null || break; sleep 0.1; done
exit "$head_rc"
