// h2d, d2h, d2d, matmul: what each GPU of this node moves and computes, one row per GPU (the
// best size's rate, judged; every size's rate in the detail). The arithmetic and the timing are
// probes/gpu_bench.h's; here is only what each probe reports.
#include <cstdio>

#include "probes/gpu_bench.h"
#include "probes/gpu_probe.h"
#include "probes/probes.h"

namespace verl::probes {

namespace {

std::string gbps_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

Probe copy_probe(CopyDirection dir, const std::string& measures, const std::string& threshold_key) {
  Probe p;
  p.descriptor = {copy_direction_name(dir), measures, {{"bandwidth", "GB/s", Bound::kAtLeast, threshold_key}}};
  p.run = [dir](const Context& ctx) {
    std::vector<Measurement> out;
    const int n = cuda_devices_or_skip(ctx, "bandwidth", &out);
    for (int g = 0; g < n; ++g) {
      std::vector<SizeRate> rates;
      try {
        rates = measure_copy(g, dir, ctx.copy_sizes, ctx.copy_reps);
      } catch (const std::exception& e) {  // this GPU fails; the others still report
        out.push_back({"bandwidth", std::nullopt, e.what(), Status::kFail});
        continue;
      }
      const SizeRate* best = nullptr;
      std::string sweep;
      for (const auto& r : rates) {
        if (!best || r.gbps > best->gbps) best = &r;
        sweep += (sweep.empty() ? "" : ", ") + format_bytes(r.bytes) + " " + gbps_text(r.gbps);
      }
      if (!best) continue;
      out.push_back({"bandwidth", best->gbps,
                     "gpu " + std::to_string(g) + ": best of " + std::to_string(ctx.copy_reps) + " at " +
                         format_bytes(best->bytes) + " (" + sweep + " GB/s)",
                     {}});
    }
    return out;
  };
  return p;
}

}  // namespace

Probe h2d_probe() {
  return copy_probe(CopyDirection::kHostToDevice,
                    "pinned host -> device cudaMemcpyAsync per GPU, timed by CUDA events, best of N per size",
                    "min_copy_gbps");
}

Probe d2h_probe() {
  return copy_probe(CopyDirection::kDeviceToHost,
                    "device -> pinned host cudaMemcpyAsync per GPU, timed by CUDA events, best of N per size",
                    "min_copy_gbps");
}

Probe d2d_probe() {
  return copy_probe(CopyDirection::kDeviceToDevice,
                    "device -> same device cudaMemcpyAsync per GPU (bytes copied; HBM traffic is twice that)",
                    "min_d2d_gbps");
}

Probe matmul_probe() {
  Probe p;
  p.descriptor = {"matmul", "bf16 n^3 matrix product per GPU, fp32 accumulate (cublasGemmEx), best of N",
                  {{"bf16", "TFLOP/s", Bound::kAtLeast, "min_bf16_tflops"}}};
  p.run = [](const Context& ctx) {
    std::vector<Measurement> out;
    const int n = cuda_devices_or_skip(ctx, "bf16", &out);
    for (int g = 0; g < n; ++g) {
      MatmulRate r;
      try {
        r = measure_matmul_bf16(g, ctx.matmul_n, ctx.matmul_reps);
      } catch (const std::exception& e) {
        out.push_back({"bf16", std::nullopt, e.what(), Status::kFail});
        continue;
      }
      char detail[160];
      std::snprintf(detail, sizeof detail, "gpu %d: %dx%dx%d, best of %d, %.3f ms", g, r.n, r.n, r.n,
                    ctx.matmul_reps, r.best_ms);
      out.push_back({"bf16", r.tflops, detail, {}});
    }
    return out;
  };
  return p;
}

}  // namespace verl::probes
