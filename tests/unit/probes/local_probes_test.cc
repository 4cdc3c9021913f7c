// The probes that read this machine: shm and disk against statvfs of a temp dir, versions, ib
// from given ports, gpu against a fake GPU source (skipped without a device, a failure when the
// spec gives the node GPUs).
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "probes/gpu_probe.h"
#include "probes/harness.h"
#include "probes/probes.h"
#include "tests/testing/fake_gpus.h"
#include "tests/testing/temp_dir.h"

namespace verl::probes {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

double statvfs_gib(const std::string& path, bool free) {
  struct statvfs st {};
  EXPECT_EQ(::statvfs(path.c_str(), &st), 0);
  return static_cast<double>(free ? st.f_bavail : st.f_blocks) * st.f_frsize / kGiB;
}

Context spec_with(const Json& probes) {
  Context ctx;
  ctx.node = "here";
  ctx.spec = {{"probes", probes}, {"nodes", Json::array()}, {"slurm", {{"gpus_per_node", 0}}}};
  return ctx;
}

TEST(ShmProbe, MeasuresTheSizeOfTheDirectorysFilesystem) {
  TempDir dir{"probes"};
  Context ctx = spec_with({{"min_shm_gib", 0.001}});
  ctx.shm_path = dir.str();
  const auto rows = run_probes({shm_probe()}, ctx);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].metric, "size");
  EXPECT_EQ(rows[0].unit, "GiB");
  ASSERT_TRUE(rows[0].value);
  EXPECT_NEAR(*rows[0].value, statvfs_gib(dir.str(), false), 0.01);
  EXPECT_EQ(rows[0].status, Status::kPass);
}

TEST(ShmProbe, FailsUnderAnImpossibleThreshold) {
  TempDir dir{"probes"};
  Context ctx = spec_with({{"min_shm_gib", 1e9}});
  ctx.shm_path = dir.str();
  const auto rows = run_probes({shm_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_EQ(exit_code(rows), ExitCode::kCheckFailed);
}

TEST(ShmProbe, AMissingDirectoryFails) {
  Context ctx = spec_with({{"min_shm_gib", 1.0}});
  ctx.shm_path = "/nonexistent/shm";
  const auto rows = run_probes({shm_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_NE(rows[0].detail.find("/nonexistent/shm"), std::string::npos);
}

TEST(DiskProbe, MeasuresFreeSpaceAtTheNearestExistingParent) {
  TempDir dir{"probes"};
  Context ctx = spec_with({{"min_free_disk_gib", 0.0}});
  ctx.checkpoint_dir = dir.str() + "/ckpt/project/exp";  // not made yet: the first save makes it
  const auto rows = run_probes({disk_probe()}, ctx);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].value);
  EXPECT_NEAR(*rows[0].value, statvfs_gib(dir.str(), true), 0.5);  // other writers may move it a little
  EXPECT_EQ(rows[0].detail.rfind(dir.str() + " (nearest existing parent of " + ctx.checkpoint_dir + ")", 0), 0u)
      << rows[0].detail;
  EXPECT_EQ(rows[0].status, Status::kPass);
}

TEST(DiskProbe, FailsWhenFreeSpaceIsUnderTheThreshold) {
  TempDir dir{"probes"};
  Context ctx = spec_with({{"min_free_disk_gib", 1e9}});
  ctx.checkpoint_dir = dir.str();
  const auto rows = run_probes({disk_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_EQ(rows[0].detail, dir.str());
}

TEST(FsSpace, ARelativePathIsMeasuredFromTheWorkingDirectory) {
  const FsSpace s = fs_space("surely/not/here");
  EXPECT_EQ(s.path, fs::current_path().string());
}

TEST(VersionsProbe, NamesTheBuildAndSkipsTheDriverWithoutOne) {
  TempDir sys{"probes"};
  Context ctx = spec_with(Json::object());
  ctx.sysfs_root = sys.str();
  auto rows = run_probes({versions_probe()}, ctx);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].metric, "verlctl");
  EXPECT_NE(rows[0].detail.find("commit"), std::string::npos);
  EXPECT_EQ(rows[4].metric, "driver");
  EXPECT_EQ(rows[4].status, Status::kSkipped);

  fs::create_directories(sys.str() + "/module/nvidia");
  std::ofstream(sys.str() + "/module/nvidia/version") << "570.86.15\n";
  rows = run_probes({versions_probe()}, ctx);
  EXPECT_EQ(rows[4].status, Status::kPass);
  EXPECT_EQ(rows[4].detail, "NVIDIA 570.86.15");
}

TEST(IbProbe, SkippedWithoutPortsAndWarnsForAPortThatIsDown) {
  Context ctx = spec_with(Json::object());
  auto rows = run_probes({ib_probe()}, ctx);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kSkipped);

  ctx.ib_ports = {{"mlx5_0:1", "4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)"},
                  {"mlx5_1:1", "1: DOWN", "Ethernet", "100 Gb/sec (4X EDR)"}};
  rows = run_probes({ib_probe()}, ctx);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, Status::kPass);
  EXPECT_EQ(*rows[0].value, 400.0);
  EXPECT_EQ(rows[1].status, Status::kWarn);
  EXPECT_NE(rows[1].detail.find("mlx5_1:1 1: DOWN"), std::string::npos);
  EXPECT_EQ(exit_code(rows), ExitCode::kOk);
}

TEST(IbRate, ParsesTheLeadingNumber) {
  EXPECT_EQ(parse_ib_rate_gbps("200 Gb/sec (4X HDR)"), 200.0);
  EXPECT_EQ(parse_ib_rate_gbps("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_FALSE(parse_ib_rate_gbps("unknown"));
}

using testing::FakeGpus;
using testing::no_gpu;

TEST(GpuProbe, SkippedWithoutADeviceWhenTheSpecGivesNone) {
  const FakeGpus none(no_gpu());
  Context ctx = spec_with(Json::object());
  ctx.gpus = &none;
  const auto rows = run_probes({gpu_probe()}, ctx);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kSkipped);
  EXPECT_EQ(rows[0].detail.rfind("skipped: no CUDA device", 0), 0u) << rows[0].detail;
  EXPECT_EQ(exit_code(rows), ExitCode::kOk);
}

TEST(GpuProbe, FailsWithoutADeviceWhenTheSpecGivesTheNodeAGpu) {
  const FakeGpus none(no_gpu());
  Context ctx = spec_with(Json::object());
  ctx.gpus = &none;
  ctx.spec["nodes"] = Json::array({{{"host", "localhost"}, {"gpus", 1}}});
  auto rows = run_probes({gpu_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_NE(rows[0].detail.find("1 GPUs"), std::string::npos) << rows[0].detail;
  EXPECT_EQ(exit_code(rows), ExitCode::kCheckFailed);

  ctx.spec["nodes"] = Json::array();
  ctx.spec["slurm"]["gpus_per_node"] = 8;
  rows = run_probes({gpu_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
}

TEST(GpuProbe, ReportsEachDeviceAndFailsWhenFewerThanTheSpecSays) {
  GpuInfo two;
  two.devices = {{"NVIDIA H200", 139.8}, {"NVIDIA H200", 139.8}};
  two.driver_version = "570.86.15";
  two.cuda_runtime = "13.0";
  const FakeGpus gpus(two);
  Context ctx = spec_with(Json::object());
  ctx.gpus = &gpus;
  ctx.spec["nodes"] = Json::array({{{"host", "localhost"}, {"gpus", 2}}});
  auto rows = run_probes({gpu_probe()}, ctx);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].status, Status::kPass);
  EXPECT_EQ(*rows[0].value, 2.0);
  EXPECT_NE(rows[0].detail.find("driver 570.86.15, CUDA runtime 13.0"), std::string::npos);
  EXPECT_EQ(rows[1].metric, "memory");
  EXPECT_EQ(rows[1].unit, "GiB");
  EXPECT_EQ(rows[1].detail, "gpu 0: NVIDIA H200");

  ctx.spec["nodes"][0]["gpus"] = 4;
  rows = run_probes({gpu_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
}

TEST(GpuProbe, SaysWhenCudaSeesFewerDevicesThanTheDriver) {
  GpuInfo one;
  one.devices = {{"NVIDIA H200", 139.8}};
  one.cuda_visible = 0;
  const FakeGpus gpus(one);
  Context ctx = spec_with(Json::object());
  ctx.gpus = &gpus;
  const auto rows = run_probes({gpu_probe()}, ctx);
  EXPECT_NE(rows[0].detail.find("CUDA sees 0 (CUDA_VISIBLE_DEVICES)"), std::string::npos) << rows[0].detail;
}

TEST(GpuProbe, TheRealSourceRunsOnThisMachine) {
  // With or without a GPU and its libraries, the dlopen source answers instead of crashing;
  // without a device it says why.
  const GpuInfo info = DlopenGpuSource().query();
  if (info.devices.empty()) EXPECT_FALSE(info.why_none.empty());
}

TEST(CudaVersion, DecodesTheRuntimesEncoding) {
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(13000), "13.0");
}

}  // namespace
}  // namespace verl::probes
