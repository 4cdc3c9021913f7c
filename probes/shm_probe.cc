// shm: the size of /dev/shm. NCCL's shared-memory transport and the data loaders' workers put
// their buffers there; containers default to 64 MiB, which makes NCCL fail at init, not at
// launch time.
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "probes/probes.h"

namespace verl::probes {

FsSpace fs_space(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path.empty() ? "." : path).lexically_normal();
  std::error_code ec;
  while (!std::filesystem::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  struct statvfs st {};
  if (::statvfs(p.c_str(), &st) != 0)
    throw Error(ExitCode::kFailure, "statvfs " + p.string() + ": " + std::strerror(errno));
  FsSpace s;
  s.path = p.string();
  s.size_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  s.free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  return s;
}

Probe shm_probe() {
  Probe p;
  p.descriptor = {"shm", "size of /dev/shm (statvfs), where NCCL and data workers share memory",
                  {{"size", "GiB", Bound::kAtLeast, "min_shm_gib"}}};
  p.run = [](const Context& ctx) {
    std::error_code ec;
    if (!std::filesystem::is_directory(ctx.shm_path, ec))
      return std::vector<Measurement>{{"size", 0.0, ctx.shm_path + " does not exist", Status::kFail}};
    const FsSpace s = fs_space(ctx.shm_path);
    char free[32];
    std::snprintf(free, sizeof free, "%.1f", s.free_bytes / kGiB);
    return std::vector<Measurement>{{"size", s.size_bytes / kGiB, s.path + ", " + free + " GiB free", {}}};
  };
  return p;
}

}  // namespace verl::probes
