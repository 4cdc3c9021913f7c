// versions: what this node runs, so that a mismatch between nodes (another commit, libtorch
// without CUDA, an old driver) is visible before ranks meet in a collective.
#include "common/files.h"
#include "probes/probes.h"
#include "verl/build_info.h"

namespace verl::probes {

Probe versions_probe() {
  Probe p;
  p.descriptor = {"versions", "verlctl version and commit, what is compiled in, the NVIDIA driver",
                  {{"verlctl", "", Bound::kNone, ""},
                   {"libtorch", "", Bound::kNone, ""},
                   {"cuda", "", Bound::kNone, ""},
                   {"nccl", "", Bound::kNone, ""},
                   {"driver", "", Bound::kNone, ""}}};
  p.run = [](const Context& ctx) {
    const std::string off = "not compiled in";
    const std::string driver = files::read_first_line(ctx.sysfs_root + "/module/nvidia/version");
    return std::vector<Measurement>{
        {"verlctl", std::nullopt, std::string(VERL_VERSION) + " (commit " + VERL_GIT_COMMIT + ")", {}},
        {"libtorch", std::nullopt, VERL_HAVE_TORCH_BUILD ? std::string(VERL_TORCH_VERSION) : off, {}},
        {"cuda", std::nullopt, VERL_HAVE_CUDA_BUILD ? std::string(VERL_CUDA_VERSION) + " compiled in" : off, {}},
        {"nccl", std::nullopt, VERL_HAVE_CUDA_BUILD ? std::string(VERL_NCCL_VERSION) + " compiled in" : off, {}},
        {"driver", std::nullopt, driver.empty() ? "no NVIDIA driver loaded (" + ctx.sysfs_root + "/module/nvidia/version)"
                                                : "NVIDIA " + driver,
         driver.empty() ? std::optional<Status>(Status::kSkipped) : std::nullopt}};
  };
  return p;
}

}  // namespace verl::probes
