#include "launcher/rank_env.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace verl::launcher {

RankEnv rank_env(const Placement& p, const std::vector<Placement>& attempt, const std::string& master_addr,
                 int master_port) {
  RankEnv e;
  e.rank = p.rank;
  e.local_rank = p.local_rank;
  e.master_addr = master_addr;
  e.master_port = master_port;
  e.world_size = static_cast<int>(attempt.size());
  e.local_world_size = 0;
  // Nodes in the order of their lowest rank (node 0 holds rank 0, torchrun's node rank): the
  // nodes with a rank below this node's lowest come before it.
  int lowest = p.rank;
  for (const auto& q : attempt)
    if (q.node == p.node) lowest = std::min(lowest, q.rank);
  std::set<std::string> before;
  for (const auto& q : attempt)
    if (q.rank < lowest) before.insert(q.node);
  e.group_rank = static_cast<int>(before.size());
  // The node's GPUs of the job, ascending and each once (under role placement ranks share them).
  std::set<int> gpus;
  for (const auto& q : attempt) {
    if (q.node != p.node) continue;
    ++e.local_world_size;
    for (int g : device_gpus(q.device)) gpus.insert(g);
  }
  for (int g : gpus) e.visible_devices += (e.visible_devices.empty() ? "" : ",") + std::to_string(g);
  return e;
}

std::vector<std::string> torchrun_vars(const RankEnv& e) {
  std::vector<std::string> v = {"RANK=" + std::to_string(e.rank),
                                "LOCAL_RANK=" + std::to_string(e.local_rank),
                                "WORLD_SIZE=" + std::to_string(e.world_size),
                                "LOCAL_WORLD_SIZE=" + std::to_string(e.local_world_size),
                                "GROUP_RANK=" + std::to_string(e.group_rank),
                                "MASTER_ADDR=" + e.master_addr,
                                "MASTER_PORT=" + std::to_string(e.master_port)};
  if (!e.visible_devices.empty()) v.push_back("CUDA_VISIBLE_DEVICES=" + e.visible_devices);
  return v;
}

std::vector<int> device_gpus(const std::string& device) {
  std::vector<int> out;
  if (device.rfind("cuda:", 0) != 0) return out;
  std::stringstream list(device.substr(5));
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

int device_cpu_slots(const std::string& device) {
  if (device == "cpu") return 1;
  if (device.rfind("cpu:", 0) == 0) return std::stoi(device.substr(4));
  return 0;
}

std::vector<Placement> one_rank_per_node(const std::vector<Placement>& per_slot) {
  std::vector<Placement> out;
  for (const auto& p : per_slot) {
    Placement* mine = nullptr;
    for (auto& q : out)
      if (q.node == p.node) mine = &q;
    if (!mine) {
      out.push_back(p);
      out.back().rank = static_cast<int>(out.size()) - 1;
      out.back().local_rank = 0;
      out.back().device = p.device.rfind("cuda:", 0) == 0 ? p.device : "cpu:" + std::to_string(device_cpu_slots(p.device));
      continue;
    }
    if (p.device.rfind("cuda:", 0) == 0) mine->device += "," + p.device.substr(5);
    else mine->device = "cpu:" + std::to_string(device_cpu_slots(mine->device) + device_cpu_slots(p.device));
  }
  // A lone CPU slot stays "cpu", the device a train job's rank has.
  for (auto& q : out)
    if (q.device == "cpu:1") q.device = "cpu";
  return out;
}

}  // namespace verl::launcher
