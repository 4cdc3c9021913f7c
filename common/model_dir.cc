#include "common/model_dir.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"

namespace verl::model_dir {
namespace fs = std::filesystem;

fs::path hub_cache_root() {
  if (const char* v = std::getenv("HF_HUB_CACHE"); v && *v) return files::expand_home(v);
  if (const char* v = std::getenv("HF_HOME"); v && *v) return fs::path(files::expand_home(v)) / "hub";
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return fs::path(v) / "huggingface" / "hub";
  return fs::path(files::expand_home("~/.cache")) / "huggingface" / "hub";
}

namespace {

// The snapshot refs/main names, else the most recently written one; empty when there is none.
fs::path pick_snapshot(const fs::path& repo, std::string* why) {
  const fs::path snapshots = repo / "snapshots";
  std::error_code ec;
  const fs::path ref = repo / "refs" / "main";
  if (fs::is_regular_file(ref, ec)) {
    std::string rev = files::read_file(ref.string());
    rev.erase(std::remove_if(rev.begin(), rev.end(), [](unsigned char ch) { return std::isspace(ch); }), rev.end());
    if (!rev.empty() && fs::is_directory(snapshots / rev, ec)) {
      *why = "refs/main";
      return snapshots / rev;
    }
  }
  fs::path best;
  fs::file_time_type best_time{};
  if (!fs::is_directory(snapshots, ec)) return best;
  for (const auto& e : fs::directory_iterator(snapshots, ec)) {
    if (!e.is_directory(ec)) continue;
    const auto t = fs::last_write_time(e.path(), ec);
    if (best.empty() || t > best_time) {
      best = e.path();
      best_time = t;
    }
  }
  *why = "the newest snapshot (no refs/main)";
  return best;
}

}  // namespace

std::string resolve(const std::string& path, const std::string& key) {
  if (path.empty()) {
    throw Error{ExitCode::kInvalidConfig, "job config: key '" + key + "' is empty",
                "set it to a Hugging Face model directory (config.json + *.safetensors)"};
  }
  const fs::path p(files::expand_home(path));
  std::error_code ec;
  if (fs::is_directory(p, ec)) return fs::absolute(p).lexically_normal().string();
  if (fs::exists(p, ec)) {
    throw Error{ExitCode::kInvalidConfig, "job config: key '" + key + "': " + path + " is a file, not a model directory",
                "pass the directory that holds config.json and the *.safetensors files"};
  }
  static const std::regex kHubId(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$)");
  if (std::regex_match(path, kHubId)) {
    const std::string org = path.substr(0, path.find('/')), name = path.substr(path.find('/') + 1);
    const fs::path repo = hub_cache_root() / ("models--" + org + "--" + name);
    std::string why;
    const fs::path snapshot = pick_snapshot(repo, &why);
    if (!snapshot.empty()) {
      log::Info() << "model: " << key << "=" << path << " is not a local directory; using the Hugging Face cache's "
                  << snapshot.string() << " (" << why << ")";
      return snapshot.string();
    }
    throw Error{ExitCode::kInvalidConfig,
                "job config: key '" + key + "': '" + path +
                    "' is not a local directory, and the Hugging Face cache has no snapshot of it (looked in " +
                    (repo / "snapshots").string() + ")",
                "verlctl reads local model directories and never downloads: run `huggingface-cli download " + path +
                    "` (it fills that cache; HF_HOME or HF_HUB_CACHE move it), or pass the model's directory"};
  }
  throw Error{ExitCode::kInvalidConfig,
              "job config: key '" + key + "': no directory " + fs::absolute(p).lexically_normal().string(),
              "pass a Hugging Face model directory (config.json + *.safetensors), or a hub id org/name that "
              "`huggingface-cli download` has put in the Hugging Face cache"};
}

}  // namespace verl::model_dir
