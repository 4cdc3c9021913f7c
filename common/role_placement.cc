#include "common/role_placement.h"

#include <algorithm>
#include <set>

#include "common/error.h"

namespace verl {
namespace {

const char* const kHint =
    "auto | cpu | cuda | cuda:N | cuda:A,B,... with one GPU per local rank (trainer.n_gpus_per_node entries)";

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

bool parse_role_device(const std::string& key, const std::string& spec, std::vector<int>* gpus, std::string* why) {
  gpus->clear();
  if (spec == "auto" || spec == "cpu" || spec == "cuda") return true;
  if (spec.rfind("cuda:", 0) != 0 || spec.size() == 5) {
    *why = key + " is '" + spec + "', not a device";
    return false;
  }
  size_t at = 5;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos) {
      *why = key + " is '" + spec + "': '" + item + "' is not a GPU number";
      return false;
    }
    const int g = std::stoi(item);
    if (std::find(gpus->begin(), gpus->end(), g) != gpus->end()) {
      *why = key + " is '" + spec + "': GPU " + item + " is listed twice (each local rank takes its own)";
      return false;
    }
    gpus->push_back(g);
    at = comma + 1;
  }
  return true;
}

int role_gpu(const std::string& key, const std::string& spec, int local_rank, int ranks_per_node) {
  std::vector<int> gpus;
  std::string why;
  if (!parse_role_device(key, spec, &gpus, &why)) throw Error{ExitCode::kInvalidConfig, why, kHint};
  if (gpus.empty()) return -1;
  if (gpus.size() == 1) return gpus[0];
  if (static_cast<int>(gpus.size()) != ranks_per_node || local_rank < 0 || local_rank >= ranks_per_node) {
    throw Error{ExitCode::kInvalidConfig,
                key + " is '" + spec + "': " + std::to_string(gpus.size()) + " GPUs for " +
                    std::to_string(ranks_per_node) + " ranks per node (trainer.n_gpus_per_node)",
                "list one GPU per local rank"};
  }
  return gpus[static_cast<size_t>(local_rank)];
}

RolePlacement role_placement(const config::Json& job, int ranks_per_node) {
  RolePlacement p;
  auto value = [&](const char* path) {
    const config::Json* v = config::find(job, path);
    return v && v->is_string() ? v->get<std::string>() : std::string("auto");
  };
  const config::Json* est = config::find(job, "algorithm.adv_estimator");
  const bool critic = !est || !est->is_string() || est->get<std::string>() == "gae";
  struct Key { const char* role; const char* path; bool present; };
  const Key keys[] = {{"actor", "actor_rollout_ref.actor.device", true},
                      {"rollout", "actor_rollout_ref.rollout.device", true},
                      {"ref", "actor_rollout_ref.ref.device", true},
                      {"critic", "critic.device", critic}};
  p.rank_gpus.assign(static_cast<size_t>(std::max(0, ranks_per_node)), {});
  std::vector<std::set<int>> used(p.rank_gpus.size());
  for (const auto& k : keys) {
    if (!k.present) continue;
    RoleDevice r{k.role, k.path, value(k.path), {}};
    for (int local = 0; local < ranks_per_node; ++local) {
      const int g = role_gpu(k.path, r.spec, local, ranks_per_node);
      if (g >= 0) {
        used[static_cast<size_t>(local)].insert(g);
        p.named = true;
      } else if (r.spec != "cpu") {
        used[static_cast<size_t>(local)].insert(local);  // the rank's own GPU
      }
    }
    std::string why;
    parse_role_device(k.path, r.spec, &r.gpus, &why);
    p.roles.push_back(std::move(r));
  }
  p.gpus_per_node = ranks_per_node;
  std::set<int> all;
  for (size_t i = 0; i < used.size(); ++i) {
    p.rank_gpus[i].assign(used[i].begin(), used[i].end());
    all.insert(used[i].begin(), used[i].end());
  }
  if (p.named && !all.empty()) {
    // A rank sees the job's GPUs 0 .. max (CUDA_VISIBLE_DEVICES): one that no role uses would
    // be reserved for nothing and shift the numbers after it.
    for (int g = 0; g <= *all.rbegin(); ++g) {
      if (!all.count(g))
        throw Error{ExitCode::kInvalidConfig,
                    "the roles' devices use GPUs up to " + std::to_string(*all.rbegin()) + " but none uses GPU " +
                        std::to_string(g) + " (actor_rollout_ref.actor.device, actor_rollout_ref.rollout.device, "
                        "actor_rollout_ref.ref.device, critic.device)",
                    "number the GPUs the roles use from 0 without gaps: they are the job's GPUs on each node"};
    }
    p.gpus_per_node = std::max(p.gpus_per_node, *all.rbegin() + 1);
  }
  return p;
}

std::string RolePlacement::summary() const {
  if (!named) return "";
  std::vector<std::pair<std::string, std::string>> groups;  // spec -> roles
  for (const auto& r : roles) {
    const std::string spec = r.gpus.empty() ? "own GPU" : "cuda:" + join(r.gpus);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == spec; });
    if (it == groups.end()) groups.emplace_back(spec, r.role);
    else it->second += ", " + r.role;
  }
  std::string s;
  for (const auto& [spec, roles] : groups) s += (s.empty() ? "" : "; ") + roles + ": " + spec;
  return s;
}

std::string tensor_parallel_span_warning(long long tp, long long nodes, long long per_node) {
  if (tp <= 1 || nodes <= 1 || per_node <= 0 || per_node % tp == 0) return "";
  return "tensor_model_parallel_size=" + std::to_string(tp) + " with trainer.n_gpus_per_node=" + std::to_string(per_node) +
         ": some tensor-parallel groups span two nodes, and every decode step waits on the network between them";
}

}  // namespace verl
