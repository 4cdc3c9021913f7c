// ParquetFile against files written by a real parquet writer that is not ours (parquet-wasm =
// arrow-rs, tests/peers/write_parquet.mjs). A few small ones are committed under tests/data/parquet
// (regenerate: node tests/peers/write_parquet.mjs <dir> 20); the whole matrix of codecs,
// encodings, page versions and row groups is written at test time by
// tests/integration/parquet_peer_test.sh, which runs ParquetPeer.* with VERL_PARQUET_PEER_DIR.
#include "data/parquet.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"

namespace verl::data {
namespace {

const std::string kFixtures = std::string(VERL_SOURCE_DIR) + "/tests/data/parquet/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json expected(const std::string& path) { return nlohmann::json::parse(slurp(path)); }

// The first row that differs, shown both ways.
::testing::AssertionResult same_rows(const std::vector<nlohmann::json>& got, const nlohmann::json& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " rows, the writer wrote " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "row " << i << " differs\n    want: " << want[i].dump()
                                           << "\n    ours: " << got[i].dump();
  }
  return ::testing::AssertionSuccess();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  return "(no error)";
}

TEST(Parquet, ReadsVerlGsm8kShapeAsWritten) {
  const auto file = ParquetFile::open(kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet");
  EXPECT_EQ(file.num_rows(), 20);
  EXPECT_GT(file.num_row_groups(), 1);
  EXPECT_EQ(file.columns(), (std::vector<std::string>{"data_source", "prompt", "ability", "reward_model", "extra_info"}));
  const auto rows = file.read_rows();
  EXPECT_TRUE(same_rows(rows, expected(kFixtures + "gsm8k.expected.json")));
  EXPECT_EQ(rows[3]["prompt"][0]["role"], "user");
  EXPECT_EQ(rows[3]["extra_info"]["index"], 3);
  EXPECT_EQ(rows[3]["reward_model"]["style"], "rule");
}

TEST(Parquet, ReadsEveryTypeWithNullsAtEveryLevel) {
  const auto rows = ParquetFile::open(kFixtures + "types_zstd_plain_v1_rgN.parquet").read_rows();
  EXPECT_TRUE(same_rows(rows, expected(kFixtures + "types.expected.json")));
  EXPECT_TRUE(rows[0]["meta"].is_null());          // a null struct
  EXPECT_EQ(rows[1]["tags"], nlohmann::json::array());  // an empty list, not null
  EXPECT_TRUE(rows[0]["tags"].is_null());          // a null list
  EXPECT_TRUE(rows[5]["nothing"].is_null());       // the null type
}

TEST(Parquet, NamesTheLeavesAsPyarrowDoes) {
  const auto file = ParquetFile::open_footer(kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet");
  std::vector<std::string> paths;
  for (const auto& l : file.leaves()) paths.push_back(l.path);
  EXPECT_EQ(paths[1], "prompt.list.element.role");
  EXPECT_EQ(file.leaves()[1].type, "BYTE_ARRAY (string)");
  EXPECT_THROW(file.read_rows(), Error);  // footer only
}

TEST(Parquet, RefusesADeltaEncodingNamingTheColumnAndHowToResave) {
  const auto msg = error_of([] { ParquetFile::open(kFixtures + "unsupported_delta.parquet").read_rows(); });
  EXPECT_NE(msg.find("unsupported_delta.parquet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("column 'i64'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DELTA_BINARY_PACKED"), std::string::npos) << msg;
  EXPECT_NE(msg.find("df.to_parquet"), std::string::npos) << msg;
}

TEST(Parquet, RefusesWhatIsNotParquetNamingTheFile) {
  const auto msg = error_of([] { ParquetFile::from_bytes("{\"prompt\": \"x\"}\n", "train.parquet"); });
  EXPECT_NE(msg.find("train.parquet: not a readable parquet file"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { ParquetFile::open("/nonexistent/train.parquet"); }).find("cannot open data file /nonexistent/train.parquet"),
            std::string::npos);
}

// Every prefix of a real file, and the file with bytes flipped: an Error naming the file each
// time, never a crash (the fuzz target, tests/fuzz/parquet_fuzz.cc, searches further).
TEST(Parquet, TruncatedOrCorruptFilesAreErrorsNamingTheFile) {
  const std::string bytes = slurp(kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet");
  ASSERT_GT(bytes.size(), 1000u);
  int errors = 0;
  for (size_t len = 0; len < bytes.size(); len += 7) {
    const std::string msg = error_of([&] { ParquetFile::from_bytes(bytes.substr(0, len), "cut.parquet").read_rows(); });
    EXPECT_EQ(msg.rfind("cut.parquet: ", 0), 0u) << "length " << len << ": " << msg;
    ++errors;
  }
  EXPECT_GT(errors, 100);
  uint32_t seed = 7;
  for (int round = 0; round < 3000; ++round) {
    std::string bad = bytes;
    for (int k = 0; k < 1 + round % 4; ++k) {
      seed = seed * 1103515245u + 12345u;
      bad[(seed >> 8) % bad.size()] = static_cast<char>(seed >> 24);
    }
    try {
      auto rows = ParquetFile::from_bytes(bad, "flip.parquet").read_rows();
      (void)rows;  // a flip in a string's bytes may still be a valid file
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("flip.parquet: ", 0), 0u) << e.what();
    }
  }
}

// Found by the fuzz target in CI: a column name with a 0xFF byte read as a JSON key that
// nlohmann::json cannot dump (an abort wherever the rows are printed). Now the footer is refused.
TEST(Parquet, AColumnNameThatIsNotUtf8IsACorruptFile) {
  const auto msg = error_of([] { ParquetFile::open(kFixtures + "corrupt_column_name_not_utf8.parquet").read_rows(); });
  EXPECT_NE(msg.find("corrupt_column_name_not_utf8.parquet: not a readable parquet file: a column name in the schema is not UTF-8 text"),
            std::string::npos)
      << msg;
}

// The matrix that tests/integration/parquet_peer_test.sh writes with the peer.
TEST(ParquetPeer, ReadsEveryFileTheWriterWrote) {
  const char* dir = std::getenv("VERL_PARQUET_PEER_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "VERL_PARQUET_PEER_DIR is not set: tests/integration/parquet_peer_test.sh runs this";
  const std::string d = std::string(dir) + "/";
  const auto manifest = expected(d + "manifest.json");
  ASSERT_GE(manifest.size(), 60u);
  int read = 0, refused = 0;
  for (const auto& entry : manifest) {
    const std::string file = entry["file"];
    SCOPED_TRACE(file);
    if (entry.contains("expected")) {
      std::vector<nlohmann::json> rows;
      try {
        rows = ParquetFile::open(d + file).read_rows();
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      EXPECT_TRUE(same_rows(rows, expected(d + entry["expected"].get<std::string>())));
      ++read;
    } else {
      const std::string msg = error_of([&] { ParquetFile::open(d + file).read_rows(); });
      for (const auto& want : entry["error"]) EXPECT_NE(msg.find(want.get<std::string>()), std::string::npos) << msg;
      EXPECT_NE(msg.find(file), std::string::npos) << msg;
      ++refused;
    }
  }
  std::printf("[ peer ] %d files read as written, %d refused as expected\n", read, refused);
}

}  // namespace
}  // namespace verl::data
