#include "cli/head_target.h"

#include <cstdlib>

#include "common/error.h"
#include "common/files.h"
#include "launcher/cluster_state.h"

namespace verl::cli {

void add_target_options(CLI::App* cmd, TargetArgs& a) {
  cmd->add_option("--name", a.name, "Cluster name (its state directory under $VERLCTL_HOME)")
      ->default_str("local")
      ->each([&a](const std::string&) { a.by_name = true; });
  cmd->add_option("--address", a.address, "The head's HOST:PORT instead of a cluster name (or $VERLCTL_ADDRESS)");
  cmd->add_option("--token-file", a.token_file, "File with the head's token, with --address (or $VERLCTL_TOKEN)");
}

bool targets_address(const TargetArgs& a) {
  return !a.address.empty() || (!a.by_name && std::getenv("VERLCTL_ADDRESS") && *std::getenv("VERLCTL_ADDRESS"));
}

HeadTarget find_head(const TargetArgs& a) {
  HeadTarget t;
  if (targets_address(a)) {
    const std::string address = a.address.empty() ? std::getenv("VERLCTL_ADDRESS") : a.address;
    t.address = launcher::HeadAddress::parse(address);
    t.cluster = address;
    if (!a.token_file.empty()) t.token = launcher::read_token(a.token_file);
    else if (std::getenv("VERLCTL_TOKEN")) t.token = std::getenv("VERLCTL_TOKEN");
    if (t.token.empty())
      throw Error(ExitCode::kUsage, "the head at " + address + " needs its token",
                  "pass --token-file FILE or set VERLCTL_TOKEN (the token is $VERLCTL_HOME/<cluster>/token)");
    return t;
  }
  const std::string dir = files::state_dir(a.name, /*create=*/false);
  const launcher::StatePaths paths(dir);
  const auto state = launcher::read_state(paths);
  if (!state || state->status == launcher::ClusterStatus::kDown || state->status == launcher::ClusterStatus::kFailed)
    throw Error(ExitCode::kUnreachable,
                "no cluster '" + a.name + "' is up" +
                    (state ? " (it is " + std::string(launcher::to_string(state->status)) + ")" : " (nothing under " + dir + ")"),
                "bring one up with 'verlctl up --local 1" + (a.name == "local" ? std::string() : " --name " + a.name) +
                    "', or name another with --name or --address");
  t.cluster = a.name;
  t.address.host = state->head_host;
  t.address.port = state->head_port;
  t.token = launcher::read_token(paths.token());
  return t;
}

std::unique_ptr<launcher::HeadClient> connect(const HeadTarget& t, std::chrono::milliseconds timeout) {
  return std::make_unique<launcher::HeadClient>(t.address, t.token, timeout);
}

}  // namespace verl::cli
