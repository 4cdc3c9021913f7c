#include "launcher/scheduler.h"

#include <algorithm>

namespace verl::launcher {

PlaceResult place(const PlacementRequest& r, const std::vector<NodeSlots>& nodes) {
  std::vector<RankSlot> out;
  int taken = 0;
  const int need = r.gpus_per_node > 0 ? r.gpus_per_node : r.n_gpus_per_node;
  for (const auto& n : nodes) {
    if (taken == r.nnodes) break;
    std::vector<int> gpus;
    if (n.gpus > 0) {
      std::vector<int> offered = n.gpu_ids;
      if (offered.empty())
        for (int i = 0; i < n.gpus; ++i) offered.push_back(i);
      std::sort(offered.begin(), offered.end());
      for (int i : offered)
        if (!n.busy_gpus.count(i) && static_cast<int>(gpus.size()) < need) gpus.push_back(i);
      if (static_cast<int>(gpus.size()) < need) continue;
    } else if (n.busy_cpu_slots > 0) {
      continue;  // a CPU node's slots are the job's n_gpus_per_node: another job holds them
    } else if (n.cpu_slots > 0 && r.n_gpus_per_node > n.cpu_slots) {
      continue;  // declared CPUs: no more ranks than that
    }
    for (int local = 0; local < r.n_gpus_per_node; ++local) {
      RankSlot s;
      s.rank = taken * r.n_gpus_per_node + local;
      s.node = n.node;
      s.host = n.host;
      s.local_rank = local;
      if (n.gpus > 0 && !r.rank_gpu_positions.empty() && !r.rank_gpu_positions[static_cast<size_t>(local)].empty()) {
        s.device = "cuda:";
        for (size_t k = 0; k < r.rank_gpu_positions[static_cast<size_t>(local)].size(); ++k)
          s.device += (k ? "," : "") + std::to_string(gpus[static_cast<size_t>(r.rank_gpu_positions[static_cast<size_t>(local)][k])]);
        s.gpu = gpus[static_cast<size_t>(r.rank_gpu_positions[static_cast<size_t>(local)].front())];
      } else {
        s.gpu = n.gpus > 0 ? gpus[local] : -1;
        s.device = n.gpus > 0 ? "cuda:" + std::to_string(s.gpu) : "cpu";
      }
      out.push_back(s);
    }
    ++taken;
  }
  if (taken == r.nnodes) return {std::move(out), ""};
  return {{},
          "needs " + std::to_string(r.nnodes) + " node" + (r.nnodes == 1 ? "" : "s") + " with " + std::to_string(need) +
              " free slot" + (need == 1 ? "" : "s") + " each" +
              (need != r.n_gpus_per_node ? " (role placement: " + std::to_string(r.n_gpus_per_node) + " ranks on " +
                                               std::to_string(need) + " GPUs)"
                                         : std::string()) +
              "; " + std::to_string(taken) + " of " + std::to_string(nodes.size()) + " alive node" +
              (nodes.size() == 1 ? " has" : "s have") + " them"};
}

}  // namespace verl::launcher
