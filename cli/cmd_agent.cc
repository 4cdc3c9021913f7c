// `verlctl agent` (internal): one node's agent, as `verlctl up` starts it. It registers this
// machine's resources with the head, heartbeats, and exits when the head says shutdown (0), on
// SIGTERM/SIGINT (0, after telling the head it leaves), or when the head has been unreachable
// for --exit-after seconds (4).
#include <filesystem>

#include "cli/app.h"
#include "common/process.h"
#include "common/error.h"
#include "common/log.h"
#include "launcher/agent.h"
#include "launcher/cluster_state.h"
#include "launcher/signals.h"

namespace verl::cli {
namespace {

struct AgentArgs {
  std::string head;
  std::string token_file;
  std::string node;
  double heartbeat_interval_s = 1.0;
  double exit_after_s = 60.0;
  std::string work_dir;
  std::string resources;      // nodes[].resources as JSON
  std::string resources_key;  // its key path in the spec, for errors
};

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

}  // namespace

void register_agent(CLI::App& app, Context& ctx) {
  (void)ctx;
  auto a = std::make_shared<AgentArgs>();
  auto* cmd = app.add_subcommand("agent", "Run a node's agent: register, heartbeat, run ranks (internal: 'up' starts it)");
  cmd->group("Internal");
  cmd->add_option("--head", a->head, "The head's address HOST:PORT")->required();
  cmd->add_option("--token-file", a->token_file, "File holding the head's bearer token")->required()->check(CLI::ExistingFile);
  cmd->add_option("--node", a->node, "This node's name in the cluster")->required();
  cmd->add_option("--heartbeat-interval", a->heartbeat_interval_s, "Seconds between heartbeats")
      ->check(CLI::Range(0.05, 60.0))
      ->default_str("1");
  cmd->add_option("--exit-after", a->exit_after_s, "Exit when the head has been unreachable this many seconds")
      ->check(CLI::Range(1.0, 86400.0))
      ->default_str("60");
  cmd->add_option("--work-dir", a->work_dir,
                  "Where the jobs' directories go (default: the token file's directory, the cluster's state)");
  cmd->add_option("--resources", a->resources,
                  "Declared resources as JSON {cpus, gpus, gpu_ids} (the spec's nodes[].resources), over the detected");
  cmd->add_option("--resources-key", a->resources_key, "The spec key the declared resources came from, for errors");
  cmd->footer("Internal: 'verlctl up' starts it. Example:\n"
              "  verlctl agent --head 127.0.0.1:8265 --token-file ~/.verlctl/local/token --node node-0");
  cmd->callback([a] {
    launcher::AgentOptions o;
    o.head = launcher::HeadAddress::parse(a->head);
    o.token = launcher::read_token(a->token_file);
    o.node_name = a->node;
    o.heartbeat_interval = ms(a->heartbeat_interval_s);
    o.exit_after = ms(a->exit_after_s);
    o.resources = launcher::detect_resources();
    if (!a->resources.empty()) {
      const auto declared = nlohmann::ordered_json::parse(a->resources, nullptr, /*allow_exceptions=*/false);
      if (!declared.is_object())
        throw Error(ExitCode::kUsage, "--resources is not a JSON object: " + a->resources, "see nodes[].resources");
      o.resources = launcher::declare(o.resources, launcher::declared_resources({{"resources", declared}}),
                                      o.node_name + (a->resources_key.empty() ? "" : " (" + a->resources_key + ")"));
    }
    o.work_dir = std::filesystem::absolute(
                     a->work_dir.empty() ? std::filesystem::path(a->token_file).parent_path() : std::filesystem::path(a->work_dir))
                     .lexically_normal()
                     .string();
    if (!o.work_dir.empty() && o.work_dir.back() == '/') o.work_dir.pop_back();
    o.exe = process::self_exe();
    log::Info() << "agent " << o.node_name << ": " << o.resources.cpus << " CPUs, "
                << launcher::format_bytes(o.resources.memory_bytes) << ", " << o.resources.gpus << " GPUs, "
                << o.resources.ib_ports.size() << " IB ports; head " << o.head.url();
    const auto& stop = launcher::install_stop_flag();
    const auto end = launcher::run_agent(o, stop);
    log::Info() << "agent " << o.node_name << " exits: " << launcher::agent_exit_name(end);
    if (end == launcher::AgentExit::kHeadLost)
      throw Error(ExitCode::kUnreachable, "the head at " + o.head.url() + " was unreachable for " +
                                              std::to_string(static_cast<int>(a->exit_after_s)) + " s",
                  "the cluster is gone; 'verlctl up' brings it up again");
  });
}

}  // namespace verl::cli
