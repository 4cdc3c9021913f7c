#include "cli/job_preflight.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>

#include "common/config.h"
#include "common/error.h"
#include "common/files.h"
#include "common/job_config_view.h"
#include "common/model_dir.h"
#include "data/rows.h"
#include "launcher/resources.h"

namespace verl::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const Json* at(const Json& config, const char* key) { return config::find(config, key); }

std::string str(const Json& config, const char* key) {
  const Json* v = at(config, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

std::vector<std::string> files_of(const Json& config, const char* key) {
  std::vector<std::string> out;
  const Json* v = at(config, key);
  if (!v) return out;
  if (v->is_string()) out.push_back(v->get<std::string>());
  if (v->is_array())
    for (const auto& f : *v)
      if (f.is_string()) out.push_back(f.get<std::string>());
  return out;
}

PreflightCheck failed(PreflightCheck c, std::string what, std::string hint) {
  c.ok = false;
  c.detail = std::move(what);
  c.hint = std::move(hint);
  return c;
}

PreflightCheck check_data_file(const std::string& key, const std::string& file, const std::string& prompt_key) {
  PreflightCheck c{"data", key, file, true, "", ""};
  try {
    const auto probe = data::probe_file(file, prompt_key);
    c.detail = std::string(probe.format == data::FileFormat::kParquet ? "parquet" : "JSON") +
               (probe.rows >= 0 ? ", " + std::to_string(probe.rows) + " rows" : ", first row parses") + ", column " +
               prompt_key;
    return c;
  } catch (const Error& e) {
    // A relative path resolves in the job directory on this node: say which one.
    std::error_code ec;
    const std::string in = file.empty() || file[0] == '/' ? "" : " (in " + fs::current_path(ec).string() + ")";
    return failed(c, e.what() + in, e.hint().empty() ? "put the file on this node at the path the job names" : e.hint());
  }
}

int dtype_bytes(const std::string& dtype) {
  if (dtype == "float32" || dtype == "float" || dtype == "fp32") return 4;
  if (dtype == "float64") return 8;
  return 2;  // bfloat16, float16
}

// model.safetensors.index.json's shards, else model.safetensors; empty when neither is there.
std::vector<std::string> shards_of(const fs::path& dir) {
  std::error_code ec;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::is_regular_file(index, ec)) {
    const Json j = Json::parse(files::read_file(index.string()), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(ExitCode::kInvalidConfig, index.string() + " has no weight_map object",
                  "the model's download is damaged: fetch it again");
    std::set<std::string> names;
    for (const auto& [tensor, file] : j["weight_map"].items())
      if (file.is_string()) names.insert(file.get<std::string>());
    return {names.begin(), names.end()};
  }
  if (fs::is_regular_file(dir / "model.safetensors", ec)) return {"model.safetensors"};
  return {};
}

// What a model directory holds that the ranks read; the weights' bytes in *weight_bytes and
// the bytes per parameter of their storage dtype in *stored_bytes.
PreflightCheck check_model(const std::string& key, const std::string& path, int64_t* weight_bytes, int* stored_bytes) {
  PreflightCheck c{"model", key, path, true, "", ""};
  std::string dir;
  try {
    dir = model_dir::resolve(path, key);
  } catch (const Error& e) {
    return failed(c, e.what(), e.hint());
  }
  const fs::path d(dir);
  std::error_code ec;
  const fs::path config = d / "config.json";
  if (!fs::is_regular_file(config, ec))
    return failed(c, "no config.json in " + dir, "pass the directory that holds config.json and the *.safetensors");
  Json cj;
  try {
    cj = Json::parse(files::read_file(config.string()));
  } catch (const std::exception& e) {
    return failed(c, config.string() + " does not parse: " + e.what(), "the model's download is damaged: fetch it again");
  }
  const std::string torch_dtype = cj.value("torch_dtype", cj.value("dtype", std::string("float32")));
  *stored_bytes = dtype_bytes(torch_dtype);
  std::vector<std::string> shards;
  try {
    shards = shards_of(d);
  } catch (const Error& e) {
    return failed(c, e.what(), e.hint());
  }
  if (shards.empty())
    return failed(c, "no model.safetensors or model.safetensors.index.json in " + dir,
                  "verlctl reads safetensors weights: save the model with safe_serialization=True");
  int64_t total = 0;
  for (const auto& shard : shards) {
    const fs::path file = d / shard;
    if (!fs::is_regular_file(file, ec))
      return failed(c, "shard " + file.string() + " is missing (" + std::to_string(shards.size()) + " shards named)",
                    "the download is incomplete: fetch the model again, or copy every shard to this node");
    const int64_t size = static_cast<int64_t>(fs::file_size(file, ec));
    int64_t expected = 0;
    try {
      expected = safetensors_expected_size(file.string());
    } catch (const Error& e) {
      return failed(c, e.what(), e.hint());
    }
    if (size != expected)
      return failed(c,
                    "shard " + file.string() + " is " + std::to_string(size) + " bytes, its header says " +
                        std::to_string(expected),
                    "the file is truncated or still being copied: copy it again");
    total += size;
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    if (!fs::is_regular_file(d / name, ec))
      return failed(c, std::string("no ") + name + " in " + dir,
                    "verlctl's tokenizer reads tokenizer.json and tokenizer_config.json: save the tokenizer with the model");
  *weight_bytes = total;
  c.detail = dir + ": config.json, " + std::to_string(shards.size()) + " shard" + (shards.size() == 1 ? "" : "s") +
             " (" + launcher::format_bytes(total) + ", " + torch_dtype + "), tokenizer files";
  return c;
}

PreflightCheck check_checkpoint_dir(const std::string& path, int64_t need_bytes, const std::string& need_why) {
  PreflightCheck c{"checkpoint", job_keys::kDefaultLocalDir, path, true, "", ""};
  std::error_code ec;
  fs::path p = fs::absolute(files::expand_home(path), ec).lexically_normal();
  fs::path existing = p;
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    return failed(c, existing.string() + " is not a directory (the checkpoint directory " + p.string() + " is under it)",
                  "point trainer.default_local_dir at a directory");
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    return failed(c, existing.string() + " is not writable by this user" +
                         (existing == p ? "" : " (the checkpoint directory " + p.string() + " would be made in it)"),
                  "give the user write access, or point trainer.default_local_dir elsewhere");
  struct statvfs st {};
  if (::statvfs(existing.c_str(), &st) != 0) return failed(c, "cannot stat the filesystem of " + existing.string(), "");
  const int64_t free_bytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  if (need_bytes > 0 && free_bytes < need_bytes)
    return failed(c,
                  launcher::format_bytes(free_bytes) + " free on the filesystem of " + existing.string() +
                      ", one checkpoint needs about " + launcher::format_bytes(need_bytes) + " (" + need_why + ")",
                  "free space there, or point trainer.default_local_dir at a larger filesystem");
  c.detail = p.string() + ": writable, " + launcher::format_bytes(free_bytes) + " free" +
             (need_bytes > 0 ? ", one checkpoint about " + launcher::format_bytes(need_bytes) : "");
  return c;
}

}  // namespace

bool PreflightReport::ok() const {
  for (const auto& c : checks)
    if (!c.ok) return false;
  return true;
}

Json to_json(const PreflightReport& r) {
  Json checks = Json::array();
  for (const auto& c : r.checks) {
    Json j = {{"check", c.check}, {"key", c.key}, {"path", c.path}, {"ok", c.ok}, {"detail", c.detail}};
    if (!c.ok && !c.hint.empty()) j["hint"] = c.hint;
    checks.push_back(j);
  }
  return {{"ok", r.ok()}, {"checks", checks}};
}

int64_t safetensors_expected_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8))
    throw Error(ExitCode::kInvalidConfig, path + " is shorter than a safetensors header (8 bytes)",
                "the file is truncated: copy it again");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > (uint64_t{100} << 20))
    throw Error(ExitCode::kInvalidConfig, path + ": a safetensors header of " + std::to_string(n) + " bytes",
                "this is not a safetensors file");
  std::string header(n, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(n)))
    throw Error(ExitCode::kInvalidConfig, path + " ends inside its safetensors header", "the file is truncated: copy it again");
  const Json h = Json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!h.is_object()) throw Error(ExitCode::kInvalidConfig, path + ": the safetensors header is not a JSON object", "");
  uint64_t end = 0;
  for (const auto& [name, t] : h.items()) {
    if (name == "__metadata__" || !t.is_object() || !t.contains("data_offsets")) continue;
    const auto& off = t["data_offsets"];
    if (off.is_array() && off.size() == 2 && off[1].is_number_unsigned()) end = std::max(end, off[1].get<uint64_t>());
  }
  return static_cast<int64_t>(8 + n + end);
}

PreflightReport run_job_preflight(const Json& config) {
  std::vector<std::function<PreflightCheck()>> jobs;
  const std::string prompt_key = str(config, "data.prompt_key").empty() ? "prompt" : str(config, "data.prompt_key");
  for (const char* key : {"data.train_files", "data.val_files"})
    for (const auto& f : files_of(config, key))
      jobs.push_back([key = std::string(key), f, prompt_key] { return check_data_file(key, f, prompt_key); });
  // The models first: the checkpoint's estimate needs their size.
  std::vector<std::pair<std::string, std::string>> models;
  if (!str(config, "actor_rollout_ref.model.path").empty())
    models.emplace_back("actor_rollout_ref.model.path", str(config, "actor_rollout_ref.model.path"));
  // verl builds a critic only for GAE; its path defaults to the actor's.
  const std::string estimator = str(config, "algorithm.adv_estimator");
  const bool critic = estimator.empty() || estimator == "gae";
  if (critic && !str(config, "critic.model.path").empty() &&
      str(config, "critic.model.path") != str(config, "actor_rollout_ref.model.path"))
    models.emplace_back("critic.model.path", str(config, "critic.model.path"));

  std::vector<std::future<PreflightCheck>> data_futures;
  for (auto& j : jobs) data_futures.push_back(std::async(std::launch::async, j));
  std::vector<int64_t> weights(models.size(), 0);
  std::vector<int> stored(models.size(), 2);
  std::vector<std::future<PreflightCheck>> model_futures;
  for (size_t i = 0; i < models.size(); ++i)
    model_futures.push_back(std::async(std::launch::async, [&, i] {
      return check_model(models[i].first, models[i].second, &weights[i], &stored[i]);
    }));
  PreflightReport r;
  for (auto& f : model_futures) r.checks.push_back(f.get());
  // One checkpoint: the actor (and a critic of the same model when there is one) in the
  // training dtype, each with AdamW's two moments.
  int64_t need = 0;
  std::string why;
  const JobConfigView view(config);
  if (view.save_freq() > 0 && !models.empty()) {
    const int train_bytes = dtype_bytes(str(config, "actor_rollout_ref.model.dtype"));
    const int copies = critic ? 2 : 1;
    const double params = static_cast<double>(weights[0]) / stored[0];
    need = static_cast<int64_t>(params * train_bytes * kCheckpointFactor * copies);
    why = launcher::format_bytes(weights[0]) + " of weights x " + std::to_string(static_cast<int>(kCheckpointFactor)) +
          " (weights + AdamW moments)" + (critic ? " for the actor and the critic" : "");
  }
  const std::string ckpt = view.default_local_dir();
  if (!ckpt.empty()) r.checks.push_back(check_checkpoint_dir(ckpt, need, why));
  for (auto& f : data_futures) r.checks.push_back(f.get());
  return r;
}

}  // namespace verl::cli
