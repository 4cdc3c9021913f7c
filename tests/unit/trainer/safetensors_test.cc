// safetensors: what we write reads back bit for bit (every dtype, one file or shards with HF's
// index), and every way a file can be broken is refused with an error naming file and tensor.
#include "trainer/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace verl::trainer::safetensors {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("verl_safetensors_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::vector<NamedTensor> sample_tensors() {
  torch::manual_seed(1);
  return {
      {"a.f32", torch::randn({3, 5})},
      {"b.bf16", torch::randn({4}).to(torch::kBFloat16)},
      {"c.f16", torch::randn({2, 2, 2}).to(torch::kFloat16)},
      {"d.i64", torch::arange(7, torch::kLong)},
      {"e.i32", torch::arange(3, torch::kInt)},
      {"f.bool", torch::tensor({true, false, true})},
      {"g.scalar", torch::tensor(2.5f)},
      {"h.empty", torch::zeros({0, 4})},
  };
}

// Writes an 8-byte length + header + data file by hand, to test what our writer never makes.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) out.put(static_cast<char>(n & 0xff));
  out << header << data;
}

// Runs f, expecting a verl::Error with kInvalidConfig whose message contains every needle.
template <typename F>
void expect_invalid(F f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
  }
}

TEST(Safetensors, EveryDtypeRoundTripsBitForBit) {
  TempDir dir;
  const auto tensors = sample_tensors();
  write_file(dir / "x.safetensors", tensors);
  auto f = File::open(dir / "x.safetensors");
  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (const auto& t : tensors) {
    auto v = f->view(t.name);
    EXPECT_EQ(v.scalar_type(), t.tensor.scalar_type()) << t.name;
    EXPECT_EQ(v.sizes(), t.tensor.sizes()) << t.name;
    EXPECT_TRUE(torch::equal(v, t.tensor)) << t.name;
  }
  EXPECT_EQ(f->metadata().at("format"), "pt");
}

TEST(Safetensors, HeaderIsHfShapedAndDataIsAligned) {
  TempDir dir;
  write_file(dir / "x.safetensors", {{"w", torch::ones({2, 3})}, {"b", torch::zeros({3})}});
  std::ifstream in(dir / "x.safetensors", std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  EXPECT_EQ(n % 8, 0u);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  auto j = json::parse(header);
  EXPECT_EQ(j["w"]["dtype"], "F32");
  EXPECT_EQ(j["w"]["shape"], json({2, 3}));
  EXPECT_EQ(j["w"]["data_offsets"], json({0, 24}));
  EXPECT_EQ(j["b"]["data_offsets"], json({24, 36}));
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
  EXPECT_EQ(fs::file_size(dir / "x.safetensors"), 8 + n + 36);
}

TEST(Safetensors, ConvertsToTheRequestedDtypeWhileWriting) {
  TempDir dir;
  WriteOptions o;
  o.dtype = torch::kBFloat16;
  auto w = torch::randn({8, 8});
  write_file(dir / "x.safetensors", {{"w", w}}, o);
  auto f = File::open(dir / "x.safetensors");
  EXPECT_EQ(f->tensors().at("w").dtype, torch::kBFloat16);
  EXPECT_TRUE(torch::equal(f->view("w"), w.to(torch::kBFloat16)));
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
  TempDir dir;
  write_file(dir / "x.safetensors", {{"first", torch::ones({4})}, {"second", torch::ones({64})}});
  fs::resize_file(dir / "x.safetensors", fs::file_size(dir / "x.safetensors") - 10);
  expect_invalid([&] { File::open(dir / "x.safetensors"); }, {dir / "x.safetensors", "'second'", "truncated"});
  fs::resize_file(dir / "x.safetensors", 5);
  expect_invalid([&] { File::open(dir / "x.safetensors"); }, {dir / "x.safetensors", "shorter than"});
}

TEST(Safetensors, BrokenHeadersAreRefused) {
  TempDir dir;
  const std::string p = dir / "x.safetensors";
  write_raw(p, "{not json", "");
  expect_invalid([&] { File::open(p); }, {p, "not JSON"});

  write_raw(p, R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", "xx");
  expect_invalid([&] { File::open(p); }, {p, "'w'", "unknown dtype 'F8_E4M3'"});

  write_raw(p, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::string(8, '\0'));
  expect_invalid([&] { File::open(p); }, {p, "'w'", "12 bytes", "span 8"});

  write_raw(p, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            std::string(12, '\0'));
  expect_invalid([&] { File::open(p); }, {p, "overlap"});

  write_raw(p, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", std::string(8, '\0'));
  expect_invalid([&] { File::open(p); }, {p, "'w'", "negative"});

  {  // a header length past the end of the file
    std::ofstream out(p, std::ios::binary);
    const unsigned char len[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    out.write(reinterpret_cast<const char*>(len), 8);
    out << "{}";
  }
  expect_invalid([&] { File::open(p); }, {p, "header length 65535"});
}

TEST(Safetensors, ShardsPastTheLimitWithAnHfIndex) {
  TempDir dir;
  std::vector<NamedTensor> tensors;
  for (int i = 0; i < 5; ++i) tensors.push_back({"layer" + std::to_string(i), torch::full({10}, float(i))});  // 40 B each
  tensors.push_back({"big", torch::ones({50})});  // 200 B, over the limit alone
  WriteOptions o;
  o.max_shard_bytes = 100;
  const auto written = write_checkpoint(dir.path().string(), tensors, o);
  const std::vector<std::string> want = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                         "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                         "model.safetensors.index.json"};
  EXPECT_EQ(written, want);
  auto index = json::parse(std::ifstream(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 5 * 40 + 200);
  EXPECT_EQ(index["weight_map"]["layer0"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["layer1"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["layer2"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["layer4"], "model-00003-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["big"], "model-00004-of-00004.safetensors");

  auto ckpt = Checkpoint::open_dir(dir.path().string());
  EXPECT_EQ(ckpt.names().size(), tensors.size());
  for (const auto& t : tensors) EXPECT_TRUE(torch::equal(ckpt.view(t.name), t.tensor)) << t.name;
  EXPECT_EQ(ckpt.file_of("big"), dir / "model-00004-of-00004.safetensors");

  // Saving again, unsharded, into the same directory leaves no shard or index of the first save.
  write_checkpoint(dir.path().string(), {{"only", torch::ones({2})}});
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / "model-00001-of-00004.safetensors"));
  EXPECT_EQ(Checkpoint::open_dir(dir.path().string()).names(), std::vector<std::string>{"only"});
}

TEST(Safetensors, IndexAndShardsMustAgree) {
  TempDir dir;
  WriteOptions o;
  o.max_shard_bytes = 8;
  write_checkpoint(dir.path().string(), {{"a", torch::ones({2})}, {"b", torch::ones({2})}}, o);
  auto index = json::parse(std::ifstream(dir / "model.safetensors.index.json"));
  index["weight_map"]["a"] = "model-00002-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  expect_invalid([&] { Checkpoint::open_dir(dir.path().string()); },
                 {"model.safetensors.index.json", "'a'", "model-00002-of-00002.safetensors"});
  index["weight_map"]["a"] = "../elsewhere.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  expect_invalid([&] { Checkpoint::open_dir(dir.path().string()); }, {"outside the directory"});
}

TEST(Safetensors, DirectoryWithoutWeightsSaysWhatItWants) {
  TempDir dir;
  expect_invalid([&] { Checkpoint::open_dir(dir.path().string()); }, {dir.path().string(), "model.safetensors"});
}

TEST(Safetensors, ViewsCopyStraightIntoAnotherDtype) {
  TempDir dir;
  auto w = torch::randn({16, 4}).to(torch::kBFloat16);
  write_file(dir / "x.safetensors", {{"w", w}});
  auto f = File::open(dir / "x.safetensors");
  auto target = torch::empty({16, 4});
  target.copy_(f->view("w"));
  EXPECT_TRUE(torch::equal(target, w.to(torch::kFloat32)));
}

}  // namespace
}  // namespace verl::trainer::safetensors
