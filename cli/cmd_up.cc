// `verlctl up`: bring a cluster up (the head, then one agent per node) and wait until every node
// has registered; `--dry-run` prints what would run instead. A cluster that is already up is
// left alone. The work is launcher::bring_up; this file parses and prints. A cluster that it
// started is then probed on every node (cli/cluster_probe.h) unless --skip-preflight.
#include <optional>

#include "cli/app.h"
#include "cli/cluster_probe.h"
#include "cli/head_target.h"
#include "cli/output.h"
#include "common/error.h"
#include "common/files.h"
#include "common/process.h"
#include "launcher/cluster.h"
#include "launcher/signals.h"
#include "probes/harness.h"

namespace verl::cli {
namespace {

// The preflight's tcp probe streams this much per node: enough for a steady rate on a
// 10-100 Gbit/s link, short enough for every `up`; `verlctl probe` measures longer (1 GiB).
constexpr int kPreflightTcpMib = 256;

struct UpArgs {
  std::string file;
  int local = 0;
  std::string name;
  double timeout_s = 60;
  bool dry_run = false;
  bool accept_new_host_keys = false;
  bool skip_preflight = false;
  std::vector<std::string> overrides;
};

nlohmann::ordered_json daemon_json(const launcher::LaunchSpec& d) {
  nlohmann::ordered_json j = {{"role", launcher::to_string(d.role)}, {"node", d.node}, {"host", d.host}, {"argv", d.argv}, {"env", d.env}, {"log", d.log}};
  if (!d.remote.empty()) j["remote"] = d.remote;
  if (!d.script.empty()) j["script"] = {{"path", d.script_path}, {"text", d.script}};
  return j;
}

}  // namespace

void register_up(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<UpArgs>();
  auto* cmd = app.add_subcommand("up", "Bring a cluster up: start its head and agents and wait until every node registered");
  cmd->add_option("-f,--file", a->file, "Cluster spec YAML (default: the embedded default spec)")->check(CLI::ExistingFile);
  auto* local = cmd->add_option("--local", a->local, "Run the head and N agents on this machine (backend local, no file needed)")
                    ->check(CLI::PositiveNumber);
  cmd->add_option("--name", a->name, "Cluster name (default: the spec's name, 'local')");
  cmd->add_option("--timeout", a->timeout_s, "Seconds to wait for the head and every node; exit 124 after")
      ->check(CLI::PositiveNumber)
      ->default_str("60");
  cmd->add_flag("--dry-run", a->dry_run, "Print the command lines and environment that would run; start nothing");
  cmd->add_flag("--accept-new-host-keys", a->accept_new_host_keys,
                "ssh: add the keys of hosts not yet in ssh.known_hosts to it, for this up only (a changed key is still refused)");
  cmd->add_flag("--skip-preflight", a->skip_preflight,
                "Do not run the preflight probes on every node once all registered (see verlctl-probe(1))");
  cmd->add_option("overrides", a->overrides, "Cluster spec overrides: key.path=value, +new.key=value, ~key.path");
  cmd->footer("Examples:\n  verlctl up --local 2\n  verlctl up --local 2 --name dev head.dashboard_port=18265 head.store_port=16379\n"
              "  verlctl up -f cluster.yaml --dry-run\n  verlctl up --local 2 --skip-preflight\n  verlctl up -f cluster.yaml backend=slurm slurm.nodes=4 slurm.partition=gpu\n  verlctl up -f ssh-cluster.yaml --accept-new-host-keys");
  cmd->callback([&ctx, a, local] {
    launcher::UpOptions o;
    o.file = a->file;
    o.overrides = a->overrides;
    o.accept_new_host_keys = a->accept_new_host_keys;
    if (local->count() > 0) o.local_nodes = a->local;
    o.name = a->name;
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(a->timeout_s * 1000));
    o.exe = process::self_exe();
    if (a->dry_run) {
      const auto plan = launcher::plan_up(o);
      if (ctx.output == OutputFormat::kJson) {
        nlohmann::ordered_json daemons = nlohmann::ordered_json::array();
        for (const auto& d : plan.daemons) daemons.push_back(daemon_json(d));
        nlohmann::ordered_json containers = nlohmann::ordered_json::array();
        for (const auto& c : plan.containers)
          containers.push_back({{"node", c.node}, {"argv", c.argv}, {"note", c.note}});
        print_json(*ctx.out, {{"dry_run", true},
                              {"name", plan.spec.name},
                              {"backend", launcher::backend_name(plan.spec.backend)},
                              {"state_dir", plan.state_dir},
                              {"daemons", daemons},
                              {"containers", containers}});
        return;
      }
      auto& out = *ctx.out;
      out << "# cluster '" << plan.spec.name << "', backend " << launcher::backend_name(plan.spec.backend)
          << ", state in " << plan.state_dir << "\n"
          << "# dry run: nothing is started. Each line below would run detached (its own session),\n"
          << "# with verlctl's environment plus the variables shown, output appended to its log.\n";
      for (const auto& d : plan.daemons) {
        out << "\n# " << (d.role == launcher::ProcessRole::kHead ? "head" : "agent " + d.node) << " on " << d.host << ", log " << d.log << "\n";
        if (!d.script.empty()) {
          // A batch backend (slurm): the script it writes, then the command that submits it.
          out << "# writes " << d.script_path << ":\n" << d.script;
          if (d.script.back() != '\n') out << "\n";
          out << "# end of " << d.script_path << "; submitted with:\n" << process::quote_argv(d.argv) << "\n";
          continue;
        }
        if (!d.remote.empty()) {
          // A remote daemon: the commands that run on its host over SSH, in order.
          for (const auto& line : d.remote) out << line << "\n";
          continue;
        }
        if (d.env.empty()) out << "# environment: inherited, nothing added\n";
        std::vector<std::string> line;
        if (!d.env.empty()) {
          line.push_back("env");
          line.insert(line.end(), d.env.begin(), d.env.end());
        }
        line.insert(line.end(), d.argv.begin(), d.argv.end());
        out << process::quote_argv(line) << "\n";
      }
      for (const auto& c : plan.containers) {
        out << "\n# ranks on " << c.node << " run in a " << launcher::runtime_name(plan.spec.container.runtime)
            << " container (container.runtime); rank 0 of a job job-N:\n";
        if (!c.note.empty()) out << "# " << c.note << "\n";
        out << process::quote_argv(c.argv) << "\n";
      }
      return;
    }
    const auto& interrupted = launcher::install_stop_flag();
    const auto r = launcher::bring_up(o, *ctx.err, &interrupted);
    const std::string url = "http://" + r.state.head_host + ":" + std::to_string(r.state.head_port);
    const bool already = r.outcome == launcher::UpOutcome::kAlreadyUp;
    // Preflight: the probes on every node through the head, once a new cluster is up. A failed
    // probe leaves the cluster up (exit 5 after the report) so that it can be looked at.
    std::optional<ClusterProbeReport> preflight;
    // SIGINT/SIGTERM after bring_up returned: what this run started is stopped, as the man page
    // says of an interrupted up (issue 16, case 7: the preflight left the cluster running).
    auto stop_if_interrupted = [&] {
      if (already || !interrupted) return;
      *ctx.err << "up: interrupted: stopping cluster " << r.state.name << ", which this run started\n";
      try {
        launcher::tear_down(r.state.name, std::chrono::milliseconds(3000), *ctx.err, process::self_exe());
      } catch (const Error& e) {
        *ctx.err << "up: cannot stop cluster " << r.state.name << ": " << e.what() << "\n";
      }
      throw Error(ExitCode::kInterrupted, "interrupted during the preflight of cluster " + r.state.name,
                  "what this run started is stopped");
    };
    if (!already && !a->skip_preflight) try {
      TargetArgs t;
      t.name = r.state.name;
      t.by_name = true;  // the cluster just brought up, never $VERLCTL_ADDRESS's
      const HeadTarget head = find_head(t);
      auto client = connect(head);
      const auto spec = nlohmann::ordered_json::parse(
          files::read_file(launcher::StatePaths(files::state_dir(r.state.name, /*create=*/false)).spec()));
      *ctx.err << "preflight: probing every node (--skip-preflight skips this)\n";
      preflight = run_cluster_probe(*client, head.address.host, spec, {"--tcp-mib", std::to_string(kPreflightTcpMib)},
                                    *ctx.err, &interrupted);
      if (ctx.output != OutputFormat::kJson) print_probe_report(*ctx.err, /*json=*/false, preflight->rows);
    } catch (const std::exception&) {
      stop_if_interrupted();
      throw;
    }
    stop_if_interrupted();
    auto check_preflight = [&] {
      if (preflight)
        check_probe_rows(preflight->rows, "the cluster stays up; the reports are kept at the head ('verlctl status " +
                                              preflight->job + "'); fix the node or the spec's probes.*, then "
                                              "'verlctl probe', or bring it up with --skip-preflight");
    };
    if (ctx.output == OutputFormat::kJson) {
      auto state = launcher::to_json(r.state);
      nlohmann::ordered_json out = {{"name", r.state.name},
                                    {"outcome", already ? "already_up" : "started"},
                                    {"head", url},
                                    {"state", state}};
      if (preflight) {
        out["preflight"] = probes::to_json(preflight->rows);
        out["preflight"]["job"] = preflight->job;
      }
      print_json(*ctx.out, out);
      check_preflight();
      return;
    }
    int agents = 0;
    for (const auto& p : r.state.processes) agents += p.role == launcher::ProcessRole::kAgent;
    *ctx.out << "cluster " << r.state.name << (already ? " was already up" : " is up") << ": head " << url << ", "
             << agents << " agents\n";
    check_preflight();
  });
}

}  // namespace verl::cli
