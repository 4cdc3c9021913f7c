#include "trainer/fsdp.h"

#include <torch/version.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "trainer/checkpoint.h"
#include "trainer/distributed.h"
#include "trainer/minibatch_update.h"
#include "trainer/model.h"
#include "trainer/storage_resize.h"

namespace verl::trainer {
namespace fs = std::filesystem;
namespace {

// torch::optim's state map key of a parameter: the TensorImpl's address (a string before 2.0).
#if TORCH_VERSION_MAJOR >= 2
void* state_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }
#else
std::string state_key(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }
#endif

torch::optim::AdamWParamState* adamw_state(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  auto& state = opt.state();
  auto it = state.find(state_key(p));
  return it == state.end() ? nullptr : dynamic_cast<torch::optim::AdamWParamState*>(it->second.get());
}

// A unit's full buffer: its storage exists only while the unit is in use.
void free_storage(const torch::Tensor& t) { trainer::free_storage(*t.storage().unsafeGetStorageImpl()); }
void alloc_storage(const torch::Tensor& t) {
  trainer::alloc_storage(*t.storage().unsafeGetStorageImpl(), static_cast<size_t>(t.numel()) * t.element_size());
}

struct Unit {
  std::string name;  // "root" or "model.layers.N", + ".frozen" for the frozen parameters
  bool trainable = false;
  std::vector<torch::Tensor> params;
  std::vector<int64_t> offsets, numels;
  int64_t numel = 0;
  int64_t shard_numel = 0;
  torch::Tensor shard;  // [shard_numel] fp32 master, a leaf (the optimizer's unless offloaded)
  torch::Tensor full;   // [shard_numel * W] on the device; storage freed while released
  int holds = 0;
};

// Written into every model file: the size of the shard group its shards were cut for.
constexpr const char* kShardGroupKey = "shard_group_size";

std::string model_file(int64_t world, int64_t rank) {
  return "model_world_size_" + std::to_string(world) + "_rank_" + std::to_string(rank) + ".pt";
}
std::string optim_file(int64_t world, int64_t rank) {
  return "optim_world_size_" + std::to_string(world) + "_rank_" + std::to_string(rank) + ".pt";
}

class ShardedEngine;

// One decoder layer's forward and backward with its unit gathered around each (fsdp.h).
struct ShardedLayerFn : public torch::autograd::Function<ShardedLayerFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin, const torch::Tensor& mask, const torch::Tensor& shard,
                               ShardedEngine* engine, int64_t unit, DecoderLayerImpl* layer,
                               const CuSeqlens& cu_seqlens, bool checkpoint);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out);
};

class ShardedEngine final : public ModuleEngine, public LayerRunner {
 public:
  ShardedEngine(torch::nn::Module& module, Distributed* dist, const torch::Device& device, const EngineSpec& spec)
      : device_(device), spec_(spec), shard_device_(spec.fsdp.param_offload ? torch::Device(torch::kCPU) : device) {
    form_mesh(dist);
    for (const auto& child : module.named_children()) {
      if (child.key() == "model") backbone_ = std::dynamic_pointer_cast<BackboneImpl>(child.value()).get();
    }
    if (backbone_ == nullptr) {
      throw Error{ExitCode::kFailure, spec_.who + ": FSDP needs a model with a decoder backbone (submodule 'model')",
                  "the actor, critic and reference are such models; this is a bug"};
    }
    build_units(module);
    backbone_->set_layer_runner(this);
    if (spec_.fsdp.optimizer_offload && !spec_.fsdp.param_offload) {
      for (const size_t i : trainable_) {
        auto master = units_[i].shard.detach().to(torch::kCPU).clone();
        master.set_requires_grad(true);
        cpu_master_.push_back(master);
      }
    }
  }

  ~ShardedEngine() override {
    if (backbone_ != nullptr) backbone_->set_layer_runner(nullptr);
  }

  // ---- ModuleEngine

  std::vector<torch::Tensor> optimizer_params() const override {
    if (!cpu_master_.empty()) return cpu_master_;
    std::vector<torch::Tensor> out;
    for (const size_t i : trainable_) out.push_back(units_[i].shard);
    return out;
  }

  void begin_compute() override {
    if (compute_depth_++ == 0) gather_group(0);
  }
  void end_compute() override {
    if (--compute_depth_ == 0) {
      clear_root_grads();
      release_group(0);
    }
  }

  void sync_gradients() override {
    for (const size_t i : groups_[0]) {
      Unit& root = units_[i];
      if (!root.trainable) continue;
      std::vector<torch::Tensor> grads;
      for (auto& p : root.params) grads.push_back(p.grad());
      auto g = reduce_unit_grad(root, grads);
      accumulate_grad(root.shard, g);
    }
    clear_root_grads();
  }

  double clip_grad_norm(double max_norm) override {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads, squares;
    for (const size_t i : trainable_) {
      const auto& g = units_[i].shard.grad();
      if (!g.defined()) continue;
      grads.push_back(g);
      squares.push_back(g.to(torch::kFloat64).pow(2).sum());  // on the shards' device: no sync yet
    }
    // One host sync for this rank's sum of squares, one collective for the group's.
    auto sq = squares.empty() ? torch::zeros({1}, torch::kFloat64) : torch::stack(squares).sum().reshape({1}).to(torch::kCPU);
    // Over the shard group only: the other groups hold the same shards (hybrid sharding).
    if (dist_ != nullptr) dist_->all_reduce_sum(sq);
    const double norm = std::sqrt(sq.item<double>());
    if (!std::isfinite(norm)) return norm;
    const double coef = std::min(1.0, max_norm / (norm + 1e-6));
    for (auto& g : grads) g.mul_(coef);
    return norm;
  }

  void step(torch::optim::Optimizer& optimizer) override {
    if (cpu_master_.empty()) {
      optimizer_step(optimizer);
      return;
    }
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < trainable_.size(); ++k) {
      const auto& g = units_[trainable_[k]].shard.grad();
      cpu_master_[k].mutable_grad() = g.defined() ? g.to(torch::kCPU) : torch::Tensor();
    }
    optimizer_step(optimizer);
    for (size_t k = 0; k < trainable_.size(); ++k) units_[trainable_[k]].shard.copy_(cpu_master_[k]);
  }

  void gather_full() override {
    for (auto& u : units_) gather(u);
  }
  void release_full() override {
    for (auto& u : units_) release(u);
  }

  void visit_full(const std::function<void(const std::vector<torch::Tensor>& params)>& fn) override {
    // Units by layer: "model.layers.N" and its ".frozen" part together, then the root's.
    std::vector<std::string> order;
    std::map<std::string, std::vector<size_t>> groups;
    for (size_t i = 0; i < units_.size(); ++i) {
      std::string key = units_[i].name;
      if (const auto f = key.rfind(".frozen"); f != std::string::npos && f + 7 == key.size()) key.resize(f);
      if (!groups.count(key)) order.push_back(key);
      groups[key].push_back(i);
    }
    for (const auto& key : order) {
      std::vector<torch::Tensor> params;
      for (size_t i : groups[key]) {
        gather(units_[i]);
        params.insert(params.end(), units_[i].params.begin(), units_[i].params.end());
      }
      try {
        fn(params);
      } catch (...) {
        for (size_t i : groups[key]) release(units_[i]);
        throw;
      }
      for (size_t i : groups[key]) release(units_[i]);
    }
  }

  void commit_full() override {
    torch::NoGradGuard no_grad;
    for (auto& u : units_) {
      TORCH_CHECK(u.holds > 0, "commit_full outside gather_full");
      u.shard.detach().copy_(u.full.narrow(0, rank_ * u.shard_numel, u.shard_numel));
    }
    for (size_t k = 0; k < cpu_master_.size(); ++k) cpu_master_[k].detach().copy_(units_[trainable_[k]].shard.detach());
  }

  bool sharded() const override { return true; }

  void save_shards(const std::string& dir, torch::optim::Optimizer* optimizer) const override {
    torch::serialize::OutputArchive model;
    model.write("layout", c10::IValue(layout()));
    model.write(kShardGroupKey, torch::tensor(world_, torch::kInt64));
    for (const auto& u : units_) model.write(u.name, u.shard.detach().to(torch::kCPU));
    write_archive(model, (fs::path(dir) / model_file(global_world_, global_rank_)).string());
    if (optimizer == nullptr) return;
    torch::serialize::OutputArchive optim;
    optim.write("layout", c10::IValue(layout()));
    const auto params = optimizer_params();
    for (size_t k = 0; k < trainable_.size(); ++k) {
      const auto* s = adamw_state(*optimizer, params[k]);
      if (s == nullptr) continue;
      const auto& name = units_[trainable_[k]].name;
      optim.write(name + ".step", torch::tensor(s->step(), torch::kInt64));
      optim.write(name + ".exp_avg", s->exp_avg().to(torch::kCPU));
      optim.write(name + ".exp_avg_sq", s->exp_avg_sq().to(torch::kCPU));
    }
    write_archive(optim, (fs::path(dir) / optim_file(global_world_, global_rank_)).string());
  }

  void load_shards(const std::string& dir, torch::optim::Optimizer* optimizer) override {
    const int64_t saved_world = find_saved_world(dir);
    // Each unit's saved shards, in rank order. A file holds its rank's slice of the vectors cut
    // over its shard group (the whole world unless hybrid), so the first group's files (ranks 0 ..
    // S-1) hold them whole; under the same mesh this rank's own file is its shards.
    std::map<std::string, std::vector<torch::Tensor>> parts;
    std::map<std::string, int64_t> steps;
    auto read_rank = [&](int64_t r) {
      const int64_t group = read_into(fs::path(dir) / model_file(saved_world, r), "", parts);
      if (optimizer != nullptr) {
        const auto path = fs::path(dir) / optim_file(saved_world, r);
        if (!fs::exists(path)) throw missing(path, "the optimizer state of a trainable module");
        read_into(path, ".", parts, &steps);
      }
      return group > 0 ? group : saved_world;  // written before hybrid sharding: the world's
    };
    bool same = false;
    if (saved_world == global_world_) {
      same = read_rank(global_rank_) == world_;
      if (!same) {
        parts.clear();
        steps.clear();
      }
    }
    if (!same) {
      const int64_t group = read_rank(0);
      if (group > saved_world || saved_world % group != 0) {
        throw Error{ExitCode::kFailure,
                    "checkpoint: " + (fs::path(dir) / model_file(saved_world, 0)).string() + " says shard groups of " +
                        std::to_string(group) + " ranks in a world of " + std::to_string(saved_world),
                    "the file is damaged; resume from an earlier checkpoint"};
      }
      for (int64_t r = 1; r < group; ++r) read_rank(r);
    }
    torch::NoGradGuard no_grad;
    for (auto& u : units_) u.shard.copy_(my_slice(u, parts.at(u.name), same));
    const auto params = optimizer_params();
    for (size_t k = 0; k < trainable_.size(); ++k) {
      const auto& u = units_[trainable_[k]];
      if (k < cpu_master_.size()) cpu_master_[k].copy_(u.shard);
      if (optimizer == nullptr || !parts.count(u.name + ".exp_avg")) continue;
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(steps.at(u.name + ".step"));
      state->exp_avg(my_slice(u, parts.at(u.name + ".exp_avg"), same).to(params[k].device()));
      state->exp_avg_sq(my_slice(u, parts.at(u.name + ".exp_avg_sq"), same).to(params[k].device()));
      optimizer->state()[state_key(params[k])] = std::move(state);
    }
  }

  std::vector<torch::Tensor> state_tensors() const override {
    std::vector<torch::Tensor> out;
    for (const auto& u : units_) {
      out.push_back(u.shard);
      out.push_back(u.shard.grad());
    }
    for (const auto& m : cpu_master_) {
      out.push_back(m);
      out.push_back(m.grad());
    }
    return out;
  }
  torch::Device compute_device() const override { return device_; }

  // ---- LayerRunner

  torch::Tensor run(size_t index, DecoderLayerImpl& layer, const torch::Tensor& x, const torch::Tensor& cos,
                    const torch::Tensor& sin, const torch::Tensor& mask, const CuSeqlens& cu_seqlens,
                    bool checkpoint) override {
    const int64_t group = static_cast<int64_t>(index) + 1;
    const Unit* trained = trainable_unit(group);
    const auto& shard = trained != nullptr ? trained->shard : units_[groups_.at(group).front()].shard;
    if (torch::GradMode::is_enabled() && (x.requires_grad() || shard.requires_grad())) {
      return ShardedLayerFn::apply(x, cos, sin, mask, shard, this, group, &layer, cu_seqlens, checkpoint);
    }
    gather_group(group);
    torch::Tensor y;
    try {
      y = layer.forward_any(x, cos, sin, mask, cu_seqlens, layer.cast_weights());
    } catch (...) {
      release_group(group);
      throw;
    }
    release_group(group);
    return y;
  }

  // ---- for ShardedLayerFn

  bool reshard_after_forward() const { return spec_.fsdp.reshard_after_forward; }
  const std::vector<size_t>& group(int64_t g) const { return groups_.at(static_cast<size_t>(g)); }
  Unit& unit(size_t i) { return units_.at(i); }
  Unit* trainable_unit(int64_t g) {
    for (const size_t i : groups_.at(static_cast<size_t>(g)))
      if (units_[i].trainable) return &units_[i];
    return nullptr;
  }

  void gather_group(int64_t g) {
    for (const size_t i : groups_.at(static_cast<size_t>(g))) gather(units_[i]);
  }
  void release_group(int64_t g) {
    for (const size_t i : groups_.at(static_cast<size_t>(g))) release(units_[i]);
  }

  void gather(Unit& u) {
    if (u.holds++ > 0) return;
    alloc_storage(u.full);
    if (dist_ == nullptr) {
      u.full.copy_(u.shard.detach());
      return;
    }
    torch::NoGradGuard no_grad;
    const auto local = u.shard.detach().to(device_, /*non_blocking=*/true);
    dist_->all_gather_flat(u.full, local);
  }

  void release(Unit& u) {
    if (--u.holds > 0) return;
    free_storage(u.full);
  }

  // The rank's averaged slice of a unit's gradient (one per parameter, undefined for none),
  // on the shard's device.
  torch::Tensor reduce_unit_grad(Unit& u, const std::vector<torch::Tensor>& grads) {
    torch::NoGradGuard no_grad;
    auto flat = torch::zeros({u.shard_numel * world_}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) flat.narrow(0, u.offsets[i], u.numels[i]).copy_(grads[i].reshape({-1}));
    }
    auto out = torch::empty({u.shard_numel}, flat.options());
    if (dist_ != nullptr) {
      dist_->reduce_scatter_sum(out, flat);
    } else {
      out.copy_(flat);
    }
    // Hybrid: the same slice of the other shard groups' sums; with them it is the world's sum.
    if (replicate_group_ != nullptr) replicate_group_->all_reduce_sum(out);
    out.div_(static_cast<double>(global_world_));
    return out.to(shard_device_);
  }

 private:
  // verl's device mesh ["ddp", "fsdp"] = [W / fsdp_size, fsdp_size]: the shard group is fsdp_size
  // consecutive ranks, the replicate group the ranks at this one's place in every shard group.
  // fsdp_size -1 (or W): one shard group, the world; no replicate group.
  void form_mesh(Distributed* world) {
    dist_ = world;
    global_world_ = world_ = world != nullptr ? world->world_size() : 1;
    global_rank_ = rank_ = world != nullptr ? world->rank() : 0;
    const int64_t size = spec_.fsdp.fsdp_size;
    if (world == nullptr || size < 1 || size >= global_world_) return;
    if (global_world_ % size != 0) {
      throw Error{ExitCode::kInvalidConfig,
                  spec_.who + ".fsdp_config.fsdp_size=" + std::to_string(size) + " does not divide the " +
                      std::to_string(global_world_) + " ranks",
                  "use a divisor of the world size, or -1 to shard over all ranks"};
    }
    const int s = static_cast<int>(size);
    const int group = static_cast<int>(global_rank_) / s, place = static_cast<int>(global_rank_) % s;
    std::vector<int> shard, replicas;
    for (int k = 0; k < s; ++k) shard.push_back(group * s + k);
    for (int k = place; k < global_world_; k += s) replicas.push_back(k);
    shard_group_ = world->subgroup(shard, spec_.who + ".fsdp_shard");
    replicate_group_ = world->subgroup(replicas, spec_.who + ".fsdp_replicate");
    dist_ = shard_group_.get();
    world_ = s;
    rank_ = place;
  }

  // Groups: [0] the root (everything outside the decoder layers), [1 + i] decoder layer i. A
  // group's trainable and frozen parameters (LoRA: adapters and base weights) are separate units,
  // so that the optimizer never touches a frozen value.
  void build_units(torch::nn::Module& module) {
    const std::string prefix = "model.layers.";
    std::map<std::pair<size_t, bool>, size_t> index_of;  // (group, trainable) -> unit
    for (const auto& np : module.named_parameters(/*recurse=*/true)) {
      const std::string& name = np.key();
      size_t group = 0;
      if (name.compare(0, prefix.size(), prefix) == 0) {
        const size_t dot = name.find('.', prefix.size());
        group = static_cast<size_t>(std::stoll(name.substr(prefix.size(), dot - prefix.size()))) + 1;
      }
      if (np.value().scalar_type() != torch::kFloat32) {
        throw Error{ExitCode::kInvalidConfig,
                    spec_.who + ": FSDP shards float32 parameters; " + name + " is " +
                        std::string(c10::toString(np.value().scalar_type())),
                    "keep the trainer's master weights in float32 (model.dtype sets the compute dtype)"};
      }
      const bool trainable = spec_.trainable && np.value().requires_grad();
      while (groups_.size() <= group) groups_.emplace_back();
      auto key = std::make_pair(group, trainable);
      if (!index_of.count(key)) {
        index_of[key] = units_.size();
        units_.emplace_back();
        units_.back().name = (group == 0 ? std::string("root") : prefix + std::to_string(group - 1)) +
                              (trainable ? "" : ".frozen");
        units_.back().trainable = trainable;
        groups_[group].push_back(units_.size() - 1);
        if (trainable) trainable_.push_back(units_.size() - 1);
      }
      auto& u = units_[index_of[key]];
      u.params.push_back(np.value());
      u.offsets.push_back(u.numel);
      u.numels.push_back(np.value().numel());
      u.numel += np.value().numel();
    }
    torch::NoGradGuard no_grad;
    for (auto& u : units_) {
      u.shard_numel = std::max<int64_t>(1, (u.numel + world_ - 1) / world_);
      auto full = torch::zeros({u.shard_numel * world_}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
      for (size_t i = 0; i < u.params.size(); ++i) {
        full.narrow(0, u.offsets[i], u.numels[i]).copy_(u.params[i].detach().reshape({-1}));
      }
      u.shard = full.narrow(0, rank_ * u.shard_numel, u.shard_numel).clone().to(shard_device_);
      if (spec_.fsdp.param_offload && device_.is_cuda()) u.shard = u.shard.pin_memory();
      u.shard.set_requires_grad(u.trainable);
      for (size_t i = 0; i < u.params.size(); ++i) {
        const auto sizes = u.params[i].sizes().vec();
        u.params[i].set_data(full.narrow(0, u.offsets[i], u.numels[i]).view(sizes));
      }
      u.full = full;
      free_storage(u.full);
    }
  }

  void clear_root_grads() {
    for (const size_t i : groups_[0]) {
      for (auto& p : units_[i].params) {
        if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
      }
    }
  }

  static void accumulate_grad(torch::Tensor& shard, const torch::Tensor& g) {
    if (!shard.requires_grad()) return;
    torch::NoGradGuard no_grad;
    if (shard.grad().defined()) {
      shard.mutable_grad().add_(g);
    } else {
      shard.mutable_grad() = g;
    }
  }

  // "name:numel;" for every unit: a checkpoint is loadable iff its layout is ours.
  std::string layout() const {
    std::ostringstream out;
    for (const auto& u : units_) out << u.name << ':' << u.numel << ';';
    return out.str();
  }

  Error missing(const fs::path& path, const std::string& what) const {
    return Error{ExitCode::kFailure, "checkpoint: " + path.string() + " is missing (" + what + " of " + spec_.who + ")",
                 "resume from a complete checkpoint; a sharded checkpoint needs every rank's files"};
  }

  // W of the model_world_size_W_rank_0.pt in dir: one directory listing.
  int64_t find_saved_world(const std::string& dir) const {
    const std::string prefix = "model_world_size_", suffix = "_rank_0.pt";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      try {
        return std::stoll(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
      } catch (const std::exception&) {
        continue;  // not a number: not one of ours
      }
    }
    throw Error{ExitCode::kFailure,
                "checkpoint: " + dir + " holds no sharded model (model_world_size_W_rank_0.pt) for " + spec_.who,
                "it was saved by a replicated run (fsdp_size=1 or one rank without offload); resume with the "
                "strategy it was saved with"};
  }

  // Reads an archive's tensors (for each unit: name + suffix) into parts; `steps` gets the
  // optimizer's step counts. Returns the shard group size the file was written with (0: not
  // recorded, a checkpoint from before hybrid sharding, whose group was the world).
  int64_t read_into(const fs::path& path, const std::string& dot,
                    std::map<std::string, std::vector<torch::Tensor>>& parts,
                    std::map<std::string, int64_t>* steps = nullptr) const {
    if (!fs::exists(path)) throw missing(path, "a shard");
    torch::serialize::InputArchive ar;
    try {
      ar.load_from(path.string());
    } catch (const std::exception& e) {
      throw Error{ExitCode::kFailure, "checkpoint: cannot read " + path.string() + ": " + e.what(),
                  "the file is damaged; resume from an earlier checkpoint"};
    }
    c10::IValue saved_layout;
    ar.read("layout", saved_layout);
    if (saved_layout.toStringRef() != layout()) {
      throw Error{ExitCode::kFailure,
                  "checkpoint: " + path.string() + " holds another model's shards (layout " +
                      saved_layout.toStringRef().substr(0, 120) + "...) than " + spec_.who + "'s",
                  "resume with the model config the checkpoint was saved with"};
    }
    torch::Tensor group;
    const int64_t shard_group = ar.try_read(kShardGroupKey, group) ? group.item<int64_t>() : 0;
    for (const auto& u : units_) {
      if (dot.empty()) {
        torch::Tensor t;
        ar.read(u.name, t);
        parts[u.name].push_back(t);
        continue;
      }
      if (!u.trainable) continue;
      torch::Tensor step;
      if (!ar.try_read(u.name + ".step", step)) continue;  // no step taken yet
      (*steps)[u.name + ".step"] = step.item<int64_t>();
      for (const char* k : {".exp_avg", ".exp_avg_sq"}) {
        torch::Tensor t;
        ar.read(u.name + k, t);
        parts[u.name + k].push_back(t);
      }
    }
    return shard_group;
  }

  // This rank's slice of a unit's vector from the saved ranks' pieces (all of them, or only
  // this rank's own when the world size is unchanged).
  torch::Tensor my_slice(const Unit& u, const std::vector<torch::Tensor>& pieces, bool same) const {
    if (same) return pieces.at(0);
    auto whole = torch::cat(pieces).narrow(0, 0, u.numel);
    auto padded = torch::zeros({u.shard_numel * world_}, whole.options());
    padded.narrow(0, 0, u.numel).copy_(whole);
    return padded.narrow(0, rank_ * u.shard_numel, u.shard_numel).clone();
  }

  torch::Device device_;
  EngineSpec spec_;
  torch::Device shard_device_;
  // The mesh (form_mesh): dist_ is the shard group, world_ / rank_ its size and this rank's place
  // in it (what the vectors are cut by); the global ones name the checkpoint files.
  std::unique_ptr<Distributed> shard_group_, replicate_group_;  // hybrid only
  Distributed* dist_ = nullptr;
  int64_t world_ = 1, rank_ = 0;
  int64_t global_world_ = 1, global_rank_ = 0;
  BackboneImpl* backbone_ = nullptr;
  std::vector<Unit> units_;
  std::vector<std::vector<size_t>> groups_;  // [0] root, [1 + i] decoder layer i: their units
  std::vector<size_t> trainable_;            // the units the optimizer steps, in order
  std::vector<torch::Tensor> cpu_master_;    // optimizer_offload: CPU copies of trainable_'s shards
  int compute_depth_ = 0;
};

torch::Tensor ShardedLayerFn::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                      const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask,
                                      const torch::Tensor& shard, ShardedEngine* engine, int64_t group,
                                      DecoderLayerImpl* layer, const CuSeqlens& cu_seqlens, bool checkpoint) {
  (void)shard;  // the group's trainable shard: an input so that autograd hands its gradient back
  ctx->saved_data["engine"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(engine));
  ctx->saved_data["layer"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(layer));
  ctx->saved_data["group"] = group;
  ctx->saved_data["cu_seqlens"] = c10::IValue(cu_seqlens);
  ctx->saved_data["checkpoint"] = checkpoint;
  engine->gather_group(group);
  if (checkpoint) {
    // Only the input is kept; the backward gathers and recomputes (activation checkpointing).
    ctx->save_for_backward({x, cos, sin, mask});
    torch::Tensor y;
    {
      torch::NoGradGuard no_grad;
      y = layer->forward_any(x, cos, sin, mask, cu_seqlens, layer->cast_weights());
    }
    engine->release_group(group);
    return y;
  }
  // The layer's own graph, kept until the backward: its saved parameter views outlive the
  // freed storage and see the data again once the backward gathers the group.
  auto xi = x.detach().requires_grad_(true);
  torch::Tensor yi;
  {
    // The casts (one per parameter of this gather) are part of the layer's own graph: the
    // backward's gradients reach the fp32 parameters through them.
    torch::AutoGradMode grad(true);
    yi = layer->forward_any(xi, cos, sin, mask, cu_seqlens, layer->cast_weights());
  }
  ctx->saved_data["x"] = xi;
  ctx->saved_data["y"] = yi;
  if (engine->reshard_after_forward()) engine->release_group(group);
  return yi.detach();
}

torch::autograd::variable_list ShardedLayerFn::backward(torch::autograd::AutogradContext* ctx,
                                                        torch::autograd::variable_list grad_out) {
  auto* engine = reinterpret_cast<ShardedEngine*>(static_cast<intptr_t>(ctx->saved_data["engine"].toInt()));
  auto* layer = reinterpret_cast<DecoderLayerImpl*>(static_cast<intptr_t>(ctx->saved_data["layer"].toInt()));
  const bool checkpoint = ctx->saved_data["checkpoint"].toBool();
  const int64_t group = ctx->saved_data["group"].toInt();
  if (checkpoint || engine->reshard_after_forward()) engine->gather_group(group);
  torch::Tensor xi, yi;
  if (checkpoint) {
    const auto saved = ctx->get_saved_variables();
    const CuSeqlens cu_seqlens = ctx->saved_data["cu_seqlens"].toIntVector();
    xi = saved[0].detach().requires_grad_(true);
    torch::AutoGradMode grad(true);
    // Gathered again, so cast again: one cast per gather, as FSDP's mixed precision.
    yi = layer->forward_any(xi, saved[1], saved[2], saved[3], cu_seqlens, layer->cast_weights());
  } else {
    xi = ctx->saved_data["x"].toTensor();
    yi = ctx->saved_data["y"].toTensor();
    ctx->saved_data.erase("x");
    ctx->saved_data.erase("y");
  }
  Unit* u = engine->trainable_unit(group);
  std::vector<torch::Tensor> inputs{xi};
  if (u != nullptr) inputs.insert(inputs.end(), u->params.begin(), u->params.end());
  torch::Tensor shard_grad;
  torch::Tensor gx;
  try {
    const auto grads = torch::autograd::grad({yi}, inputs, {grad_out[0]}, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true);
    gx = grads[0];
    if (u != nullptr) shard_grad = engine->reduce_unit_grad(*u, std::vector<torch::Tensor>(grads.begin() + 1, grads.end()));
  } catch (...) {
    engine->release_group(group);
    throw;
  }
  engine->release_group(group);
  return {gx, torch::Tensor(), torch::Tensor(), torch::Tensor(), shard_grad, torch::Tensor(), torch::Tensor(),
          torch::Tensor(), torch::Tensor(), torch::Tensor()};
}

}  // namespace

std::unique_ptr<ModuleEngine> make_sharded_engine(torch::nn::Module& module, Distributed* dist,
                                                  const torch::Device& device, const EngineSpec& spec) {
  return std::make_unique<ShardedEngine>(module, dist, device, spec);
}

}  // namespace verl::trainer
