// Placement of a job's ranks on nodes: a pure function, so that it is tested without a head.
//
// A node offers slots: one per GPU, or, on a node without GPUs, n_gpus_per_node CPU slots of the
// job being placed (a CPU node runs as many ranks as the job asks for per node). A slot runs
// one rank at a time. A trainer job needs nnodes distinct alive nodes with n_gpus_per_node free
// slots each; ranks are numbered node by node (rank = node_index * n_gpus_per_node + local_rank),
// nodes taken in the order given (the spec's, job_controller.cc). A GPU rank gets the lowest free GPU
// index of its node among those it offers (gpu_ids: the cluster spec's nodes[].resources.gpu_ids,
// else 0 .. gpus-1). A CPU node with cpu_slots (declared resources.cpus) takes a job only when
// n_gpus_per_node fits in them.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace verl::launcher {

struct NodeSlots {
  std::string node;
  std::string host;
  int gpus = 0;              // 0: a CPU node
  std::set<int> busy_gpus;   // GPU indices in use by other jobs' ranks
  int busy_cpu_slots = 0;    // CPU ranks of other jobs running here
  std::vector<int> gpu_ids;  // the GPU indices offered; empty: 0 .. gpus-1
  int cpu_slots = 0;         // a CPU node's declared CPUs; 0: as many ranks as the job asks
};

struct RankSlot {
  int rank = 0;
  std::string node, host;
  int local_rank = 0;
  std::string device;  // cpu | cuda:<index>[,<index>...] (several under role placement)
  int gpu = -1;        // the GPU index, -1 on a CPU node
};

struct PlacementRequest {
  int nnodes = 1;
  int n_gpus_per_node = 1;  // ranks per node
  // Role placement (common/role_placement.h): GPUs reserved per GPU node (0: one per rank) and,
  // per local rank, the positions among them that the rank uses (empty: rank i uses position i).
  int gpus_per_node = 0;
  std::vector<std::vector<int>> rank_gpu_positions;
};

// place's answer: the job's ranks, or why the nodes cannot take it now.
struct PlaceResult {
  std::vector<RankSlot> ranks;  // in rank order
  std::string why;              // empty when it fits; else "needs 2 nodes with 1 free slot each; 1 of 1 alive node has them"
  bool placed() const { return why.empty(); }
};

// The ranks of a placement on nodes, in their order, or why there is none now.
PlaceResult place(const PlacementRequest& request, const std::vector<NodeSlots>& nodes);

}  // namespace verl::launcher
