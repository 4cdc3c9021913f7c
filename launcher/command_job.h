// A command job (kind "command", `verlctl submit [options] -- CMD [ARGS...]`): any program run
// as the ranks of a job, as Ray Jobs runs an entrypoint and torchrun a script. It is a train
// job's record with another per-rank argv and environment, not a second mechanism: the head
// places trainer.nnodes x trainer.n_gpus_per_node ranks (or ranks_per_node per node) with the
// same scheduler, sends start orders in heartbeat answers, and judges exits, stops and restarts
// (trainer.max_restarts) as for a train job. Each rank runs argv with the torchrun environment
// (rank_env.h), the node's NCCL/Gloo environment (nccl_env.h, added by the agent) and `env` last,
// so that --env wins over everything else.
//
// The working directory (`submit --working-dir DIR`) travels through the head whatever the
// backend: the CLI packs DIR as a tar (at most kMaxWorkingDirBytes), the head keeps it with the
// job (JobStore::put_working_dir) and each node's agent fetches it once per job
// (GET /api/jobs/<id>/working-dir) and unpacks it into <job dir>/work, where the ranks then run.
// Without one the ranks run in the job directory itself.
//
// Pure values and functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config.h"

namespace verl::launcher {

// The head takes a body of at most 32 MiB (head.cc); base64 makes 4 bytes of 3.
constexpr int64_t kMaxWorkingDirBytes = int64_t{16} << 20;

// Where a job directory's unpacked working directory lives, relative to it.
constexpr const char* kWorkingDirName = "work";

struct CommandSpec {
  std::vector<std::string> argv;  // non-empty; argv[0] is looked up on the node's PATH
  std::vector<std::string> env;   // NAME=value (--env), in order, added after every other variable
  // 0: one rank per slot (trainer.n_gpus_per_node per node, as a train job); 1: one per node,
  // holding all of the node's slots, for launchers that start their own (torchrun, deepspeed).
  int ranks_per_node = 0;
  std::string working_dir;        // the submitter's directory it was packed from; "" = none
  int64_t working_dir_bytes = 0;  // the size of its tar

  // argv as one shell-quoted line, for `jobs`, events and logs.
  std::string display() const;
};

// {argv, env, ranks_per_node, working_dir?: {source, bytes}}: the job record's `command`.
void to_json(nlohmann::ordered_json& j, const CommandSpec& c);
void from_json(const nlohmann::ordered_json& j, CommandSpec& c);

// The job config keys a command job reads: its shape (trainer.nnodes, trainer.n_gpus_per_node)
// and trainer.max_restarts. An override of any other key is refused (it would do nothing), and
// the trainer's cross-checks (batch sizes over the ranks) do not apply.
const std::vector<std::string>& command_job_keys_list();
std::string command_job_keys();  // "trainer.nnodes, trainer.n_gpus_per_node, trainer.max_restarts"
// What is wrong with an override for a command job ("" when it sets one of those keys).
std::string command_override_problem(const std::string& override_text);
// The issues of a resolved config that concern those keys (the others are the trainer's).
std::vector<config::Issue> command_job_issues(const std::vector<config::Issue>& issues);
// {trainer: {nnodes, n_gpus_per_node, max_restarts}} of a resolved job config: the record's config.
nlohmann::ordered_json command_job_config(const nlohmann::ordered_json& resolved);

// What is wrong with an --env entry ("" when it is NAME=value with NAME a shell variable name).
std::string env_entry_problem(const std::string& entry);

// Base64 (RFC 4648, with padding), how the working directory's tar travels in JSON bodies.
std::string base64_encode(const std::string& bytes);
// Throws std::invalid_argument on a character outside the alphabet or a bad length.
std::string base64_decode(const std::string& text);

}  // namespace verl::launcher
