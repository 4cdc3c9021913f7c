// `verlctl config show|validate|lint`: resolve a job config or cluster spec the way every
// other command will (defaults <- file <- overrides), and print it, check it, or advise on it.
#include <algorithm>

#include "cli/app.h"
#include "cli/output.h"
#include "common/config.h"
#include "common/error.h"
#include "data/rows.h"

namespace verl::cli {
namespace {

struct ConfigArgs {
  JobFileArgs job;
  std::string file;  // job.primary(), set when the command runs
  std::string kind = "job";
  std::string cluster_file;
  double gpu_memory_gib = 80;
  bool strict = false;
};

config::Kind kind_of(const ConfigArgs& a) { return a.kind == "cluster" ? config::Kind::kCluster : config::Kind::kJob; }

nlohmann::ordered_json issues_json(const std::vector<config::Issue>& issues) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& i : issues) {
    arr.push_back({{"severity", i.severity == config::Severity::kError ? "error" : "warning"},
                   {"path", i.path},
                   {"message", i.message},
                   {"hint", i.hint},
                   {"where", i.where.str()}});
  }
  return arr;
}

// data.train_files / val_files must be files we can read: probe each (footer or first row, and the
// prompt column) so that a bad file shows here with file:line or file: column, not at `train`.
void check_data_files(config::Document& doc) {
  const auto& data = doc.value.contains("data") ? doc.value["data"] : config::Json();
  if (!data.is_object()) return;
  const std::string prompt_key =
      data.contains("prompt_key") && data["prompt_key"].is_string() ? data["prompt_key"].get<std::string>() : "prompt";
  for (const char* key : {"train_files", "val_files"}) {
    if (!data.contains(key)) continue;
    const std::string path = std::string("data.") + key;
    std::vector<std::string> files;
    if (data[key].is_string()) files.push_back(data[key].get<std::string>());
    else if (data[key].is_array())
      for (const auto& f : data[key]) if (f.is_string()) files.push_back(f.get<std::string>());
    for (const auto& file : files) {
      try {
        data::probe_file(file, prompt_key);
      } catch (const Error& e) {
        const auto at = doc.locations.find(path);
        doc.issues.push_back({config::Severity::kError, path, e.what(), e.hint(),
                              at == doc.locations.end() ? config::Location{} : at->second});
      }
    }
  }
}

// Which normalisation the actor's losses get: it changes the gradient's scale, and verl chooses
// it through a key whose name does not say so (trainer.use_legacy_worker_impl).
std::string loss_normalisation_note(const config::Json& job) {
  const config::Json* impl = config::find(job, "trainer.use_legacy_worker_impl");
  const config::Json* factor = config::find(job, "actor_rollout_ref.actor.loss_scale_factor");
  const bool global = impl && impl->is_string() && impl->get<std::string>() == "disable";
  std::string out = global ? "# loss normalisation: global batch (trainer.use_legacy_worker_impl=disable, verl's engine "
                             "workers): each mini-batch's token / sequence counts summed over every rank and micro-batch\n"
                           : "# loss normalisation: per micro-batch (trainer.use_legacy_worker_impl=" +
                                 (impl && impl->is_string() ? impl->get<std::string>() : std::string("auto")) +
                                 ", verl's dp_actor), scaled by the micro-batch's share of its mini-batch\n";
  if (factor && factor->is_number())
    out += "# seq-mean-token-sum-norm divides by actor.loss_scale_factor = " + factor->dump() + "\n";
  return out;
}

void add_common(CLI::App* cmd, ConfigArgs& a) {
  add_job_file_options(cmd, a.job);
  cmd->add_option("--kind", a.kind, "What the file is: job (job config) or cluster (cluster spec)")
      ->check(CLI::IsMember({"job", "cluster"}))
      ->default_str("job");
}

}  // namespace

void register_config(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("config", "Show, validate or lint a job config or cluster spec");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ConfigArgs>();

  auto* show = cmd->add_subcommand("show", "Print the resolved config: defaults, file and overrides merged");
  add_common(show, *args);
  show->callback([&ctx, args] {
    args->file = args->job.primary();
    auto doc = config::resolve(kind_of(*args), args->file, args->job.overrides);
    if (!doc.ok()) config::load(kind_of(*args), args->file, args->job.overrides);  // throws with every issue
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, doc.value);
      return;
    }
    if (!doc.preset.empty()) {
      *ctx.out << "# actor_rollout_ref.model.path is null: the built-in model's tuned preset\n"
               << "# (templates/presets/builtin.yaml) replaces verl's defaults for these keys:\n";
      for (const auto& key : doc.preset) {
        const config::Json* verl_default = config::find(config::defaults(config::Kind::kJob), key);
        *ctx.out << "#   " << key << ": " << config::find(config::builtin_preset(), key)->dump()
                 << "  (verl: " << (verl_default ? verl_default->dump() : "-") << ")\n";
      }
    }
    if (kind_of(*args) == config::Kind::kJob) *ctx.out << loss_normalisation_note(doc.value);
    *ctx.out << config::to_yaml(doc.value);
  });

  auto* validate = cmd->add_subcommand("validate", "Check a config and report every problem with its key path");
  add_common(validate, *args);
  validate->callback([&ctx, args] {
    args->file = args->job.primary();
    const auto kind = kind_of(*args);
    auto doc = config::resolve(kind, args->file, args->job.overrides);
    const std::string what = args->file.empty() ? "the default " + std::string(config::kind_name(kind)) : args->file;
    if (kind == config::Kind::kJob) check_data_files(doc);
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, {{"valid", doc.ok()}, {"file", args->file}, {"issues", issues_json(doc.issues)}});
      if (!doc.ok()) ctx.exit_code = static_cast<int>(ExitCode::kInvalidConfig);
      return;
    }
    if (!doc.ok()) {  // every issue, the data files' among them
      const auto n = std::count_if(doc.issues.begin(), doc.issues.end(),
                                   [](const config::Issue& i) { return i.severity == config::Severity::kError; });
      throw Error(ExitCode::kInvalidConfig,
                  std::to_string(n) + " problem" + (n == 1 ? "" : "s") + " in the " + config::kind_name(kind) +
                      " from " + (args->file.empty() ? "the command line" : "'" + args->file + "'") + ":\n" +
                      config::format_issues(doc.issues),
                  "fix the keys named above; 'verlctl config show' prints every key with its default");
    }
    *ctx.out << config::format_issues(doc.issues);
    const size_t warnings = doc.issues.size();
    *ctx.out << what << ": valid " << config::kind_name(kind)
             << (warnings ? " (" + std::to_string(warnings) + " warning" + (warnings == 1 ? "" : "s") + " above)" : "")
             << "\n";
  });

  auto* lint = cmd->add_subcommand("lint", "Advise on a job config for scale-out (warnings with reasons)");
  add_common(lint, *args);
  lint->add_option("--cluster", args->cluster_file, "Cluster spec the job will run on (its env is checked too)")
      ->check(CLI::ExistingFile);
  lint->add_option("--gpu-memory-gib", args->gpu_memory_gib, "Memory of one GPU, for the offload advice")
      ->check(CLI::PositiveNumber)
      ->default_str("80");
  lint->add_flag("--strict", args->strict, "Exit 5 when there is any warning");
  lint->callback([&ctx, args] {
    args->file = args->job.primary();
    if (args->kind != "job") throw Error(ExitCode::kUsage, "config lint advises on job configs only", "drop --kind cluster; pass the spec with --cluster");
    std::vector<config::Issue> warnings;
    auto job = config::load_job(args->file, args->job.overrides, &warnings);
    config::Json cluster;
    if (!args->cluster_file.empty()) cluster = config::load_cluster(args->cluster_file, {});
    for (auto& w : config::lint_job(job, args->cluster_file.empty() ? nullptr : &cluster, args->gpu_memory_gib))
      warnings.push_back(std::move(w));
    if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, {{"warnings", issues_json(warnings)}});
    else if (warnings.empty()) *ctx.out << "no warnings\n";
    else *ctx.out << config::format_issues(warnings);
    if (args->strict && !warnings.empty()) ctx.exit_code = static_cast<int>(ExitCode::kCheckFailed);
  });
}

}  // namespace verl::cli
