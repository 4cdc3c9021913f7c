// The job preflight on a temporary tree: a complete model directory and data files pass; a
// missing data file, a shard the index names but the directory lacks, a truncated shard, a
// missing tokenizer, and a checkpoint directory under a file each fail, naming the key and path.
#include "cli/job_preflight.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "common/config.h"
#include "common/error.h"

namespace verl::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A safetensors file with one float32 tensor of n values (8-byte little-endian header length,
// JSON header, raw data), as the format's spec describes it.
std::string safetensors(int n) {
  const std::string header =
      Json{{"w", {{"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {0, 4 * n}}}}}.dump();
  std::string out(8, '\0');
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + std::string(4 * static_cast<size_t>(n), '\1');
}

struct Tree {
  fs::path root = fs::temp_directory_path() / ("verl_preflight_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::path model = root / "model";
  Tree() {
    fs::remove_all(root);
    write(root / "data/train.jsonl", "{\"prompt\": [{\"role\": \"user\", \"content\": \"1+1\"}], \"data_source\": \"x\"}\n");
    write(root / "data/val.jsonl", "{\"prompt\": [{\"role\": \"user\", \"content\": \"2+2\"}], \"data_source\": \"x\"}\n");
    write(model / "config.json", R"({"architectures": ["Qwen2ForCausalLM"], "torch_dtype": "float32"})");
    write(model / "model.safetensors.index.json",
          R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
    write(model / "model-00001-of-00002.safetensors", safetensors(16));
    write(model / "model-00002-of-00002.safetensors", safetensors(8));
    write(model / "tokenizer.json", "{}");
    write(model / "tokenizer_config.json", "{}");
  }
  ~Tree() { fs::remove_all(root); }
  Json config(std::vector<std::string> overrides = {}) const {
    std::vector<std::string> o = {"data.train_files=" + (root / "data/train.jsonl").string(),
                                  "data.val_files=" + (root / "data/val.jsonl").string(),
                                  "actor_rollout_ref.model.path=" + model.string(),
                                  "algorithm.adv_estimator=grpo",
                                  "trainer.default_local_dir=" + (root / "ckpt").string()};
    o.insert(o.end(), overrides.begin(), overrides.end());
    return config::load_job("", o);
  }
};

const PreflightCheck* failed(const PreflightReport& r) {
  for (const auto& c : r.checks)
    if (!c.ok) return &c;
  return nullptr;
}

TEST(JobPreflight, ACompleteTreePassesEveryCheck) {
  Tree t;
  const PreflightReport r = run_job_preflight(t.config({"trainer.save_freq=1"}));
  EXPECT_TRUE(r.ok()) << to_json(r).dump(2);
  ASSERT_EQ(r.checks.size(), 4u) << "model, checkpoint, two data files";
  EXPECT_EQ(r.checks[0].check, "model");
  EXPECT_NE(r.checks[0].detail.find("2 shards"), std::string::npos) << r.checks[0].detail;
  EXPECT_EQ(r.checks[1].check, "checkpoint");
  EXPECT_NE(r.checks[1].detail.find("one checkpoint about"), std::string::npos) << r.checks[1].detail;
  EXPECT_EQ(to_json(r)["ok"], true);
}

TEST(JobPreflight, AMissingDataFileFailsNamingKeyAndPath) {
  Tree t;
  fs::remove(t.root / "data/val.jsonl");
  const PreflightReport r = run_job_preflight(t.config());
  const PreflightCheck* bad = failed(r);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->check, "data");
  EXPECT_EQ(bad->key, "data.val_files");
  EXPECT_EQ(bad->path, (t.root / "data/val.jsonl").string());
  EXPECT_NE(bad->detail.find("val.jsonl"), std::string::npos) << bad->detail;
}

TEST(JobPreflight, AShardTheIndexNamesMustBeThereWhole) {
  Tree t;
  fs::remove(t.model / "model-00002-of-00002.safetensors");
  PreflightReport r = run_job_preflight(t.config());
  const PreflightCheck* bad = failed(r);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->key, "actor_rollout_ref.model.path");
  EXPECT_NE(bad->detail.find("model-00002-of-00002.safetensors is missing"), std::string::npos) << bad->detail;

  Tree u;
  const std::string whole = safetensors(8);
  write(u.model / "model-00002-of-00002.safetensors", whole.substr(0, whole.size() - 5));  // a copy cut short
  r = run_job_preflight(u.config());
  bad = failed(r);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->detail.find("its header says " + std::to_string(whole.size())), std::string::npos) << bad->detail;
}

TEST(JobPreflight, TheTokenizerFilesMustBeInTheModelDirectory) {
  Tree t;
  fs::remove(t.model / "tokenizer_config.json");
  const PreflightReport r = run_job_preflight(t.config());
  const PreflightCheck* bad = failed(r);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->detail.find("no tokenizer_config.json"), std::string::npos) << bad->detail;
}

TEST(JobPreflight, ACheckpointDirectoryUnderAFileFails) {
  Tree t;
  write(t.root / "afile", "x");
  const PreflightReport r = run_job_preflight(t.config({"trainer.default_local_dir=" + (t.root / "afile/ckpt").string()}));
  const PreflightCheck* bad = failed(r);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->check, "checkpoint");
  EXPECT_NE(bad->detail.find("is not a directory"), std::string::npos) << bad->detail;
}

TEST(JobPreflight, SafetensorsExpectedSizeReadsTheHeader) {
  Tree t;
  const fs::path f = t.model / "model-00001-of-00002.safetensors";
  EXPECT_EQ(safetensors_expected_size(f.string()), static_cast<int64_t>(fs::file_size(f)));
  write(t.root / "short", "abc");
  EXPECT_THROW(safetensors_expected_size((t.root / "short").string()), Error);
}

}  // namespace
}  // namespace verl::cli
