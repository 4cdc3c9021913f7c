// The nvidia-smi query parser on real output text, and sample_gpus() against a program that
// prints it (and against ones that are missing, fail or hang).
#include "launcher/gpu_sampler.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {
namespace fs = std::filesystem;

// `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total
// --format=csv,noheader,nounits` on an 8-GPU H200 host, one GPU busy.
const char* kEightH200 =
    "0, 97, 70123, 143771\n"
    "1, 0, 4, 143771\n"
    "2, 0, 4, 143771\n"
    "3, 0, 4, 143771\n"
    "4, 0, 4, 143771\n"
    "5, 0, 4, 143771\n"
    "6, 0, 4, 143771\n"
    "7, 0, 4, 143771\n";

TEST(GpuSampler, ParsesRealQueryOutput) {
  const auto s = parse_gpu_query(kEightH200);
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s[0].index, 0);
  EXPECT_EQ(s[0].util_pct, 97);
  EXPECT_EQ(s[0].mem_used_mib, 70123);
  EXPECT_EQ(s[0].mem_total_mib, 143771);
  EXPECT_EQ(s[7].index, 7);
  EXPECT_EQ(s[7].util_pct, 0);
  EXPECT_EQ(s[7].mem_used_mib, 4);
}

TEST(GpuSampler, NotSupportedFieldsAreMissingNotZero) {
  // A MIG-enabled GPU reports no utilisation.
  const auto s = parse_gpu_query("0, [N/A], 13, 81559\n1, [Not Supported], [N/A], 81559\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].util_pct, -1);
  EXPECT_EQ(s[0].mem_used_mib, 13);
  EXPECT_EQ(s[1].mem_used_mib, -1);
  const auto j = to_json(s[1]);
  EXPECT_TRUE(j["util_pct"].is_null());
  EXPECT_EQ(j["mem_total_mib"], 81559);
}

TEST(GpuSampler, SkipsLinesThatAreNotGpus) {
  EXPECT_TRUE(parse_gpu_query("No devices were found\n").empty());
  EXPECT_TRUE(parse_gpu_query("").empty());
  EXPECT_TRUE(parse_gpu_query("index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n").empty());
}

TEST(GpuSampler, JsonRoundTrip) {
  const auto s = parse_gpu_query("0, 50, 100, 200\n1, [N/A], 1, 2\n");
  const auto j = to_json(s);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.dump(),
            R"([{"index":0,"util_pct":50,"mem_used_mib":100,"mem_total_mib":200},)"
            R"({"index":1,"util_pct":null,"mem_used_mib":1,"mem_total_mib":2}])");
  const auto back = gpu_samples_from_json(j);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].util_pct, 50);
  EXPECT_EQ(back[1].util_pct, -1);
  EXPECT_EQ(back[1].mem_total_mib, 2);
}

class GpuSamplerRun : public ::testing::Test {
 protected:
  std::string script(const std::string& body) { return dir_.script("nvidia-smi", body); }
  testing::TempDir dir_{"smi"};
};

TEST_F(GpuSamplerRun, RunsTheQueryAndParsesIt) {
  // The fake answers only the exact query sample_gpus() must send.
  const auto smi = script(
      "[ \"$1\" = --query-gpu=index,utilization.gpu,memory.used,memory.total ] && "
      "[ \"$2\" = --format=csv,noheader,nounits ] || exit 9\n"
      "printf '0, 12, 345, 143771\\n1, 0, 4, 143771\\n'");
  const auto s = sample_gpus(smi);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].util_pct, 12);
  EXPECT_EQ(s[1].mem_total_mib, 143771);
}

TEST_F(GpuSamplerRun, EmptyWhenMissingFailingOrHung) {
  EXPECT_TRUE(sample_gpus((dir_ / "absent").string()).empty());
  EXPECT_TRUE(sample_gpus(script("echo 'NVIDIA-SMI has failed' >&2; exit 9")).empty());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(sample_gpus(script("sleep 30"), std::chrono::milliseconds(300)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace verl::launcher
