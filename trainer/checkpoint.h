// Checkpoints in verl's layout, written atomically:
//
//   <trainer.default_local_dir>/
//     latest_checkpointed_iteration.txt      "N" (the last complete checkpoint)
//     global_step_N/
//       actor/model.pt   actor/optim.pt      torch::serialize archives
//       actor/huggingface/                   the actor as an HF model directory (when asked)
//       critic/model.pt  critic/optim.pt     (only when the run has a critic)
//       ref/model.pt                         (only when passed: the reference policy, which a
//                                            resumed run cannot rebuild from the resumed actor)
//       rng.pt                               the torch default CPU generator + the rollout
//                                            sampling generator when passed (CUDA generators
//                                            are not saved: nothing here samples from them)
//       trainer_state.json                   step, data order (epoch, position, seed), the KL
//                                            coefficient, free-form extras
//
// Atomicity: rank 0 writes everything into global_step_N.tmp-<pid>/, fsyncs, then renames the
// directory onto global_step_N (replacing an older one of the same step), then rewrites the
// txt through a temp file + rename. A crash at any point leaves the previous checkpoint and txt
// intact; leftover *.tmp-* directories are ignored by every lookup (and removed by the next
// successful save). Other ranks wait on a barrier, so that no rank runs ahead of a checkpoint
// that might fail.
// Loading: every rank reads the same directory (a shared filesystem or a per-node copy).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/util/Optional.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace verl::trainer {

class Distributed;

// trainer.resume_mode
enum class ResumeMode {
  kAuto,        // "auto": resume from latest_checkpointed_iteration.txt when present
  kDisable,     // "disable": always start fresh
  kResumePath,  // "resume_path": resume from trainer.resume_from_path (must exist)
};
ResumeMode parse_resume_mode(const std::string& name);  // throws verl::Error kInvalidConfig

// Where the data loader stands, so that a resumed run sees the same prompts in the same order.
struct DataOrderState {
  int64_t epoch = 0;         // current epoch (0-based)
  int64_t position = 0;      // prompts of this epoch already consumed
  int64_t shuffle_seed = 0;  // the epoch's permutation is derived from (seed, epoch)
};

// The modules a checkpoint covers. Null members are skipped (e.g. no critic for GRPO). Not
// owned; must outlive the call.
struct CheckpointParts {
  torch::nn::Module* actor = nullptr;
  torch::optim::Optimizer* actor_optim = nullptr;
  torch::nn::Module* critic = nullptr;
  torch::optim::Optimizer* critic_optim = nullptr;
  // The reference policy (use_kl_loss / use_kl_in_reward): frozen, so no optimizer.
  torch::nn::Module* ref = nullptr;
  // The rollout's sampling generator (rollout.seed), saved and restored alongside the default
  // generator. Null: not saved.
  at::Generator* rollout_generator = nullptr;
  // Writes the actor in Hugging Face layout into the directory it is given (verl's
  // actor/huggingface/: config.json, safetensors, tokenizer files), inside the checkpoint's
  // temporary directory so that it is part of the atomic rename. Empty: not written.
  std::function<void(const std::string& dir)> actor_hf_export;
  // Modules sharded over the ranks (FSDP, trainer/module_engine.h): every rank saves and loads
  // its own files in the subdirectory ("actor", "critic", "ref") through these; the module and
  // optimizer pointers above stay null for such a part.
  struct Sharded {
    std::string subdir;
    std::function<void(const std::string& dir)> save;
    std::function<void(const std::string& dir)> load;
  };
  std::vector<Sharded> sharded;
};

struct TrainerState {
  int64_t global_step = 0;  // steps completed
  DataOrderState data;
  double kl_coef = 0;       // KlController::value()
  nlohmann::json extra = nlohmann::json::object();  // anything else the loop wants back
};

// Writes an archive to path through checked writes (a full disk is a verl::Error kFailure naming
// the path, never an abort inside libtorch's writer).
void write_archive(torch::serialize::OutputArchive& archive, const std::string& path);

class CheckpointManager {
 public:
  // dist may be null (one rank). default_local_dir is created on the first save.
  CheckpointManager(std::string default_local_dir, Distributed* dist);

  // Rank 0 writes global_step_<state.global_step>/ and the txt; all ranks return after a
  // barrier. Returns the checkpoint directory. Throws verl::Error (kFailure) naming the path
  // on an I/O error (the previous checkpoint stays intact).
  std::string save(const CheckpointParts& parts, const TrainerState& state);

  // The directory to resume from, or nullopt to start fresh:
  //   kDisable -> nullopt; kAuto -> global_step_<txt> when the txt exists (throws when it names a
  //   missing directory), else nullopt; kResumePath -> resume_from_path, which must be a
  //   checkpoint directory (throws verl::Error kInvalidConfig naming the path otherwise).
  c10::optional<std::string> resolve_resume(ResumeMode mode,
                                            const std::string& resume_from_path) const;

  // Loads dir into the parts (modules, optimizers, generators: the same set that was saved;
  // a part saved but not passed is ignored, a part passed but not saved throws) and returns the
  // trainer state. Also restores the default CPU generator.
  TrainerState load(const std::string& dir, const CheckpointParts& parts) const;

  // N from latest_checkpointed_iteration.txt, if present and well-formed.
  c10::optional<int64_t> latest_step() const;
  std::string step_dir(int64_t step) const;
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  Distributed* dist_;
};

}  // namespace verl::trainer
