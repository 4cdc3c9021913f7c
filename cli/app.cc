#include "cli/app.h"

#include <algorithm>
#include <iostream>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/hydra.h"
#include "common/log.h"

namespace verl::cli {

std::string JobFileArgs::primary() const {
  if (config_name.empty() && config_path.empty()) return file;
  if (!file.empty())
    throw Error(ExitCode::kUsage, "-f and --config-path/--config-name both name a job config",
                "give one of them: -f job.yaml, or --config-path DIR --config-name NAME (Hydra's way)");
  const std::string primary = config::hydra_primary(config_path, config_name);
  if (!std::filesystem::exists(primary))
    throw Error(ExitCode::kInvalidConfig, "no config '" + primary + "' (from --config-path/--config-name)",
                "--config-path is the folder, --config-name the file in it (ppo_trainer or ppo_trainer.yaml)");
  return primary;
}

void add_job_file_options(CLI::App* cmd, JobFileArgs& a) {
  cmd->add_option("-f,--file", a.file, "Job config YAML (default: the embedded default job)")->check(CLI::ExistingFile);
  cmd->add_option("--config-path", a.config_path, "Hydra: the folder of the primary config (with --config-name)");
  cmd->add_option("--config-name", a.config_name, "Hydra: the primary config in --config-path, its defaults lists composed");
  cmd->add_option("overrides", a.overrides, "Overrides: key.path=value, +new.key=value, ~key.path");
}

std::unique_ptr<CLI::App> build_app(Context& ctx) {
  auto app = std::make_unique<CLI::App>(
      "verlctl runs RL post-training (PPO/GRPO) of language models on a cluster:\n"
      "bring up nodes, check them, run the embedded trainer, follow its progress.",
      "verlctl");
  app->require_subcommand(0, 1);
  app->fallthrough();  // global options may follow the command: `verlctl config show -o json`
  app->set_help_all_flag("--help-all", "Show help for every command");
  app->add_option("-o,--output", ctx.output_name, "Output format of data on stdout")
      ->check(CLI::IsMember({"text", "json"}))
      ->default_str("text");
  app->add_option("--log-level", ctx.log_level, "Diagnostics on stderr: debug|info|warn|error|off")
      ->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}))
      ->default_str("info");
  app->parse_complete_callback([&ctx] {
    ctx.output = ctx.output_name == "json" ? OutputFormat::kJson : OutputFormat::kText;
    log::set_level(log::parse_level(ctx.log_level));
  });
  register_version(*app, ctx);
  register_help(*app, ctx);
  register_config(*app, ctx);
  register_train(*app, ctx);
  register_up(*app, ctx);
  register_down(*app, ctx);
  register_status(*app, ctx);
  register_submit(*app, ctx);
  register_jobs(*app, ctx);
  register_logs(*app, ctx);
  register_stop(*app, ctx);
  register_smoke(*app, ctx);
  register_head(*app, ctx);
  register_agent(*app, ctx);
  register_env(*app, ctx);
  register_probe(*app, ctx);
  register_tokenize(*app, ctx);
  register_job_preflight(*app, ctx);
  app->footer("Run 'verlctl COMMAND --help' for a command's options, 'man verlctl' for more.");
  return app;
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  auto app = build_app(ctx);
  std::vector<std::string> rest = args;
  // `submit ... -- CMD [ARGS...]`: the command is not verlctl's to parse; CLI11 would read its
  // words as overrides (and its options as submit's).
  const auto dashes = std::find(rest.begin(), rest.end(), "--");
  if (dashes != rest.end() && std::find(rest.begin() + (rest.empty() ? 0 : 1), dashes, "submit") != dashes) {
    ctx.command = std::vector<std::string>(dashes + 1, rest.end());
    rest.erase(dashes, rest.end());
  }
  std::vector<std::string> rev(rest.rbegin(), rest.rend() - (rest.empty() ? 0 : 1));
  try {
    // CLI11 reads a bare "++" as the end of a subcommand's arguments and drops it: an override
    // typed without its key would pass unseen (issue 16, case 9).
    for (size_t i = 1; i < args.size() && args[i] != "--"; ++i)
      if (args[i] == "++")
        throw Error(ExitCode::kUsage, "'++' on its own is not an override (argument " + std::to_string(i) + ")",
                    "write ++key.path=value to add or replace a key, key.path=value to set one");
    app->parse(rev);
    if (app->get_subcommands().empty()) {
      out << app->help();
    }
    return ctx.exit_code;
  } catch (const CLI::CallForHelp&) {
    out << app->help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app->help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help for the failing subcommand on --help; everything else is a usage error.
    if (e.get_exit_code() == 0) return 0;
    err << "verlctl: error: " << e.what() << "\n"
        << "hint: run 'verlctl --help' or 'verlctl COMMAND --help'\n";
    return static_cast<int>(ExitCode::kUsage);
  } catch (const Error& e) {
    err << "verlctl: error: " << e.what() << "\n";
    if (!e.hint().empty()) err << "hint: " << e.hint() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    err << "verlctl: error: " << e.what() << "\n"
        << "hint: this is a bug in verlctl; please report it with the command line\n";
    return static_cast<int>(ExitCode::kFailure);
  }
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return run(args, std::cout, std::cerr);
}

}  // namespace verl::cli
