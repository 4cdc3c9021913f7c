// `verlctl train`: runs the embedded trainer in the foreground, as one rank. Ranks started by
// the launcher run the same command. The config is resolved and validated here, before
// libtorch is loaded, so a bad key costs milliseconds rather than a torch start-up.
#include <cstdlib>

#include "cli/app.h"
#include "cli/trainer_loader.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

namespace verl::cli {
namespace {

struct TrainArgs {
  JobFileArgs job;
  bool sft = false;
  int rank = -1, world_size = -1, local_rank = -1, master_port = -1;
  std::string master_addr;
};

void set_env(const char* name, const std::string& value) { ::setenv(name, value.c_str(), /*overwrite=*/1); }

}  // namespace

void register_train(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Run the PPO/GRPO trainer in the foreground as one rank");
  add_job_file_options(cmd, args->job);
  cmd->add_flag("--sft", args->sft, "Run only the supervised warm start (trainer.sft_warmup_steps steps, or total_training_steps when 0)");
  cmd->add_option("--rank", args->rank, "This process's rank (sets RANK)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--world-size", args->world_size, "Number of ranks (sets WORLD_SIZE)")->check(CLI::PositiveNumber);
  cmd->add_option("--local-rank", args->local_rank, "Rank within this node (sets LOCAL_RANK)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--master-addr", args->master_addr, "Rendezvous store host (sets MASTER_ADDR)");
  cmd->add_option("--master-port", args->master_port, "Rendezvous store port (sets MASTER_PORT)")->check(CLI::Range(1, 65535));
  cmd->footer("Examples:\n  verlctl train\n  verlctl train -f job.yaml trainer.total_training_steps=20\n"
              "  verlctl train algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=8\n"
              "  verlctl train --config-path verl/trainer/config --config-name ppo_trainer data.train_files=...");
  cmd->callback([&ctx, args] {
    std::vector<config::Issue> warnings;
    auto job = config::load_job(args->job.primary(), args->job.overrides, &warnings);
    if (!warnings.empty()) *ctx.err << config::format_issues(warnings);
    if (args->rank >= 0) set_env("RANK", std::to_string(args->rank));
    if (args->world_size >= 0) set_env("WORLD_SIZE", std::to_string(args->world_size));
    if (args->local_rank >= 0) set_env("LOCAL_RANK", std::to_string(args->local_rank));
    if (!args->master_addr.empty()) set_env("MASTER_ADDR", args->master_addr);
    if (args->master_port >= 0) set_env("MASTER_PORT", std::to_string(args->master_port));
    const auto& module = load_trainer_module();
    nlohmann::ordered_json request = {{"config", job}, {"sft", args->sft}, {"log_level", ctx.log_level}};
    VerlTrainerResult result{};
    const int code = module.run(request.dump().c_str(), &result);
    if (code != 0) throw Error(static_cast<ExitCode>(code), result.message, result.hint);
  });
}

}  // namespace verl::cli
