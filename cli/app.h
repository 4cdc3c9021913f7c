// The command tree. build_app() registers every command on a CLI11 App; run() parses argv,
// runs the chosen command and turns every verl::Error into its message, hint and exit code.
// Commands write data to ctx.out (stdout) and diagnostics to ctx.err (stderr), so tests can
// run them in-process with string streams.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace verl::cli {

enum class OutputFormat { kText, kJson };

struct Context {
  OutputFormat output = OutputFormat::kText;
  std::string output_name = "text";
  std::string log_level = "info";
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  int exit_code = 0;  // a command that succeeds with a non-zero status (lint --strict) sets it
  // `verlctl submit [options] -- CMD [ARGS...]`: what follows the "--" (split off before CLI11
  // parses, which would take it as positionals); set, possibly empty, only when there was one.
  std::optional<std::vector<std::string>> command;
};

std::unique_ptr<CLI::App> build_app(Context& ctx);

// Runs verlctl with args (args[0] is the program name). Returns the process exit code.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int run(int argc, char** argv);

// One registration function per command file (cli/cmd_<name>.cc).
// A job config given the verl way: -f FILE, or Hydra's --config-path DIR --config-name NAME
// (composed from the folder's defaults lists, as `python -m verl.trainer.main_ppo` does), and
// the overrides put over it (positional key.path=value, +new.key=value, ~key.path).
struct JobFileArgs {
  std::string file, config_path, config_name;
  std::vector<std::string> overrides;
  // The primary config file ("" for the embedded default); throws kUsage on -f with --config-name.
  std::string primary() const;
};
// -f, --config-path, --config-name and the positional overrides, the same in every command.
void add_job_file_options(CLI::App* cmd, JobFileArgs& a);

void register_version(CLI::App& app, Context& ctx);
void register_help(CLI::App& app, Context& ctx);
void register_config(CLI::App& app, Context& ctx);
void register_train(CLI::App& app, Context& ctx);
void register_up(CLI::App& app, Context& ctx);
void register_down(CLI::App& app, Context& ctx);
void register_status(CLI::App& app, Context& ctx);
void register_head(CLI::App& app, Context& ctx);
void register_agent(CLI::App& app, Context& ctx);
void register_env(CLI::App& app, Context& ctx);
void register_probe(CLI::App& app, Context& ctx);
void register_submit(CLI::App& app, Context& ctx);
void register_jobs(CLI::App& app, Context& ctx);
void register_logs(CLI::App& app, Context& ctx);
void register_stop(CLI::App& app, Context& ctx);
void register_smoke(CLI::App& app, Context& ctx);
void register_tokenize(CLI::App& app, Context& ctx);
void register_job_preflight(CLI::App& app, Context& ctx);

}  // namespace verl::cli
