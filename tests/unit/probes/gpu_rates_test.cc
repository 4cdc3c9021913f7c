// The GPU rate probes (h2d, d2h, d2d, matmul) where they can run without a GPU: their arithmetic,
// their descriptors and units, and what they say without a device (skipped; a fail when the spec
// gives the node GPUs; a fail naming the GPU when CUDA claims a device it cannot use).
#include <gtest/gtest.h>

#include "probes/cuda_api.h"
#include "probes/gpu_bench.h"
#include "probes/gpu_probe.h"
#include "probes/harness.h"
#include "probes/probes.h"
#include "tests/testing/fake_gpus.h"

namespace verl::probes {
namespace {

using testing::FakeGpus;

Context no_gpu_context(const FakeGpus* gpus) {
  Context ctx;
  ctx.node = "here";
  ctx.spec = {{"probes", {{"min_copy_gbps", 10.0}}}, {"nodes", Json::array()}, {"slurm", {{"gpus_per_node", 0}}}};
  ctx.gpus = gpus;
  return ctx;
}

GpuInfo none() { return testing::no_gpu(); }

TEST(GpuBench, BandwidthAndRateArithmetic) {
  EXPECT_DOUBLE_EQ(copy_gbps(1'000'000'000, 1000.0), 1.0);  // 1e9 bytes in 1 s
  EXPECT_DOUBLE_EQ(copy_gbps(256ull << 20, 5.0), 268435456.0 / 5e-3 / 1e9);
  EXPECT_EQ(copy_gbps(1, 0), 0);
  // 8192^3 in 1.5 ms: 2 * 8192^3 flops.
  EXPECT_NEAR(matmul_tflops(8192, 8192, 8192, 1.5), 2.0 * 8192.0 * 8192 * 8192 / 1.5e-3 / 1e12, 1e-9);
  EXPECT_NEAR(matmul_tflops(8192, 8192, 8192, 1.5), 733.0, 0.1);
}

TEST(GpuBench, FormatsSizesInBinaryUnits) {
  EXPECT_EQ(format_bytes(8), "8 B");
  EXPECT_EQ(format_bytes(1 << 20), "1 MiB");
  EXPECT_EQ(format_bytes(256ull << 20), "256 MiB");
  EXPECT_EQ(format_bytes(1ull << 30), "1 GiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

TEST(GpuRateProbes, DescriptorsCarryUnitsAndThresholdKeys) {
  struct Want {
    Probe probe;
    std::string name, metric, unit, key;
  };
  const std::vector<Want> want = {{h2d_probe(), "h2d", "bandwidth", "GB/s", "min_copy_gbps"},
                                  {d2h_probe(), "d2h", "bandwidth", "GB/s", "min_copy_gbps"},
                                  {d2d_probe(), "d2d", "bandwidth", "GB/s", "min_d2d_gbps"},
                                  {matmul_probe(), "matmul", "bf16", "TFLOP/s", "min_bf16_tflops"}};
  for (const auto& w : want) {
    EXPECT_EQ(w.probe.descriptor.name, w.name);
    ASSERT_EQ(w.probe.descriptor.metrics.size(), 1u) << w.name;
    const Metric& m = w.probe.descriptor.metrics[0];
    EXPECT_EQ(m.name, w.metric);
    EXPECT_EQ(m.unit, w.unit);
    EXPECT_EQ(m.bound, Bound::kAtLeast);
    EXPECT_EQ(m.threshold_key, w.key);
  }
}

TEST(GpuRateProbes, SkippedWithoutACudaDevice) {
  const FakeGpus gpus(none());
  const Context ctx = no_gpu_context(&gpus);
  const auto rows = run_probes({h2d_probe(), d2h_probe(), d2d_probe(), matmul_probe()}, ctx);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.status, Status::kSkipped) << r.probe;
    EXPECT_EQ(r.detail.rfind("skipped: no CUDA device", 0), 0u) << r.detail;
    EXPECT_FALSE(r.value);
  }
  EXPECT_EQ(rows[3].unit, "TFLOP/s");
  EXPECT_EQ(exit_code(rows), ExitCode::kOk);
}

TEST(GpuRateProbes, FailWithoutADeviceWhenTheSpecGivesTheNodeGpus) {
  const FakeGpus gpus(none());
  Context ctx = no_gpu_context(&gpus);
  ctx.spec["slurm"]["gpus_per_node"] = 4;
  const auto rows = run_probes({h2d_probe(), matmul_probe()}, ctx);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.status, Status::kFail);
    EXPECT_NE(r.detail.find("the spec gives this node 4 GPUs"), std::string::npos) << r.detail;
  }
  EXPECT_EQ(exit_code(rows), ExitCode::kCheckFailed);
}

TEST(GpuRateProbes, ADeviceThatCudaCannotUseFailsNamingTheGpu) {
  // NVML and CUDA say one device, but this machine has none: the real measurement must fail
  // (cudaSetDevice, or the runtime not loadable) with a row per GPU rather than crash.
  GpuInfo one;
  one.devices = {{"NVIDIA H200", 139.8}};
  one.cuda_visible = 1;
  const FakeGpus gpus(one);
  Context ctx = no_gpu_context(&gpus);
  ctx.copy_sizes = {1 << 20};
  ctx.copy_reps = 1;
  ctx.matmul_n = 64;
  ctx.matmul_reps = 1;
  const auto rows = run_probes({d2d_probe(), matmul_probe()}, ctx);
  ASSERT_EQ(rows.size(), 2u);
  // On the GPU machine CUDA can use gpu 0: the premise cannot be staged there, and the same rows
  // must then measure it (the test holds on both kinds of machine).
  int real = 0;
  if (cudart().ok() && cudart().get_device_count(&real) == 0 && real > 0) {
    for (const auto& r : rows) {
      EXPECT_NE(r.status, Status::kFail) << r.detail;
      EXPECT_NE(r.detail.find("gpu 0"), std::string::npos) << r.detail;
    }
    return;
  }
  for (const auto& r : rows) {
    EXPECT_EQ(r.status, Status::kFail) << r.detail;
    const bool names_gpu = r.detail.find("gpu 0") != std::string::npos;
    const bool no_runtime = r.detail.find("not loadable") != std::string::npos;
    EXPECT_TRUE(names_gpu || no_runtime) << r.detail;
  }
}

TEST(CudaApi, LoadsEverySymbolOrSaysWhy) {
  // The one loader: on this machine the libraries may or may not be installed; either every
  // symbol resolved or why() says what is missing. Never half-loaded and silent.
  const CudaRuntime& rt = cudart();
  if (rt.ok()) {
    EXPECT_NE(rt.memcpy_async, nullptr);
    EXPECT_NE(rt.event_elapsed_time, nullptr);
    EXPECT_FALSE(rt.library.empty());
  } else {
    EXPECT_FALSE(rt.why.empty());
  }
  const Cublas& b = cublas();
  if (b.ok()) EXPECT_NE(b.gemm_ex, nullptr);
  else EXPECT_FALSE(b.why.empty());
  const Nccl& n = nccl();
  if (n.ok()) {
    EXPECT_NE(n.comm_init_all, nullptr);
    int v = 0;
    EXPECT_EQ(n.get_version(&v), 0);
    EXPECT_GE(v, 2000);  // NCCL 2.x: major * 10000 + minor * 100 + patch
  } else {
    EXPECT_FALSE(n.why.empty());
  }
}

}  // namespace
}  // namespace verl::probes
