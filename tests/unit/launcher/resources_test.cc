// Resource detection against fake /proc and /sys trees, and the parsers it is made of.
#include "launcher/resources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {
namespace fs = std::filesystem;

class FakeRoot : public ::testing::Test {
 protected:
  void write(const std::string& rel, const std::string& text) { dir_.write(rel, text); }
  testing::TempDir dir_{"res"};
  const fs::path root_ = dir_.path();
};

TEST(Resources, MeminfoTotalInBytes) {
  EXPECT_EQ(parse_meminfo_total("MemFree:  100 kB\nMemTotal:       16384 kB\n"), int64_t{16384} * 1024);
  EXPECT_EQ(parse_meminfo_total("MemFree: 1 kB\n"), 0);
}

TEST(Resources, NvidiaSmiListNames) {
  const auto names = parse_nvidia_smi_list(
      "GPU 0: NVIDIA H200 (UUID: GPU-1234-abcd)\nGPU 1: NVIDIA H200 (UUID: GPU-5678)\nNo devices were found\n");
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "NVIDIA H200");
  EXPECT_TRUE(parse_nvidia_smi_list("No devices were found\n").empty());
}

TEST_F(FakeRoot, DetectsFromFakeProcAndSys) {
  write("proc/meminfo", "MemTotal:       2097152 kB\n");
  write("proc/driver/nvidia/gpus/0000:01:00.0/information", "Model: X\n");
  write("proc/driver/nvidia/gpus/0000:02:00.0/information", "Model: X\n");
  write("sys/class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
  write("sys/class/infiniband/mlx5_1/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  write("sys/class/infiniband/mlx5_1/ports/1/link_layer", "InfiniBand\n");
  write("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  ResourceRoots roots;
  roots.proc = (root_ / "proc").string();
  roots.sys = (root_ / "sys").string();
  roots.nvidia_smi = "";  // not run: /proc decides
  const auto r = detect_resources(roots);
  EXPECT_EQ(r.memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(r.gpus, 2);
  EXPECT_GE(r.cpus, 1);
  ASSERT_EQ(r.ib_ports.size(), 2u);
  EXPECT_EQ(r.ib_ports[0].device, "mlx5_0");  // sorted
  EXPECT_EQ(r.ib_ports[0].state, "1: DOWN");
  EXPECT_EQ(r.ib_ports[1].rate, "400 Gb/sec (4X NDR)");
  EXPECT_EQ(r.ib_ports[1].link_layer, "InfiniBand");
}

TEST_F(FakeRoot, NothingThereIsZero) {
  ResourceRoots roots;
  roots.proc = (root_ / "proc").string();
  roots.sys = (root_ / "sys").string();
  roots.nvidia_smi = (root_ / "no-such-nvidia-smi").string();
  const auto r = detect_resources(roots);
  EXPECT_EQ(r.memory_bytes, 0);
  EXPECT_EQ(r.gpus, 0);
  EXPECT_TRUE(r.ib_ports.empty());
}

TEST_F(FakeRoot, NvidiaSmiWinsWhenItAnswers) {
  write("bin/nvidia-smi", "#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n");
  fs::permissions(root_ / "bin/nvidia-smi", fs::perms::owner_all);
  ResourceRoots roots;
  roots.proc = (root_ / "proc").string();
  roots.sys = (root_ / "sys").string();
  roots.nvidia_smi = (root_ / "bin/nvidia-smi").string();
  const auto r = detect_resources(roots);
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.gpu_names, std::vector<std::string>{"Fake GPU"});
}

TEST(Resources, RealMachineHasCpusAndMemory) {
  const auto r = detect_resources();
  EXPECT_GE(r.cpus, 1);
  EXPECT_GT(r.memory_bytes, 0);
}

TEST(Resources, JsonRoundTripAndBadJsonIsAnError) {
  Resources r;
  r.cpus = 8;
  r.memory_bytes = 123;
  r.gpus = 2;
  r.gpu_names = {"a", "b"};
  r.ib_ports = {{"mlx5_0", 1, "4: ACTIVE", "200", "InfiniBand"}};
  const auto back = resources_from_json(to_json(r));
  EXPECT_EQ(back.cpus, 8);
  EXPECT_EQ(back.gpu_names, r.gpu_names);
  EXPECT_EQ(back.ib_ports[0].device, "mlx5_0");
  EXPECT_THROW(resources_from_json({{"cpus", "many"}}), Error);
  EXPECT_THROW(resources_from_json({{"cpus", -1}, {"memory_bytes", 0}, {"gpus", 0}}), Error);
}

using Json = nlohmann::ordered_json;

TEST(Resources, DeclaredResourcesReplaceTheDetectedOnesAndRoundTrip) {
  Resources detected;
  detected.cpus = 128;
  detected.gpus = 8;
  for (int i = 0; i < 8; ++i) detected.gpu_names.push_back("GPU" + std::to_string(i));
  DeclaredResources d = declared_resources(Json{{"host", "a"}, {"resources", {{"cpus", 32}, {"gpus", nullptr}, {"gpu_ids", {6, 7}}}}});
  ASSERT_TRUE(d.any());
  const Resources r = declare(detected, d, "node-0 (nodes[0].resources)");
  EXPECT_EQ(r.cpus, 32);
  EXPECT_EQ(r.gpus, 2);
  EXPECT_EQ(r.usable_gpus(), (std::vector<int>{6, 7}));
  EXPECT_EQ(r.gpu_names, (std::vector<std::string>{"GPU6", "GPU7"}));
  EXPECT_TRUE(r.declared);
  EXPECT_EQ(r.detected_cpus, 128);
  EXPECT_EQ(r.detected_gpus, 8);
  const Resources back = resources_from_json(to_json(r));
  EXPECT_EQ(back.gpu_ids, r.gpu_ids);
  EXPECT_EQ(back.detected_gpus, 8);
  EXPECT_FALSE(declared_resources(Json{{"host", "a"}}).any()) << "no resources: the detected ones stay";
}

TEST(Resources, DeclaringGpusTheNodeLacksIsAnInvalidConfigNamingTheNode) {
  Resources detected;
  detected.cpus = 4;
  detected.gpus = 2;
  DeclaredResources d;
  d.gpus = 4;
  try {
    declare(detected, d, "node-1 (nodes[1].resources)");
    FAIL() << "4 GPUs declared on a node with 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("node-1 (nodes[1].resources)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 GPUs detected"), std::string::npos) << e.what();
  }
  DeclaredResources ids;
  ids.gpu_ids = std::vector<int>{0, 2};
  EXPECT_THROW(declare(detected, ids, "node-1"), Error) << "index 2 on a node with GPUs 0 and 1";
  ids.gpu_ids = std::vector<int>{1, 1};
  EXPECT_THROW(declare(detected, ids, "node-1"), Error) << "an index twice";
  ids.gpu_ids = std::vector<int>{1};
  ids.gpus = 2;
  EXPECT_THROW(declare(detected, ids, "node-1"), Error) << "gpus and gpu_ids disagree";
  DeclaredResources fewer;
  fewer.gpus = 0;
  EXPECT_EQ(declare(detected, fewer, "node-1").gpus, 0) << "fewer than detected is allowed";
}

TEST(Resources, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(int64_t{3} << 29), "1.5 GiB");
}

}  // namespace
}  // namespace verl::launcher
