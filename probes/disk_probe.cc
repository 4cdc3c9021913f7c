// disk: free space where checkpoints go (the job's trainer.default_local_dir, or the CLI's
// --checkpoint-dir), measured at the nearest existing parent since the directory is usually
// made by the first save. A checkpoint that fails to save fails the run hours in.
#include <filesystem>

#include "probes/probes.h"

namespace verl::probes {

Probe disk_probe() {
  Probe p;
  p.descriptor = {"disk", "free space (statvfs f_bavail) where checkpoints go, at the nearest existing parent",
                  {{"free", "GiB", Bound::kAtLeast, "min_free_disk_gib"}}};
  p.run = [](const Context& ctx) {
    const FsSpace s = fs_space(ctx.checkpoint_dir);
    std::string detail = s.path;
    const std::string wanted = std::filesystem::absolute(ctx.checkpoint_dir.empty() ? "." : ctx.checkpoint_dir)
                                   .lexically_normal()
                                   .string();
    if (wanted != s.path) detail += " (nearest existing parent of " + wanted + ")";
    return std::vector<Measurement>{{"free", s.free_bytes / kGiB, detail, {}}};
  };
  return p;
}

}  // namespace verl::probes
