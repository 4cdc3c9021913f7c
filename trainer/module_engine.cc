#include "trainer/module_engine.h"

#include "common/error.h"
#include "trainer/fsdp.h"
#include "trainer/minibatch_update.h"
#include "trainer/storage_resize.h"

#include <set>

namespace verl::trainer {
namespace {

// DDP: every rank holds the whole module; gradients are all-reduced through the strategy.
class ReplicatedEngine final : public ModuleEngine {
 public:
  ReplicatedEngine(std::vector<torch::Tensor> params, ParallelStrategy& strategy, std::vector<torch::Tensor> all)
      : strategy_(strategy), params_(std::move(params)), all_(all.empty() ? params_ : std::move(all)) {}

  std::vector<torch::Tensor> optimizer_params() const override { return params_; }
  void begin_compute() override {}
  void end_compute() override {}
  void sync_gradients() override { strategy_.sync_gradients(params_); }
  double clip_grad_norm(double max_norm) override { return trainer::clip_grad_norm(params_, max_norm); }
  void step(torch::optim::Optimizer& optimizer) override { optimizer_step(optimizer); }
  void gather_full() override {}
  void release_full() override {}
  void visit_full(const std::function<void(const std::vector<torch::Tensor>& params)>& fn) override { fn(all_); }
  void commit_full() override {}
  bool sharded() const override { return false; }
  void save_shards(const std::string&, torch::optim::Optimizer*) const override {
    throw Error{ExitCode::kFailure, "a replicated module has no shards to save (checkpoint.h saves it whole)"};
  }
  void load_shards(const std::string&, torch::optim::Optimizer*) override {
    throw Error{ExitCode::kFailure, "a replicated module has no shards to load (checkpoint.h loads it whole)"};
  }
  std::vector<torch::Tensor> state_tensors() const override {
    std::vector<torch::Tensor> out = all_;
    for (const auto& p : params_) out.push_back(p.grad());
    return out;
  }
  torch::Device compute_device() const override { return all_.empty() ? torch::Device(torch::kCPU) : all_.front().device(); }

 private:
  ParallelStrategy& strategy_;
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> all_;  // every parameter of the module (visit_full)
};

}  // namespace

// ---- the base: state sizes and sleep

struct ModuleEngine::Parked {
  struct Entry {
    c10::Storage storage;  // freed on the device while parked
    size_t bytes = 0;
    torch::Tensor host;  // its bytes
  };
  std::vector<Entry> entries;
};

ModuleEngine::~ModuleEngine() = default;

std::vector<torch::Tensor> ModuleEngine::all_state_tensors(const torch::optim::Optimizer* optimizer) const {
  std::vector<torch::Tensor> out = state_tensors();
  if (optimizer != nullptr) {
    for (const auto& [key, state] : optimizer->state()) {
      const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(state.get());
      if (s == nullptr) continue;
      out.push_back(s->exp_avg());
      out.push_back(s->exp_avg_sq());
      out.push_back(s->max_exp_avg_sq());
    }
  }
  return out;
}

int64_t ModuleEngine::resident_state_bytes(const torch::optim::Optimizer* optimizer) const {
  int64_t bytes = 0;
  for (const auto& t : all_state_tensors(optimizer))
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

namespace {
// The storages of tensors on `device`, each once (a module's tensors may share one).
std::vector<c10::Storage> device_storages(const std::vector<torch::Tensor>& tensors, const torch::Device& device) {
  std::vector<c10::Storage> out;
  std::set<const c10::StorageImpl*> seen;
  for (const auto& t : tensors) {
    if (!t.defined() || t.device() != device || !t.has_storage()) continue;
    if (seen.insert(t.storage().unsafeGetStorageImpl()).second) out.push_back(t.storage());
  }
  return out;
}

// A storage's bytes as a flat uint8 tensor (a view: copies into it fill the storage).
torch::Tensor bytes_view(const c10::Storage& s, size_t bytes, const torch::Device& device) {
  return torch::empty({0}, torch::TensorOptions().dtype(torch::kUInt8).device(device))
      .set_(s, 0, {static_cast<int64_t>(bytes)}, {1});
}
}  // namespace

int64_t ModuleEngine::device_state_bytes(const torch::optim::Optimizer* optimizer) const {
  int64_t bytes = 0;
  for (const auto& s : device_storages(all_state_tensors(optimizer), compute_device()))
    bytes += static_cast<int64_t>(s.nbytes());
  return bytes;
}

void ModuleEngine::sleep(const torch::optim::Optimizer* optimizer) {
  if (parked_) return;
  torch::NoGradGuard no_grad;
  const torch::Device device = compute_device();
  auto parked = std::make_shared<Parked>();
  for (auto& s : device_storages(all_state_tensors(optimizer), device)) {
    const size_t bytes = s.nbytes();
    if (bytes == 0) continue;  // already freed (a unit's full buffer outside its use)
    auto host = torch::empty({static_cast<int64_t>(bytes)},
                             torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(device.is_cuda()));
    // Stream-ordered: the storage is freed below, but the allocator hands its memory to later
    // work on this stream only, after the copy.
    host.copy_(bytes_view(s, bytes, device), /*non_blocking=*/device.is_cuda());
    parked->entries.push_back({s, bytes, host});
  }
  for (auto& e : parked->entries) free_storage(*e.storage.unsafeGetStorageImpl());
  parked_ = std::move(parked);
}

void ModuleEngine::wake() {
  if (!parked_) return;
  torch::NoGradGuard no_grad;
  const torch::Device device = compute_device();
  for (auto& e : parked_->entries) {
    alloc_storage(*e.storage.unsafeGetStorageImpl(), e.bytes);
    bytes_view(e.storage, e.bytes, device).copy_(e.host, /*non_blocking=*/device.is_cuda());
  }
  parked_.reset();
}

std::unique_ptr<ModuleEngine> make_replicated_engine(std::vector<torch::Tensor> params, ParallelStrategy& strategy,
                                                    std::vector<torch::Tensor> all) {
  return std::make_unique<ReplicatedEngine>(std::move(params), strategy, std::move(all));
}

std::unique_ptr<ModuleEngine> make_module_engine(torch::nn::Module& module, ParallelStrategy& strategy,
                                                 const torch::Device& device, const EngineSpec& spec) {
  const int64_t world = strategy.dp_size();
  const auto& f = spec.fsdp;
  const std::string key = spec.who + ".fsdp_config";
  // Hybrid sharding (1 < fsdp_size < world): shard groups of fsdp_size ranks, replicated across;
  // the world must be made of whole groups, as verl's device mesh [world / fsdp_size, fsdp_size].
  // As verl's create_device_mesh, fsdp_size >= world shards over all ranks.
  if (f.fsdp_size > 1 && f.fsdp_size < world && world % f.fsdp_size != 0) {
    throw Error{ExitCode::kInvalidConfig,
                key + ".fsdp_size=" + std::to_string(f.fsdp_size) + " with " + std::to_string(world) +
                    " ranks: the shard group size must divide the number of data-parallel ranks",
                "use a divisor of " + std::to_string(world) + " (parameters sharded within groups of that many "
                "ranks, replicated across groups), -1 to shard over all ranks, or 1 to replicate"};
  }
  const bool offload = f.param_offload || f.optimizer_offload;
  if (f.fsdp_size == 1 && world > 1 && offload) {
    throw Error{ExitCode::kInvalidConfig,
                key + ": param_offload / optimizer_offload with fsdp_size=1 on " + std::to_string(world) +
                    " ranks is not supported (offload works on sharded state)",
                "use fsdp_size=-1 with offload"};
  }
  const bool sharded = (world > 1 && f.fsdp_size != 1) || offload;
  if (!sharded) {
    std::vector<torch::Tensor> trainable;  // LoRA freezes the base weights; the reference all of it
    for (const auto& p : module.parameters())
      if (spec.trainable && p.requires_grad()) trainable.push_back(p);
    return make_replicated_engine(std::move(trainable), strategy, module.parameters());
  }
  return make_sharded_engine(module, strategy.distributed(), device, spec);
}

}  // namespace verl::trainer
