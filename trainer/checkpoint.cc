#include "trainer/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <system_error>

#include "common/error.h"
#include "common/log.h"
#include "trainer/distributed.h"

namespace verl::trainer {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";
constexpr const char* kStepPrefix = "global_step_";
constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kRngFile = "rng.pt";
constexpr const char* kTmpMarker = ".tmp-";
constexpr const char* kOldMarker = ".old-";

Error io_error(const std::string& what, const fs::path& path, const std::string& why) {
  return Error{ExitCode::kFailure, "checkpoint: cannot " + what + " " + path.string() + ": " + why,
               "check free space and permissions of trainer.default_local_dir"};
}

// fsync a file or a directory, so that a rename after it publishes complete data.
void fsync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw io_error("open", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw io_error("fsync", path, std::strerror(err));
}

void fsync_tree(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    fsync_path(e.path(), e.is_directory());
  }
  fsync_path(dir, /*directory=*/true);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw io_error("write", path, "stream error");
}

// Writes an archive through our own checked writes. libtorch's file writer throws from a
// destructor when a write fails (ENOSPC: "unexpected pos", then std::terminate; issue 16,
// case 6): ours takes every byte, remembers the first error, and that error is thrown here.
void save_archive(torch::serialize::OutputArchive& ar, const fs::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw io_error("create", path, std::strerror(errno));
  int error = 0;
  ar.save_to([&](const void* data, size_t n) -> size_t {
    if (error == 0 && n > 0 && std::fwrite(data, 1, n, f) != n) error = errno != 0 ? errno : EIO;
    return n;
  });
  if (std::fflush(f) != 0 && error == 0) error = errno != 0 ? errno : EIO;
  if (std::fclose(f) != 0 && error == 0) error = errno != 0 ? errno : EIO;
  if (error != 0) throw io_error("write", path, std::strerror(error));
}

}  // namespace

void write_archive(torch::serialize::OutputArchive& archive, const std::string& path) { save_archive(archive, path); }

namespace {

void save_module(torch::nn::Module& m, const fs::path& path) {
  torch::serialize::OutputArchive ar;
  m.save(ar);
  save_archive(ar, path);
}

void save_optim(torch::optim::Optimizer& o, const fs::path& path) {
  torch::serialize::OutputArchive ar;
  o.save(ar);
  save_archive(ar, path);
}

void require_file(const fs::path& path, const char* part) {
  if (!fs::exists(path)) {
    throw Error{ExitCode::kFailure,
                std::string("checkpoint: ") + part + " is not in the checkpoint: " +
                    path.string() + " is missing",
                "resume with the same algorithm (a critic only exists for GAE), or "
                "trainer.resume_mode=disable"};
  }
}

bool is_temporary(const std::string& name) {
  return name.find(kTmpMarker) != std::string::npos || name.find(kOldMarker) != std::string::npos;
}

}  // namespace

ResumeMode parse_resume_mode(const std::string& name) {
  if (name == "auto") return ResumeMode::kAuto;
  if (name == "disable") return ResumeMode::kDisable;
  if (name == "resume_path") return ResumeMode::kResumePath;
  throw Error{ExitCode::kInvalidConfig, "trainer.resume_mode '" + name + "' is not supported",
              "use one of: auto, disable, resume_path"};
}

CheckpointManager::CheckpointManager(std::string default_local_dir, Distributed* dist)
    : root_(std::move(default_local_dir)), dist_(dist) {}

std::string CheckpointManager::step_dir(int64_t step) const {
  return (fs::path(root_) / (kStepPrefix + std::to_string(step))).string();
}

c10::optional<int64_t> CheckpointManager::latest_step() const {
  const fs::path txt = fs::path(root_) / kLatestFile;
  std::ifstream in(txt);
  if (!in) return c10::nullopt;
  std::string s;
  in >> s;
  try {
    size_t used = 0;
    const long long n = std::stoll(s, &used);
    if (used != s.size() || n < 0) throw std::invalid_argument(s);
    return static_cast<int64_t>(n);
  } catch (const std::exception&) {
    log::Warn() << "checkpoint: ignoring malformed " << txt.string() << " ('" << s << "')";
    return c10::nullopt;
  }
}

std::string CheckpointManager::save(const CheckpointParts& parts, const TrainerState& state) {
  const fs::path final_dir = step_dir(state.global_step);
  std::string failure;
  const bool writer = dist_ == nullptr || dist_->is_rank0();
  const bool group = dist_ != nullptr && dist_->is_distributed();
  auto has_sharded = [&](const std::string& subdir) {
    for (const auto& p : parts.sharded)
      if (p.subdir == subdir) return true;
    return false;
  };
  // Whether any rank failed (a collective: every rank calls it at the same point).
  auto any_failed = [&](const std::string& mine) {
    if (!group) return !mine.empty();
    auto flag = torch::tensor({mine.empty() ? 0.0 : 1.0}, torch::kFloat64);
    dist_->all_reduce_sum(flag);
    return flag.item<double>() != 0;
  };
  // The temporary directory is named after rank 0's pid; sharded parts need every rank to know it.
  int64_t pid_value = writer ? static_cast<int64_t>(::getpid()) : 0;
  if (group && !parts.sharded.empty()) {
    auto t = torch::tensor({static_cast<double>(pid_value)}, torch::kFloat64);
    dist_->all_reduce_sum(t);
    pid_value = static_cast<int64_t>(t.item<double>());
  }
  const std::string pid = std::to_string(pid_value);
  const fs::path tmp = final_dir.string() + kTmpMarker + pid;
  if (!parts.sharded.empty()) {
    // Rank 0 makes the directory, then every rank writes its shards into it.
    if (writer) {
      try {
        fs::create_directories(root_);
        fs::remove_all(tmp);
        fs::create_directories(tmp);
      } catch (const std::exception& e) {
        failure = "checkpoint: cannot create " + tmp.string() + ": " + e.what();
      }
    }
    if (!any_failed(failure)) {
      try {
        for (const auto& part : parts.sharded) {
          fs::create_directories(tmp / part.subdir);
          part.save((tmp / part.subdir).string());
        }
      } catch (const std::exception& e) {
        failure = std::string("checkpoint: rank ") + std::to_string(dist_ ? dist_->rank() : 0) +
                  " cannot save its shards to " + tmp.string() + ": " + e.what();
      }
    }
    if (any_failed(failure)) {
      std::error_code ec;
      if (writer) fs::remove_all(tmp, ec);
      throw Error{ExitCode::kFailure,
                  failure.empty() ? "checkpoint: another rank failed to save its shards of step " +
                                        std::to_string(state.global_step)
                                  : failure,
                  "check free space and permissions of trainer.default_local_dir on every node; the previous "
                  "checkpoint is intact"};
    }
  }
  if (writer) {
    const fs::path root(root_);
    try {
      std::error_code ec;
      fs::create_directories(root, ec);
      if (ec) throw io_error("create", root, ec.message());
      if (parts.sharded.empty()) fs::remove_all(tmp);
      fs::create_directories(tmp / "actor");
      if (parts.actor) save_module(*parts.actor, tmp / "actor" / "model.pt");
      if (parts.actor_optim) save_optim(*parts.actor_optim, tmp / "actor" / "optim.pt");
      if (parts.actor_hf_export) parts.actor_hf_export((tmp / "actor" / "huggingface").string());
      if (parts.critic || parts.critic_optim) fs::create_directories(tmp / "critic");
      if (parts.critic) save_module(*parts.critic, tmp / "critic" / "model.pt");
      if (parts.critic_optim) save_optim(*parts.critic_optim, tmp / "critic" / "optim.pt");
      if (parts.ref) {
        fs::create_directories(tmp / "ref");
        save_module(*parts.ref, tmp / "ref" / "model.pt");
      }
      {
        torch::serialize::OutputArchive ar;
        auto cpu = at::detail::getDefaultCPUGenerator();
        {
          std::lock_guard<std::mutex> lock(cpu.mutex());
          ar.write("torch_cpu", cpu.get_state());
        }
        if (parts.rollout_generator != nullptr) {
          std::lock_guard<std::mutex> lock(parts.rollout_generator->mutex());
          ar.write("rollout", parts.rollout_generator->get_state());
        }
        save_archive(ar, tmp / kRngFile);
      }
      nlohmann::json js = {
          {"global_step", state.global_step},
          {"data", {{"epoch", state.data.epoch},
                    {"position", state.data.position},
                    {"shuffle_seed", state.data.shuffle_seed}}},
          {"kl_coef", state.kl_coef},
          {"extra", state.extra},
          {"has_critic", parts.critic != nullptr || has_sharded("critic")},
          {"has_ref", parts.ref != nullptr || has_sharded("ref")},
          {"has_rollout_rng", parts.rollout_generator != nullptr},
      };
      write_text(tmp / kStateFile, js.dump(2) + "\n");
      fsync_tree(tmp);

      // Publish: a directory cannot be renamed onto a non-empty one, so an older checkpoint of
      // the same step is moved aside first and removed after.
      fs::path old;
      if (fs::exists(final_dir)) {
        old = final_dir.string() + kOldMarker + pid;
        fs::remove_all(old);
        fs::rename(final_dir, old);
      }
      fs::rename(tmp, final_dir);
      fsync_path(root, /*directory=*/true);

      const fs::path txt = root / kLatestFile;
      const fs::path txt_tmp = txt.string() + kTmpMarker + pid;
      write_text(txt_tmp, std::to_string(state.global_step) + "\n");
      fsync_path(txt_tmp, /*directory=*/false);
      fs::rename(txt_tmp, txt);
      fsync_path(root, /*directory=*/true);

      if (!old.empty()) fs::remove_all(old);
      // Leftovers of runs that died mid-save.
      for (const auto& e : fs::directory_iterator(root)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(kStepPrefix, 0) == 0 && is_temporary(name)) fs::remove_all(e.path(), ec);
      }
      log::Info() << "checkpoint: saved step " << state.global_step << " to "
                  << final_dir.string();
    } catch (const Error& e) {
      failure = e.what();
    } catch (const std::exception& e) {
      failure = "checkpoint: cannot save " + final_dir.string() + ": " + e.what();
    }
    // A partial directory would keep a full disk full: it goes (the previous checkpoint stays).
    if (!failure.empty()) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      if (ec) failure += " (and cannot remove the partial " + tmp.string() + ": " + ec.message() + ")";
    }
  }
  // Doubles as the barrier: every rank learns whether rank 0's save went through.
  if (group) {
    if (any_failed(failure) && failure.empty()) {
      throw Error{ExitCode::kFailure,
                  "checkpoint: rank 0 failed to save step " + std::to_string(state.global_step),
                  "see rank 0's log"};
    }
  }
  if (!failure.empty()) {
    throw Error{ExitCode::kFailure, failure,
                "check free space and permissions of trainer.default_local_dir; the previous "
                "checkpoint is intact"};
  }
  return final_dir.string();
}

c10::optional<std::string> CheckpointManager::resolve_resume(
    ResumeMode mode, const std::string& resume_from_path) const {
  switch (mode) {
    case ResumeMode::kDisable:
      return c10::nullopt;
    case ResumeMode::kAuto: {
      auto step = latest_step();
      if (!step) return c10::nullopt;
      const std::string dir = step_dir(*step);
      if (!fs::exists(fs::path(dir) / kStateFile)) {
        throw Error{ExitCode::kFailure,
                    "checkpoint: " + (fs::path(root_) / kLatestFile).string() + " names step " +
                        std::to_string(*step) + " but " + dir + " is missing or incomplete",
                    "restore the directory, or start fresh with trainer.resume_mode=disable"};
      }
      return dir;
    }
    case ResumeMode::kResumePath: {
      if (resume_from_path.empty()) {
        throw Error{ExitCode::kInvalidConfig,
                    "trainer.resume_mode=resume_path needs trainer.resume_from_path",
                    "set trainer.resume_from_path=<dir>/global_step_N"};
      }
      const fs::path p(resume_from_path);
      if (!fs::exists(p / kStateFile)) {
        throw Error{ExitCode::kInvalidConfig,
                    "trainer.resume_from_path: " + resume_from_path +
                        (fs::exists(p) ? " is not a checkpoint directory (no trainer_state.json)"
                                       : " does not exist"),
                    "point it at a global_step_N directory under trainer.default_local_dir"};
      }
      return p.string();
    }
  }
  return c10::nullopt;
}

TrainerState CheckpointManager::load(const std::string& dir, const CheckpointParts& parts) const {
  const fs::path d(dir);
  require_file(d / kStateFile, "the trainer state");
  nlohmann::json js;
  try {
    std::ifstream in(d / kStateFile);
    in >> js;
  } catch (const std::exception& e) {
    throw Error{ExitCode::kFailure,
                "checkpoint: cannot parse " + (d / kStateFile).string() + ": " + e.what()};
  }
  auto load_module = [&](torch::nn::Module* m, const fs::path& p, const char* what) {
    if (m == nullptr) return;
    require_file(p, what);
    torch::serialize::InputArchive ar;
    ar.load_from(p.string());
    m->load(ar);
  };
  auto load_optim = [&](torch::optim::Optimizer* o, const fs::path& p, const char* what) {
    if (o == nullptr) return;
    require_file(p, what);
    torch::serialize::InputArchive ar;
    ar.load_from(p.string());
    o->load(ar);
  };
  try {
    load_module(parts.actor, d / "actor" / "model.pt", "the actor model");
    load_optim(parts.actor_optim, d / "actor" / "optim.pt", "the actor optimizer");
    load_module(parts.critic, d / "critic" / "model.pt", "the critic model");
    load_optim(parts.critic_optim, d / "critic" / "optim.pt", "the critic optimizer");
    load_module(parts.ref, d / "ref" / "model.pt", "the reference policy");
    for (const auto& part : parts.sharded) part.load((d / part.subdir).string());
    require_file(d / kRngFile, "the RNG state");
    torch::serialize::InputArchive ar;
    ar.load_from((d / kRngFile).string());
    torch::Tensor cpu_state;
    ar.read("torch_cpu", cpu_state);
    auto cpu = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(cpu.mutex());
      cpu.set_state(cpu_state);
    }
    if (parts.rollout_generator != nullptr) {
      torch::Tensor st;
      if (!ar.try_read("rollout", st)) {
        throw Error{ExitCode::kFailure,
                    "checkpoint: " + (d / kRngFile).string() + " has no rollout RNG state"};
      }
      std::lock_guard<std::mutex> lock(parts.rollout_generator->mutex());
      parts.rollout_generator->set_state(st);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error{ExitCode::kFailure, "checkpoint: cannot load " + dir + ": " + e.what(),
                "was it written by a run with the same model sizes?"};
  }
  TrainerState st;
  try {
    st.global_step = js.at("global_step").get<int64_t>();
    st.data.epoch = js.at("data").at("epoch").get<int64_t>();
    st.data.position = js.at("data").at("position").get<int64_t>();
    st.data.shuffle_seed = js.at("data").at("shuffle_seed").get<int64_t>();
    st.kl_coef = js.value("kl_coef", 0.0);
    st.extra = js.value("extra", nlohmann::json::object());
  } catch (const std::exception& e) {
    throw Error{ExitCode::kFailure,
                "checkpoint: " + (d / kStateFile).string() + " is malformed: " + e.what()};
  }
  log::Info() << "checkpoint: resumed from " << dir << " (step " << st.global_step << ")";
  return st;
}

}  // namespace verl::trainer
