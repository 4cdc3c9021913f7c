#include "cli/trainer_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "verl/build_info.h"

namespace verl::cli {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("VERLCTL_TRAINER_MODULE"); env && *env) out.push_back(env);
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((self.parent_path() / VERL_TRAINER_MODULE_NAME).string());
    out.push_back((self.parent_path().parent_path() / VERL_INSTALL_MODULE_DIR / VERL_TRAINER_MODULE_NAME).string());
  }
  return out;
}

}  // namespace

std::optional<std::string> find_trainer_module() {
  for (const auto& c : candidates())
    if (fs::exists(c)) return c;
  return std::nullopt;
}

const TrainerModule& load_trainer_module() {
  static TrainerModule module;
  if (module.run) return module;
  auto path = find_trainer_module();
  if (!path) {
    std::string looked;
    for (const auto& c : candidates()) looked += "\n  " + c;
    throw Error(ExitCode::kNotCompiledIn,
                std::string("the trainer is not compiled into this build: ") + VERL_TRAINER_MODULE_NAME +
                    " not found; looked in:" + looked,
                "build with libtorch installed (scripts/setup installs libtorch-dev and libgloo-dev), "
                "or point VERLCTL_TRAINER_MODULE at the module");
  }
  void* handle = dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    throw Error(ExitCode::kFailure, "cannot load the trainer module " + *path + ": " + dlerror(),
                "check that libtorch's libraries are installed and on the loader path (ldd " + *path + ")");
  }
  module.path = *path;
  module.run = reinterpret_cast<VerlTrainerRunFn>(dlsym(handle, "verl_trainer_run"));
  module.info = reinterpret_cast<VerlTrainerInfoFn>(dlsym(handle, "verl_trainer_info"));
  if (!module.run || !module.info) {
    module.run = nullptr;
    throw Error(ExitCode::kFailure, "the trainer module " + *path + " lacks verl_trainer_run/verl_trainer_info",
                "it was built from another version of verlctl: rebuild both together");
  }
  return module;
}

}  // namespace verl::cli
