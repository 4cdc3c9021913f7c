// `verlctl head --state-dir DIR` (internal): the cluster's head, as `verlctl up` starts it. It
// reads the resolved spec and the token from the state directory that up wrote, serves the API
// until it is told to shut down (POST /api/shutdown) or gets SIGTERM/SIGINT, and exits 0.
// Beside it run the probe servers (tcp bandwidth, time) that `verlctl probe` measures nodes against.
#include <filesystem>

#include "cli/app.h"
#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "launcher/backend.h"
#include "launcher/cluster_state.h"
#include "launcher/container.h"
#include "launcher/head.h"
#include "launcher/signals.h"
#include "probes/clock_probe.h"
#include "probes/tcp_probe.h"

namespace verl::cli {

void register_head(CLI::App& app, Context& ctx) {
  (void)ctx;
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("head", "Run a cluster's head: HTTP API, node registry, jobs (internal: 'up' starts it)");
  cmd->group("Internal");
  cmd->add_option("--state-dir", *dir, "The cluster's state directory (cluster.json, token, state.db)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->footer("Internal: 'verlctl up' starts it, 'verlctl down' stops it. Example:\n"
              "  verlctl head --state-dir ~/.verlctl/local");
  cmd->callback([dir] {
    const launcher::StatePaths paths(std::filesystem::absolute(*dir).string());
    // up checked it already; a hand-edited cluster.json fails here, naming the key (exit 3).
    const launcher::ClusterSpec spec = launcher::read_cluster_spec(paths.spec());
    launcher::HeadOptions o;
    o.cluster_name = spec.name;
    o.backend = launcher::backend_name(spec.backend);
    o.bind_host = spec.head.bind_host;
    o.port = spec.head.dashboard_port;
    o.token = launcher::read_token(paths.token());
    o.db_path = paths.db();
    o.expected_nodes = launcher::node_names(spec);
    auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
    o.heartbeat_interval = ms(spec.head.heartbeat_interval_s);
    o.heartbeat_timeout = ms(spec.head.heartbeat_timeout_s);
    o.store_port = spec.head.store_port;
    o.spec_env = spec.env;
    // The section as it travels in start orders (the wire's JSON).
    if (spec.container.runtime != launcher::ContainerRuntime::kNone) o.container = nlohmann::ordered_json(spec).at("container");
    o.shutdown_grace = std::max(std::chrono::milliseconds(2000), 3 * o.heartbeat_interval);
    // The servers `verlctl probe` measures every node against (tcp bandwidth + RTT, clock
    // offset), on any free port of the head's bind address; /api/cluster names them.
    probes::TcpServer tcp_server(o.bind_host, 0);
    probes::TimeServer time_server(o.bind_host, 0);
    o.probe_ports = launcher::wire::ProbePorts{tcp_server.endpoint().port, time_server.endpoint().port};
    const auto& stop = launcher::install_stop_flag();
    launcher::Head head(o);
    head.start();
    head.wait(&stop);
    if (stop) log::Info() << "head stops on signal " << launcher::stop_signal();
    else log::Info() << "head shut down as asked";
    head.stop();
  });
}

}  // namespace verl::cli
