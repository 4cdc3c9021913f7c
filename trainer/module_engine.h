// ModuleEngine is how a worker's module is held across the data-parallel group and trained
// (verl's actor.strategy / critic.strategy with fsdp_config): the worker asks it for the
// tensors its optimizer steps, brackets its forwards with a ComputeScope, and lets it make the
// gradients equal across ranks, clip them and step, without knowing which engine it has.
//
//   replicated  every rank holds the whole module (DDP): gradients are all-reduced in buckets.
//               One rank without offload, or fsdp_config.fsdp_size=1 (verl's hybrid sharding
//               with shards of one rank, which is DDP).
//   sharded     FSDP / ZeRO-3 (trainer/fsdp.h): parameters, gradients and optimizer state are
//               split over the group; each decoder layer's parameters are all-gathered around
//               its forward and backward, its gradients reduce-scattered; param_offload /
//               optimizer_offload keep the shards / the optimizer on the CPU. With 1 < fsdp_size
//               < W (a divisor of W): hybrid sharding, split within groups of fsdp_size ranks
//               and replicated across them (torch's HYBRID_SHARD).
// Both give the same numbers up to the order of floating-point sums (tests/unit/trainer/
// fsdp_test.cc holds them to it). Not thread-safe: one engine per module and rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/job_config.h"
#include "trainer/parallel_strategy.h"

namespace verl::trainer {

class ModuleEngine {
 public:
  virtual ~ModuleEngine();

  // The tensors the optimizer steps: the module's parameters, or this rank's flat shards (on
  // the CPU with optimizer_offload).
  virtual std::vector<torch::Tensor> optimizer_params() const = 0;

  // Between begin_compute and end_compute (nested pairs allowed) the module can run forwards
  // (and backwards): a sharded engine holds the parameters used outside the decoder layers
  // (embedding, final norm, heads) gathered meanwhile. Use ComputeScope.
  virtual void begin_compute() = 0;
  virtual void end_compute() = 0;

  // After a mini-batch's backward passes, inside its compute scope: every rank's gradients of
  // optimizer_params() become the group's average.
  virtual void sync_gradients() = 0;

  // torch.nn.utils.clip_grad_norm_ over the group's whole gradient (the shards' squares summed
  // over ranks); returns the norm before clipping (inf / nan when not finite).
  virtual double clip_grad_norm(double max_norm) = 0;

  // optimizer.step() on optimizer_params() (with optimizer_offload: the CPU copies, then the
  // result back to the device shards).
  virtual void step(torch::optim::Optimizer& optimizer) = 0;

  // Between gather_full and release_full every parameter of the module holds its full value on
  // every rank (rollout weights, HF export, the reference's copy). Collective: all ranks call.
  virtual void gather_full() = 0;
  virtual void release_full() = 0;
  // Calls fn with parameters of the module holding their full values, a group at a time, so that
  // the whole module is never gathered at once (the rollout's resharding: each rank keeps its
  // tensor-parallel piece of one decoder layer before the next is gathered). A sharded engine
  // gathers each decoder layer's units (trainable and frozen together, as a LoRA merge needs)
  // and then the root; a replicated one calls fn once with every parameter. Collective.
  virtual void visit_full(const std::function<void(const std::vector<torch::Tensor>& params)>& fn) = 0;

  // Between gather_full and release_full, after the caller changed the full parameters in place
  // (the same change on every rank: the critic's backbone copied from the actor, a loaded
  // checkpoint): the shards take those values. A no-op for a replicated engine.
  virtual void commit_full() = 0;

  // A sharded engine's checkpoint: each rank writes / reads its own files in dir
  // (model_world_size_W_rank_R.pt, optim_world_size_W_rank_R.pt; verl's layout, W and R the
  // world's). Loading takes the files of any world size or shard group size (resharded on load). optimizer may be null (a frozen module).
  virtual bool sharded() const = 0;
  virtual void save_shards(const std::string& dir, torch::optim::Optimizer* optimizer) const = 0;
  virtual void load_shards(const std::string& dir, torch::optim::Optimizer* optimizer) = 0;

  // Bytes of parameter, gradient and optimizer-state storage this rank holds between steps
  // (what sharding divides by the group size), wherever it is (device, or host when offloaded
  // or asleep).
  int64_t resident_state_bytes(const torch::optim::Optimizer* optimizer) const;
  // Bytes of that state in the compute device's memory now: 0 while asleep, less with offload.
  int64_t device_state_bytes(const torch::optim::Optimizer* optimizer) const;

  // The hybrid engine's sleep (rollout.free_cache_engine; trainer/ppo_trainer.cc decides when):
  // every tensor of this rank's training state on the compute device (parameters or shards,
  // their gradients, the optimizer's copies and moments) is copied to host memory (pinned on
  // CUDA) and its device storage freed, so that the rollout's KV cache can have that memory;
  // wake() allocates and fills them again. The tensors keep their identity (the optimizer's
  // references stay good) and their values exactly. Between the two the module must not run.
  // Not collective. optimizer may be null (a frozen module).
  void sleep(const torch::optim::Optimizer* optimizer);
  void wake();
  bool asleep() const { return parked_ != nullptr; }

 protected:
  // This rank's training state: parameters (or shards) and their gradients, with the optimizer's
  // copies (optimizer_offload) and their gradients; the optimizer's moments are added by the
  // callers above. Undefined tensors may be among them.
  virtual std::vector<torch::Tensor> state_tensors() const = 0;
  // Where the module computes (the device the rollout shares with it).
  virtual torch::Device compute_device() const = 0;

 private:
  std::vector<torch::Tensor> all_state_tensors(const torch::optim::Optimizer* optimizer) const;
  struct Parked;
  std::shared_ptr<Parked> parked_;  // shared: a deleter that needs no complete type here
};

class ComputeScope {
 public:
  explicit ComputeScope(ModuleEngine& engine) : engine_(engine) { engine_.begin_compute(); }
  ~ComputeScope() { engine_.end_compute(); }
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;

 private:
  ModuleEngine& engine_;
};

class FullParamsScope {
 public:
  explicit FullParamsScope(ModuleEngine& engine) : engine_(engine) { engine_.gather_full(); }
  ~FullParamsScope() { engine_.release_full(); }
  FullParamsScope(const FullParamsScope&) = delete;
  FullParamsScope& operator=(const FullParamsScope&) = delete;

 private:
  ModuleEngine& engine_;
};

// What a role's strategy and fsdp_config ask for (job_config.h FsdpConfig), for `who`
// ("actor_rollout_ref.actor", "critic.model", "actor_rollout_ref.ref": key paths in errors).
struct EngineSpec {
  std::string who;
  bool trainable = true;
  FsdpConfig fsdp;
};

// The replicated engine over a list of parameters (the whole module's).
// `all`: every parameter of the module (visit_full's), when `params` (the optimizer's) are only
// the trainable ones; empty: the same as params.
std::unique_ptr<ModuleEngine> make_replicated_engine(std::vector<torch::Tensor> params, ParallelStrategy& strategy,
                                                    std::vector<torch::Tensor> all = {});

// The engine for `module` (already on `device`): sharded when the group has more than one rank
// and fsdp_size is not 1 (-1 or >= W: over all ranks, as verl's create_device_mesh; a divisor of
// W: hybrid), or when an offload is on; else replicated. Collective (hybrid forms its process groups): all ranks call it.
// Throws verl::Error kInvalidConfig naming the key for an fsdp_size it cannot form (one that
// does not divide W).
std::unique_ptr<ModuleEngine> make_module_engine(torch::nn::Module& module, ParallelStrategy& strategy,
                                                 const torch::Device& device, const EngineSpec& spec);

}  // namespace verl::trainer
