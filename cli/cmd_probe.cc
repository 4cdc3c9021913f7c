// `verlctl probe`: the preflight probes (probes/), judged against the cluster spec's probes.*
// thresholds, as one table or -o json; exit 5 when any row fails.
//   --local                this machine. What the probes need from the launcher is read here
//                          (a running head of this spec, the IB ports) so that probes/ depends
//                          on common/ alone. Without --head the head, if one runs, is this
//                          machine: tcp and clock run against in-process servers on 127.0.0.1.
//   --local --head HOST    what each node runs inside a cluster probe job: tcp, clock and ports
//                          against the head's probe servers (--probe-ports) and ports. nccl_inter
//                          runs as the rank that RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT name,
//                          which the head sets for every task of a probe job (one rank per node,
//                          launcher/job_controller.h); VERLCTL_NODE names the node in its rendezvous.
//   (neither)              every node of the running cluster, through the head (cli/cluster_probe.h).
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "cli/app.h"
#include "cli/cluster_probe.h"
#include "cli/head_target.h"
#include "cli/output.h"
#include "common/config.h"
#include "common/error.h"
#include "common/files.h"
#include "common/job_config_view.h"
#include "common/log.h"
#include "launcher/cluster_state.h"
#include "launcher/node_facts.h"
#include "launcher/signals.h"
#include "probes/clock_probe.h"
#include "probes/harness.h"
#include "probes/nccl_probe.h"
#include "probes/tcp_probe.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

struct ProbeArgs {
  bool local = false;
  std::string file;
  std::string checkpoint_dir;
  int tcp_mib = 1024;
  std::string head;         // --local inside a cluster probe: the head's host
  std::string probe_ports;  // TCP:TIME, the head's probe servers
  std::string only;         // comma list of probe names
  std::string sizes;        // the NCCL sweep
  bool ring = false;
  double rendezvous_timeout_s = 120;
  bool exit_zero = false;
  int matmul_n = 8192;
  std::vector<std::string> overrides;
  TargetArgs target;
};

// The probes named by --only, in report order; every name must be a probe.
std::vector<probes::Probe> chosen_probes(const std::string& only) {
  auto all = probes::local_probes();
  if (only.empty()) return all;
  std::set<std::string> want;
  std::stringstream in(only);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) want.insert(name);
  std::string known;
  for (const auto& p : all) known += (known.empty() ? "" : ", ") + p.descriptor.name;
  for (const auto& w : want) {
    bool found = false;
    for (const auto& p : all) found = found || p.descriptor.name == w;
    if (!found) throw Error(ExitCode::kUsage, "--only: no probe named '" + w + "'", "the probes are: " + known);
  }
  std::vector<probes::Probe> out;
  for (auto& p : all)
    if (want.count(p.descriptor.name)) out.push_back(std::move(p));
  return out;
}

// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, as the head hands them to every task of a job (a
// cluster probe job too: one rank per node); nullopt when WORLD_SIZE is unset, or 1 without the
// others (a shell that merely has WORLD_SIZE=1: this node alone).
std::optional<probes::World> world_from_env() {
  auto get = [](const char* k) { const char* v = std::getenv(k); return v ? std::string(v) : std::string(); };
  const std::string size = get("WORLD_SIZE"), rank = get("RANK"), addr = get("MASTER_ADDR"), port = get("MASTER_PORT");
  if (size.empty()) return std::nullopt;
  const bool all = !rank.empty() && !addr.empty() && !port.empty();
  auto number = [](const std::string& text, int lo, int hi) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    return !text.empty() && end && *end == '\0' && v >= lo && v <= hi ? static_cast<int>(v) : -1;
  };
  const int n = number(size, 1, 1 << 20);
  if (n == 1 && !all) return std::nullopt;
  if (n < 1 || !all)
    throw Error(ExitCode::kUsage,
                "WORLD_SIZE=" + size + (n < 1 ? " is not a positive number" : " but RANK, MASTER_ADDR or MASTER_PORT is unset"),
                "a job's launcher sets all four; unset WORLD_SIZE to probe this node alone");
  const int r = number(rank, 0, n - 1), p = number(port, 1, 65535);
  if (r < 0 || p < 0)
    throw Error(ExitCode::kUsage,
                (r < 0 ? "RANK=" + rank + " is not in 0.." + std::to_string(n - 1) + " (WORLD_SIZE=" + size + ")"
                       : "MASTER_PORT=" + port + " is not a port (1-65535)"),
                "a job's launcher sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT together");
  return probes::World{r, n, {addr, p}};
}

std::pair<int, int> parse_probe_ports(const std::string& text) {
  const auto colon = text.find(':');
  const int tcp = colon == std::string::npos ? 0 : std::atoi(text.substr(0, colon).c_str());
  const int time = colon == std::string::npos ? 0 : std::atoi(text.substr(colon + 1).c_str());
  if (tcp <= 0 || tcp > 65535 || time <= 0 || time > 65535)
    throw Error(ExitCode::kUsage, "--probe-ports '" + text + "' is not TCP:TIME",
                "the head's probe servers, as GET /api/cluster's probe_ports names them, e.g. 40123:40124");
  return {tcp, time};
}

// The head of the spec's cluster when `verlctl up` recorded it up and its process still runs.
std::optional<launcher::ClusterState> running_head(const Json& spec) {
  try {
    const std::string dir = files::state_dir(spec.at("name").get<std::string>(), /*create=*/false);
    auto state = launcher::read_state(launcher::StatePaths(dir));
    if (!state || state->status != launcher::ClusterStatus::kUp) return std::nullopt;
    for (const auto& p : state->processes)
      if (p.role == launcher::ProcessRole::kHead && launcher::is_same_process(p)) return state;
  } catch (const Error& e) {
    log::Warn() << "probe: cannot read the cluster's state, probing as if no head runs: " << e.what();
  }
  return std::nullopt;
}

std::string default_checkpoint_dir() {
  const Json job = config::default_job();
  const std::string dir = JobConfigView(job).default_local_dir();
  return dir.empty() ? "." : dir;
}

}  // namespace

void register_probe(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<ProbeArgs>();
  auto* cmd = app.add_subcommand(
      "probe", "Run the preflight probes on this machine or every node of a running cluster and judge them");
  cmd->add_flag("--local", a->local, "Probe this machine only (default: every node of the running cluster)");
  cmd->add_option("-f,--file", a->file, "Cluster spec YAML: probes.* thresholds, head, nodes (default: the embedded default)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--checkpoint-dir", a->checkpoint_dir,
                  "Where checkpoints go, for the disk probe (default: the job's trainer.default_local_dir)");
  cmd->add_option("--tcp-mib", a->tcp_mib, "MiB the tcp probe streams for its bandwidth")
      ->check(CLI::Range(1, 1 << 20))
      ->default_str("1024");
  cmd->add_option("--only", a->only, "Run only these probes (comma list, e.g. shm,disk,tcp)");
  cmd->add_option("--sizes", a->sizes, "NCCL sizes swept: MIN:MAX[:FACTOR] or a list (default 8:1G:8)");
  cmd->add_flag("--ring", a->ring, "NCCL_ALGO=Ring for the NCCL probes: the ring's links alone (the network)");
  cmd->add_option("--rendezvous-timeout", a->rendezvous_timeout_s,
                  "Seconds nccl_inter's ranks wait for each other at rank 0 before failing")
      ->check(CLI::Range(1.0, 3600.0))
      ->default_str("120");
  cmd->add_option("--matmul-n", a->matmul_n, "The matmul probe's n (an n^3 bf16 product)")
      ->check(CLI::Range(64, 65536))
      ->default_str("8192");
  auto* head_opt = cmd->add_option("--head", a->head, "With --local: probe against the head at HOST (what a cluster probe runs on each node)");
  cmd->add_option("--probe-ports", a->probe_ports, "With --head: the head's probe servers TCP:TIME (GET /api/cluster probe_ports)")
      ->needs(head_opt);
  head_opt->needs("--local");
  cmd->add_flag("--exit-zero", a->exit_zero,
                "With --local: exit 0 even when a row fails (the report carries every verdict; cluster probes' nodes run so)")
      ->needs("--local");
  add_target_options(cmd, a->target);
  cmd->add_option("overrides", a->overrides, "Cluster spec overrides: key.path=value, e.g. probes.min_shm_gib=16");
  cmd->footer(
      "Examples:\n  verlctl probe --local\n  verlctl probe --local -f cluster.yaml --checkpoint-dir /data/ckpt -o json\n"
      "  verlctl probe --local probes.min_tcp_gbps=10 --tcp-mib 4096\n"
      "  verlctl probe --local --only h2d,d2h,d2d,matmul,nccl_intra --sizes 1M:1G:4 --ring\n"
      "  verlctl probe --only nccl_intra,nccl_inter --sizes 1M:1G:4 --ring --rendezvous-timeout 300\n"
      "  verlctl up --local 2 --skip-preflight && verlctl probe --tcp-mib 64 probes.min_shm_gib=1");
  cmd->callback([&ctx, a, cmd] {
    std::string file = a->file;
    if (!a->local && file.empty()) {
      // The running cluster's own spec (as `up` resolved it) unless another is named: its
      // thresholds and the GPUs it gives the nodes. JSON is YAML, so the one loader reads it.
      const std::string name = cmd->get_option("--name")->count() ? a->target.name : config::load_cluster("", a->overrides).at("name").get<std::string>();
      if (a->target.address.empty()) {
        const launcher::StatePaths paths(files::state_dir(name, /*create=*/false));
        if (std::filesystem::exists(paths.spec())) file = paths.spec();
      }
    }
    const Json spec = config::load_cluster(file, a->overrides);
    const bool json = ctx.output == OutputFormat::kJson;
    if (!a->sizes.empty()) probes::parse_size_sweep(a->sizes);  // a usage error here, not on every node
    const auto chosen = chosen_probes(a->only);

    if (!a->local) {
      TargetArgs target = a->target;
      if (cmd->get_option("--name")->count() == 0) target.name = spec.at("name").get<std::string>();
      target.by_name = target.address.empty() && (cmd->get_option("--name")->count() > 0 || !a->file.empty());
      const HeadTarget head = find_head(target);
      auto client = connect(head);
      std::vector<std::string> node_args = {"--tcp-mib", std::to_string(a->tcp_mib), "--matmul-n",
                                            std::to_string(a->matmul_n)};
      if (!a->only.empty()) node_args.insert(node_args.end(), {"--only", a->only});
      if (!a->sizes.empty()) node_args.insert(node_args.end(), {"--sizes", a->sizes});
      if (a->ring) node_args.push_back("--ring");
      if (cmd->get_option("--rendezvous-timeout")->count())
        node_args.insert(node_args.end(), {"--rendezvous-timeout", std::to_string(a->rendezvous_timeout_s)});
      if (!a->checkpoint_dir.empty()) node_args.insert(node_args.end(), {"--checkpoint-dir", a->checkpoint_dir});
      const auto rep = run_cluster_probe(*client, head.address.host, spec, node_args, *ctx.err,
                                         &launcher::install_stop_flag());
      print_probe_report(*ctx.out, json, rep.rows, Json{{"job", rep.job}, {"cluster", head.cluster}});
      check_probe_rows(rep.rows, "see the DETAIL of the failed rows; the reports stay at the head: 'verlctl status " +
                                     rep.job + "'; thresholds are the spec's probes.*");
      return;
    }

    const launcher::SystemReader reader;
    probes::Context pc;
    pc.spec = spec;
    // A cluster probe's task: the cluster's name for this node (two agents may share a host).
    const char* node = std::getenv("VERLCTL_NODE");
    pc.node = node && *node ? node : reader.hostname();
    pc.checkpoint_dir = a->checkpoint_dir.empty() ? default_checkpoint_dir() : a->checkpoint_dir;
    pc.tcp_mib = a->tcp_mib;
    pc.matmul_n = a->matmul_n;
    pc.nccl_ring = a->ring;
    if (!a->sizes.empty()) pc.nccl_sizes = probes::parse_size_sweep(a->sizes);
    pc.world = world_from_env();
    pc.rendezvous_timeout = std::chrono::milliseconds(static_cast<int64_t>(a->rendezvous_timeout_s * 1000));
    for (const auto& p : launcher::read_hca_ports(reader.sysfs_root()))
      pc.ib_ports.push_back({p.name(), p.state, p.link_layer, p.rate});

    const Json& head = spec.at("head");
    std::optional<probes::TimeServer> time_server;
    std::optional<probes::TcpServer> tcp_server;
    if (!a->head.empty()) {
      // Inside a cluster probe: everything against the head, as this node reaches it.
      pc.dashboard = probes::Endpoint{a->head, head.at("dashboard_port").get<int>()};
      pc.store = probes::Endpoint{a->head, head.at("store_port").get<int>()};
      if (!a->probe_ports.empty()) {
        const auto [tcp, time] = parse_probe_ports(a->probe_ports);
        pc.tcp_server = probes::Endpoint{a->head, tcp};
        pc.time_server = probes::Endpoint{a->head, time};
        pc.time_peer = "head " + a->head;
      }
    } else {
      // The head, if any, is this machine; its clock is ours, and loopback is the path.
      tcp_server.emplace("127.0.0.1", 0);
      pc.tcp_server = tcp_server->endpoint();
      const std::string head_host = head.at("host").get<std::string>();
      if (running_head(spec)) {
        pc.dashboard = probes::Endpoint{head_host, head.at("dashboard_port").get<int>()};
        pc.store = probes::Endpoint{head_host, head.at("store_port").get<int>()};
        time_server.emplace("127.0.0.1", 0);
        pc.time_server = time_server->endpoint();
        pc.time_peer = "head " + head_host + " (this machine, over loopback)";
      }
    }

    const auto rows = probes::run_probes(chosen, pc);
    print_probe_report(*ctx.out, json, rows);
    if (a->exit_zero) return;
    check_probe_rows(rows, "see the DETAIL of the failed rows; thresholds are the cluster spec's probes.* "
                           "(e.g. probes.min_shm_gib=1)");
  });
}

}  // namespace verl::cli
