// `verlctl probe --local`: the preflight probes on this machine (probes/), judged against the
// cluster spec's probes.* thresholds, as one table or -o json; exit 5 when any row fails.
// What the probes need from the launcher is read here (the head this spec's cluster runs, the
// IB ports) so that probes/ depends on common/ alone. For --local the head, when one runs, is
// on this machine: the clock and tcp probes run against in-process servers on 127.0.0.1, the
// ports probe against the spec's head.host. Probing a running cluster through its agents is not
// built yet and says so.
#include <optional>

#include "cli/app.h"
#include "cli/output.h"
#include "common/config.h"
#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "launcher/cluster_state.h"
#include "launcher/node_facts.h"
#include "probes/clock_probe.h"
#include "probes/harness.h"
#include "probes/tcp_probe.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

struct ProbeArgs {
  bool local = false;
  std::string file;
  std::string checkpoint_dir;
  int tcp_mib = 1024;
  std::vector<std::string> overrides;
};

// The head of the spec's cluster when `verlctl up` recorded it up and its process still runs.
std::optional<launcher::ClusterState> running_head(const Json& spec) {
  try {
    const std::string dir = files::state_dir(spec.at("name").get<std::string>(), /*create=*/false);
    auto state = launcher::read_state(launcher::StatePaths(dir));
    if (!state || state->status != "up") return std::nullopt;
    for (const auto& p : state->processes)
      if (p.role == "head" && launcher::is_same_process(p)) return state;
  } catch (const Error& e) {
    log::Warn() << "probe: cannot read the cluster's state, probing as if no head runs: " << e.what();
  }
  return std::nullopt;
}

std::string default_checkpoint_dir() {
  const Json job = config::default_job();
  const Json* dir = config::find(job, "trainer.default_local_dir");
  return dir && dir->is_string() ? dir->get<std::string>() : ".";
}

}  // namespace

void register_probe(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<ProbeArgs>();
  auto* cmd = app.add_subcommand(
      "probe", "Run the preflight probes (shm, disk, clock, ports, tcp, versions, gpu, ib) and judge them");
  cmd->add_flag("--local", a->local, "Probe this machine (the only mode so far)");
  cmd->add_option("-f,--file", a->file, "Cluster spec YAML: probes.* thresholds, head, nodes (default: the embedded default)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--checkpoint-dir", a->checkpoint_dir,
                  "Where checkpoints go, for the disk probe (default: the job's trainer.default_local_dir)");
  cmd->add_option("--tcp-mib", a->tcp_mib, "MiB the tcp probe streams for its bandwidth")
      ->check(CLI::Range(1, 1 << 20))
      ->default_str("1024");
  cmd->add_option("overrides", a->overrides, "Cluster spec overrides: key.path=value, e.g. probes.min_shm_gib=16");
  cmd->footer(
      "Examples:\n  verlctl probe --local\n  verlctl probe --local -f cluster.yaml --checkpoint-dir /data/ckpt -o json\n"
      "  verlctl probe --local probes.min_tcp_gbps=10 --tcp-mib 4096");
  cmd->callback([&ctx, a] {
    if (!a->local)
      throw Error(ExitCode::kUsage,
                  "probing a running cluster through its agents is not built yet: only --local (this machine) is",
                  "run 'verlctl probe --local -f cluster.yaml' on each node, e.g. ssh HOST verlctl probe --local");
    const Json spec = config::load_cluster(a->file, a->overrides);
    const launcher::SystemReader reader;

    probes::Context pc;
    pc.spec = spec;
    pc.node = reader.hostname();
    pc.checkpoint_dir = a->checkpoint_dir.empty() ? default_checkpoint_dir() : a->checkpoint_dir;
    pc.tcp_mib = a->tcp_mib;
    for (const auto& p : launcher::read_hca_ports(reader.sysfs_root()))
      pc.ib_ports.push_back({p.name(), p.state, p.link_layer, p.rate});

    // --local: the head, if any, is this machine; its clock is ours, and loopback is the path.
    std::optional<probes::TimeServer> time_server;
    probes::TcpServer tcp_server("127.0.0.1", 0);
    pc.tcp_server = tcp_server.endpoint();
    const Json& head = spec.at("head");
    const std::string head_host = head.at("host").get<std::string>();
    if (running_head(spec)) {
      pc.dashboard = probes::Endpoint{head_host, head.at("dashboard_port").get<int>()};
      pc.store = probes::Endpoint{head_host, head.at("store_port").get<int>()};
      time_server.emplace("127.0.0.1", 0);
      pc.time_server = time_server->endpoint();
      pc.time_peer = "head " + head_host + " (this machine, over loopback)";
    }

    const auto rows = probes::run_probes(probes::local_probes(), pc);
    if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, probes::to_json(rows));
    else print_table(*ctx.out, probes::table_header(), probes::table_cells(rows));
    if (probes::exit_code(rows) != ExitCode::kOk)
      throw Error(ExitCode::kCheckFailed, "probe check failed: " + probes::failed_names(rows),
                  "see the DETAIL of the failed rows; thresholds are the cluster spec's probes.* "
                  "(e.g. probes.min_shm_gib=1)");
  });
}

}  // namespace verl::cli
