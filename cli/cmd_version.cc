// `verlctl version` and `verlctl --version`: what this build is and what is compiled in.
// Reads only compile-time facts: it never loads the trainer module (and so never libtorch).
#include <filesystem>

#include "cli/app.h"
#include "cli/output.h"
#include "cli/trainer_loader.h"
#include "verl/build_info.h"

namespace verl::cli {
namespace {

nlohmann::ordered_json version_info() {
  nlohmann::ordered_json j;
  j["version"] = VERL_VERSION;
  j["git_commit"] = VERL_GIT_COMMIT;
  j["libtorch"] = VERL_HAVE_TORCH_BUILD ? nlohmann::ordered_json(VERL_TORCH_VERSION) : nullptr;
  j["trainer_module"] = find_trainer_module().value_or("");
  j["cuda"] = VERL_HAVE_CUDA_BUILD ? nlohmann::ordered_json(VERL_CUDA_VERSION) : nullptr;
  j["nccl"] = VERL_HAVE_CUDA_BUILD ? nlohmann::ordered_json(VERL_NCCL_VERSION) : nullptr;
  return j;
}

std::string version_text() {
  auto j = version_info();
  auto or_not = [](const nlohmann::ordered_json& v) {
    return v.is_null() ? std::string("not compiled in") : v.get<std::string>();
  };
  std::string module = j["trainer_module"].get<std::string>();
  return std::string(VERL_VERSION_LINE) + "\n" +
         "libtorch: " + or_not(j["libtorch"]) + (module.empty() ? "" : " (module " + module + ")") + "\n" +
         "CUDA: " + or_not(j["cuda"]) + "\n" + "NCCL: " + or_not(j["nccl"]);
}

}  // namespace

void register_version(CLI::App& app, Context& ctx) {
  app.set_version_flag("-V,--version", [] { return version_text(); }, "Print the version, commit and what is compiled in");
  auto* cmd = app.add_subcommand("version", "Print the version, commit and what is compiled in");
  cmd->callback([&ctx] {
    if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, version_info());
    else *ctx.out << version_text() << "\n";
  });
}

}  // namespace verl::cli
