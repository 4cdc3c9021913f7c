// `verlctl env`: the environment trainer ranks on this machine get (NCCL/InfiniBand settings
// computed from its ports and its route to the head, verlctl's defaults, the spec's env), each
// variable with its source and reason, and the container run line when the spec names a
// runtime. Facts are read here, so a node other than this machine is answered with exit 4.
#include <algorithm>

#include "cli/app.h"
#include "cli/output.h"
#include "common/config.h"
#include "common/error.h"
#include "common/process.h"
#include "launcher/container.h"
#include "launcher/nccl_env.h"
#include "launcher/node_facts.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

struct EnvArgs {
  std::string file;
  std::string node;
  std::string head;
  std::string sysfs_root = "/sys";
  std::vector<std::string> overrides;
};

// The inner command the container line is shown wrapping: what an agent runs per rank.
const std::vector<std::string> kRankCommand = {"verlctl", "train"};

struct Target {
  std::string label;  // "this machine (host)" or "node-1 (host)"
  std::string host;   // what the container line's --nodelist would name
};

// --node NAME|HOST: the spec's node, which must be this machine.
Target pick_node(const Json& spec, const std::string& wanted, const launcher::NodeFactsReader& reader) {
  const std::string me = reader.hostname();
  const std::string short_me = me.substr(0, me.find('.'));
  if (wanted.empty()) return {"this machine (" + me + ")", short_me};
  const Json& nodes = spec.at("nodes");
  std::vector<std::string> known;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string name = "node-" + std::to_string(i);
    const std::string host = nodes[i].value("host", "");
    known.push_back(name + " (" + host + ")");
    if (wanted != name && wanted != host) continue;
    const bool local = spec.at("backend") == "local" || launcher::is_this_machine(host, reader.interfaces(), me);
    if (!local)
      throw Error(ExitCode::kUnreachable,
                  "node " + name + " (" + host + ") is not this machine: its NCCL environment depends on its own "
                  "InfiniBand ports, GIDs and route to the head, which only that node can read",
                  "run 'verlctl env' with the same spec on " + host + " itself (ssh " + host + " verlctl env ...)");
    return {name + " (" + host + ", this machine)", host.substr(0, host.find('.'))};
  }
  throw Error(ExitCode::kUsage, "--node " + wanted + ": no such node in the cluster spec",
              known.empty() ? "the spec lists no nodes; omit --node for this machine"
                            : "the spec's nodes: " + [&] {
                                std::string s;
                                for (const auto& k : known) s += (s.empty() ? "" : ", ") + k;
                                return s;
                              }());
}

Json facts_json(const launcher::NodeFacts& f) {
  Json ports = Json::array();
  for (const auto& p : f.hca_ports) {
    Json gids = Json::array();
    for (const auto& g : p.gids) gids.push_back({{"index", g.index}, {"gid", g.gid}, {"type", g.type}});
    ports.push_back({{"name", p.name()}, {"state", p.state}, {"link_layer", p.link_layer}, {"rate", p.rate},
                     {"gids", gids}});
  }
  return {{"sysfs_root", f.sysfs_root},
          {"gpus", f.gpus},
          {"hca_ports", ports},
          {"head_source_address", f.head_source_address.empty() ? Json(nullptr) : Json(f.head_source_address)}};
}

}  // namespace

void register_env(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<EnvArgs>();
  auto* cmd = app.add_subcommand(
      "env", "Show the environment trainer ranks get on this machine: NCCL/InfiniBand values with their reasons");
  cmd->add_option("-f,--file", a->file, "Cluster spec YAML (default: the embedded default)")->check(CLI::ExistingFile);
  cmd->add_option("--node", a->node, "The spec's node (name node-N or its host) to show; it must be this machine");
  cmd->add_option("--head", a->head, "Head address the ranks reach (default: the spec's head.host)");
  cmd->add_option("--sysfs-root", a->sysfs_root, "Where to read InfiniBand ports and GPUs (a fake tree for tests)")
      ->check(CLI::ExistingDirectory)
      ->default_str("/sys");
  cmd->add_option("overrides", a->overrides, "Cluster spec overrides: key.path=value, +new.key=value, ~key.path");
  cmd->footer(
      "Examples:\n  verlctl env\n  verlctl env -f cluster.yaml --head 10.0.0.1\n"
      "  verlctl env -f cluster.yaml env.NCCL_DEBUG=INFO container.runtime=docker container.image=verl:latest\n"
      "  verlctl env --sysfs-root /tmp/fake-sys -o json");
  cmd->callback([&ctx, a] {
    const Json spec = config::load_cluster(a->file, a->overrides);
    const launcher::SystemReader reader(a->sysfs_root);
    const Target target = pick_node(spec, a->node, reader);
    const std::string head = a->head.empty() ? spec.at("head").at("host").get<std::string>() : a->head;
    const auto facts = launcher::read_node_facts(reader, head);
    // The env's and the container's problems are reported together, as every config error is.
    std::string problems, hints;
    auto collect = [&](const Error& e) {
      problems += (problems.empty() ? "" : "\n") + std::string(e.what());
      hints += (hints.empty() ? "" : "; ") + e.hint();
    };
    launcher::EnvPlan plan;
    launcher::ContainerConfig container;
    try {
      plan = launcher::compute_env(facts, spec.contains("env") ? spec.at("env") : Json::object());
    } catch (const Error& e) {
      collect(e);
    }
    try {
      container = launcher::container_config(spec);
    } catch (const Error& e) {
      collect(e);
    }
    if (!problems.empty()) throw Error(ExitCode::kInvalidConfig, problems, hints);

    std::vector<std::string> run_line;
    if (container.runtime != launcher::ContainerRuntime::kNone) {
      launcher::ContainerHost host;
      host.gpus = facts.gpus > 0;
      host.infiniband = !facts.hca_ports.empty();
      host.slurm_node = target.host;
      run_line = launcher::container_argv(container, host, launcher::assignments(plan.vars), kRankCommand);
    }

    if (ctx.output == OutputFormat::kJson) {
      Json vars = Json::array();
      for (const auto& v : plan.vars)
        vars.push_back({{"name", v.name}, {"value", v.value}, {"source", launcher::source_name(v.source)},
                        {"reason", v.reason}});
      Json c = nullptr;
      if (!run_line.empty())
        c = {{"runtime", launcher::runtime_name(container.runtime)}, {"image", container.image},
             {"inner", kRankCommand}, {"argv", run_line}};
      print_json(*ctx.out, {{"node", target.label}, {"head", head}, {"facts", facts_json(facts)}, {"env", vars},
                            {"notes", plan.notes}, {"container", c}});
      return;
    }
    *ctx.err << "environment of trainer ranks on " << target.label << ", head " << head << ", sysfs "
             << facts.sysfs_root << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& v : plan.vars) rows.push_back({v.name, v.value, launcher::source_name(v.source), v.reason});
    print_table(*ctx.out, {"NAME", "VALUE", "SOURCE", "REASON"}, rows);
    for (const auto& n : plan.notes) *ctx.err << "note: " << n << "\n";
    if (!run_line.empty()) {
      *ctx.out << "\ncontainer run line (" << launcher::runtime_name(container.runtime)
               << "), shown wrapping '" << process::quote_argv(kRankCommand) << "':\n"
               << process::quote_argv(run_line) << "\n";
    }
  });
}

}  // namespace verl::cli
