// Role placement: which GPUs of a node each role of a training job uses (verl's resource pools;
// the seed's device-mapping example: actor and reference on cuda:0-3, rollout and critic on
// cuda:4-7). Each role's device key (actor_rollout_ref.actor.device, actor_rollout_ref.rollout.device,
// actor_rollout_ref.ref.device, critic.device) is one of
//   auto | cpu | cuda      the rank's own device (trainer.device's rule: cuda = GPU LOCAL_RANK)
//   cuda:N                 GPU N for every rank of the node
//   cuda:A,B,C,...         one GPU per local rank: local rank i uses the i-th (as many entries as
//                          trainer.n_gpus_per_node; the hybrid default is every role on the
//                          rank's own GPU)
// GPU number N is the job's N-th GPU on the node: the head reserves GPUs 0 .. max(N) of the job
// on each node (max(N) + 1 free GPUs, at least n_gpus_per_node), gives each rank the GPUs its
// roles use, and CUDA_VISIBLE_DEVICES lists the reserved ones in order, so number N is the
// rank's cuda:N (run without the head, it is the machine's cuda:N). `status JOB` shows the mapping.
// Torch-free: the launcher and the trainer both read it.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace verl {

struct RoleDevice {
  std::string role;  // actor, rollout, ref, critic
  std::string key;   // its device key path
  std::string spec;  // the key's value
  std::vector<int> gpus;  // cuda:N or a list: the GPU of each local rank (one entry: every rank); empty otherwise
};

struct RolePlacement {
  std::vector<RoleDevice> roles;       // in the order above; the critic only when the job has one
  int gpus_per_node = 0;               // GPUs reserved per node: max(largest number + 1, ranks per node)
  std::vector<std::vector<int>> rank_gpus;  // per local rank: the sorted GPU numbers its roles use
  bool named = false;                  // some role names GPUs (else each rank uses its own)
  // "actor, ref: cuda:0,1,2,3; rollout, critic: cuda:4,5,6,7" (roles sharing a spec joined);
  // empty when no role names GPUs.
  std::string summary() const;
};

// Parses one role device value; on error returns a message (naming `key`) in *why.
bool parse_role_device(const std::string& key, const std::string& spec, std::vector<int>* gpus, std::string* why);

// The placement of a resolved job config over `ranks_per_node` ranks. Throws verl::Error
// kInvalidConfig naming the key for a malformed value or a list whose length is not
// ranks_per_node.
RolePlacement role_placement(const config::Json& job, int ranks_per_node);

// The GPU a role's device value gives local rank `local_rank`: -1 when the value names none
// (auto, cpu, cuda). Throws verl::Error kInvalidConfig naming `key` as above.
int role_gpu(const std::string& key, const std::string& spec, int local_rank, int ranks_per_node);

// Tensor-parallel rollout groups are consecutive ranks (trainer/tensor_parallel.h): with more
// than one node of per_node ranks, some group spans two nodes when tp does not divide per_node.
// The warning that says so (config lint and the trainer's start-up both give it), or "".
std::string tensor_parallel_span_warning(long long tp, long long nodes, long long per_node);

}  // namespace verl
