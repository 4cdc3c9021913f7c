// The environment torchrun gives each process it starts, computed for one placed rank of a job:
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the node's index among the job's
// nodes, torchrun's node rank), MASTER_ADDR, MASTER_PORT, and CUDA_VISIBLE_DEVICES (the job's
// GPUs on the rank's node: LOCAL_RANK i is cuda:i of them, as under torchrun). Train and command
// jobs get the same values (job_controller.cc); a command job is a train job with another argv.
//
// Placements (job_store.h) hold a device per rank: "cuda:<i>" or "cpu" for one slot, and, for a
// rank that holds a node's slots together (ranks_per_node 1), "cuda:<i>,<j>,..." or "cpu:<n>".
// device_gpus() / device_cpu_slots() read them back for the scheduler's accounting.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "launcher/job_store.h"

namespace verl::launcher {

struct RankEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  int group_rank = 0;
  std::string master_addr;
  int master_port = 0;
  std::string visible_devices;  // "0,1"; empty: no GPU (the variable is then not set)
};

// p's values among its attempt's placements (any order), on the rendezvous addr:port.
RankEnv rank_env(const Placement& p, const std::vector<Placement>& attempt, const std::string& master_addr,
                 int master_port);
// NAME=value entries, in the order above.
std::vector<std::string> torchrun_vars(const RankEnv& e);

std::vector<int> device_gpus(const std::string& device);  // "cuda:0,1" -> {0, 1}; cpu -> {}
int device_cpu_slots(const std::string& device);          // "cpu" -> 1, "cpu:4" -> 4; cuda -> 0

// One rank per node out of a placement of one rank per slot (in rank order, each node's ranks
// together, as scheduler.h places them): the node's local_rank 0 keeps its node, ranks are
// numbered again by node, and its device holds every slot the node had.
std::vector<Placement> one_rank_per_node(const std::vector<Placement>& per_slot);

}  // namespace verl::launcher
