// The job preflight: what one node checks before a job's ranks start there, so that a dataset
// or model present on the head's machine but missing on a worker fails the job before it runs
// rather than minutes into it. The head orders it on every node a job is placed on (unless
// `submit --skip-job-preflight`); the agent runs `verlctl job-preflight -f job.yaml -o json` in
// the job's directory on that node, inside the job's container when the cluster has one, so
// that every path resolves as the ranks will resolve it (relative to the job directory, ~ and
// hub ids as trainer/hf_model resolves them through common/model_dir.h) and a missing image
// fails it too.
//
// The checks, run in parallel (one thread each):
//  - data: every file of data.train_files / data.val_files exists, is readable, and its format
//    parses: parquet footer or the first JSON row, and the prompt column (data/rows.h probe_file);
//  - model: actor_rollout_ref.model.path (and critic.model.path when the run has a critic):
//    config.json parses, every safetensors shard model.safetensors.index.json names is there
//    and as long as its header says, tokenizer.json and tokenizer_config.json are there;
//  - checkpoint: trainer.default_local_dir (or its nearest existing parent) is a writable
//    directory, and when trainer.save_freq > 0 its filesystem has room for one checkpoint,
//    estimated from the model's weights (kCheckpointFactor below says how).
// Pure functions of the config and the filesystem; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace verl::cli {

struct PreflightCheck {
  std::string check;  // data | model | checkpoint
  std::string key;    // the config key it checks: data.train_files, ...
  std::string path;   // the path as the config gives it
  bool ok = true;
  std::string detail;  // ok: what was found; else what is wrong
  std::string hint;    // what to do (only when !ok)
};

struct PreflightReport {
  std::vector<PreflightCheck> checks;
  bool ok() const;
};
nlohmann::ordered_json to_json(const PreflightReport& r);  // {ok, checks: [{check, key, path, ok, detail, hint?}]}

// Runs every check for the resolved job config; relative paths resolve against the process's
// working directory (the agent starts it in the job directory).
PreflightReport run_job_preflight(const nlohmann::ordered_json& job_config);

// The bytes a checkpoint of the weights takes, roughly: one copy of the parameters in the
// training dtype plus AdamW's two moments, per trained model (actor, critic).
constexpr double kCheckpointFactor = 3.0;

// A safetensors file's expected size from its header (8 + header length + the end of the last
// tensor's data). Throws verl::Error naming the file when the header cannot be read.
int64_t safetensors_expected_size(const std::string& path);

}  // namespace verl::cli
