#include "common/job_config_view.h"

#include "common/error.h"

namespace verl {

namespace {

int required_int(const config::Json& config, const char* key) {
  const config::Json* v = config::find(config, key);
  if (!v || !v->is_number_integer())
    throw Error(ExitCode::kFailure, std::string("job config: ") + key + " is " + (v ? "not an integer: " + v->dump() : "missing"),
                "resolve the job config first (config::resolve fills in the schema's defaults)");
  return v->get<int>();
}

std::string string_or_empty(const config::Json& config, const char* key) {
  const config::Json* v = config::find(config, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

namespace metric_names {

const std::vector<std::string>& ppo_step() {
  static const std::vector<std::string> names = {
      kScore, "critic/score/max", "critic/score/min", "critic/rewards/mean", "critic/advantages/mean",
      "critic/returns/mean", "critic/values/mean", "critic/vf_loss", "critic/vf_clipfrac", "critic/grad_norm",
      "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/entropy", "actor/grad_norm", "actor/lr",
      "response_length/mean", "response_length/max", "prompt_length/mean", kThroughput, "perf/total_num_tokens",
      "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/values", "timing_s/adv",
      "timing_s/update_critic", "timing_s/update_actor", kStepSeconds, "training/global_step", "training/epoch"};
  return names;
}

const std::vector<std::string>& validation() {
  static const std::vector<std::string> names = {kValScore, "timing_s/testing"};
  return names;
}

}  // namespace metric_names

config::Json without_run_names(config::Json c) {
  if (!c.is_object() || !c.contains("trainer") || !c["trainer"].is_object()) return c;
  for (const char* k : {"nnodes", "experiment_name", "default_local_dir", "metrics_file", "resume_mode"})
    c["trainer"].erase(k);
  return c;
}

void set_resume_from_latest_checkpoint(config::Json& config) { config["trainer"]["resume_mode"] = "auto"; }

int JobConfigView::nnodes() const { return required_int(config_, job_keys::kNnodes); }

int JobConfigView::n_gpus_per_node() const { return required_int(config_, job_keys::kNGpusPerNode); }

int JobConfigView::max_restarts() const {
  const config::Json* v = config::find(config_, job_keys::kMaxRestarts);
  return v && v->is_number_integer() ? v->get<int>() : 0;
}

int64_t JobConfigView::total_training_steps() const {
  const config::Json* v = config::find(config_, job_keys::kTotalTrainingSteps);
  return v && v->is_number_integer() ? v->get<int64_t>() : 0;
}

int64_t JobConfigView::save_freq() const {
  const config::Json* v = config::find(config_, job_keys::kSaveFreq);
  return v && v->is_number_integer() ? v->get<int64_t>() : 0;
}

std::string JobConfigView::default_local_dir() const { return string_or_empty(config_, job_keys::kDefaultLocalDir); }

std::string JobConfigView::metrics_path() const {
  const std::string file = string_or_empty(config_, job_keys::kMetricsFile);
  return file.empty() ? default_local_dir() + "/metrics.jsonl" : file;
}

}  // namespace verl
