// RowFile and probe_file: the formats verl's RLHFDataset reads (parquet, .json as JSON lines or
// one array), each row's location for errors, and the cheap check `config validate` runs.
#include "data/rows.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"

namespace verl::data {
namespace {

namespace fs = std::filesystem;
const std::string kFixtures = std::string(VERL_SOURCE_DIR) + "/tests/data/parquet/";

std::string write_file(const std::string& name, const std::string& text) {
  const auto dir = fs::temp_directory_path() / ("verl_rows_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    return e.what();
  }
  return "(no error)";
}

TEST(RowFile, ReadsJsonLinesWithTheLineOfEachRow) {
  const auto path = write_file("a.jsonl", "{\"prompt\": \"1\"}\n\n{\"prompt\": \"2\"}\n");
  const auto rows = RowFile::read(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.format(), FileFormat::kJsonLines);
  EXPECT_EQ(rows[1]["prompt"], "2");
  EXPECT_EQ(rows.location(1), path + ":3");
}

TEST(RowFile, ReadsAJsonArrayAsDatasetsLoadDatasetDoes) {
  const auto path = write_file("a.json", "  [\n {\"prompt\": \"1\"},\n {\"prompt\": \"2\"}\n]\n");
  const auto rows = RowFile::read(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.format(), FileFormat::kJsonArray);
  EXPECT_EQ(rows.location(1), path + ": item 1");
  const auto lines = write_file("b.json", "{\"prompt\": \"1\"}\n");  // .json holding JSON lines
  EXPECT_EQ(RowFile::read(lines).format(), FileFormat::kJsonLines);
}

TEST(RowFile, ReadsParquetWithRowNumbers) {
  const auto rows = RowFile::read(kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet");
  ASSERT_EQ(rows.size(), 20u);
  EXPECT_EQ(rows[2]["data_source"], "openai/gsm8k");
  EXPECT_EQ(rows.location(2), kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet: row 2");
}

TEST(RowFile, ErrorsNameFileAndLine) {
  const auto bad = write_file("bad.jsonl", "{\"prompt\": \"1\"}\n{not json\n");
  EXPECT_NE(error_of([&] { RowFile::read(bad); }).find(bad + ":2: not valid JSON"), std::string::npos);
  const auto scalar = write_file("scalar.jsonl", "42\n");
  EXPECT_NE(error_of([&] { RowFile::read(scalar); }).find(scalar + ":1: a row is number"), std::string::npos);
  const auto csv = write_file("train.csv", "prompt\n1\n");
  EXPECT_NE(error_of([&] { RowFile::read(csv); }).find("unknown data file format"), std::string::npos);
}

TEST(ProbeFile, AcceptsVerlFilesAndCountsParquetRows) {
  const auto r = probe_file(kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet");
  EXPECT_EQ(r.format, FileFormat::kParquet);
  EXPECT_EQ(r.rows, 20);
  const auto j = probe_file(write_file("ok.jsonl", "\n{\"question\": \"x\"}\n"), "question");
  EXPECT_EQ(j.columns, std::vector<std::string>{"question"});
}

TEST(ProbeFile, NamesWhatIsWrong) {
  EXPECT_NE(error_of([] { probe_file(kFixtures + "gsm8k_snappy_dict_v2_rgN.parquet", "question"); })
                .find("no column 'question' (data.prompt_key); the columns are: data_source, prompt, ability"),
            std::string::npos);
  const auto json_as_parquet = write_file("rows.parquet", "{\"prompt\": \"1\"}\n");
  EXPECT_NE(error_of([&] { probe_file(json_as_parquet); }).find(json_as_parquet + ": not a readable parquet file"),
            std::string::npos);
  const auto no_prompt = write_file("np.jsonl", "{\"q\": 1}\n");
  EXPECT_NE(error_of([&] { probe_file(no_prompt); }).find(no_prompt + ":1: row has no 'prompt' key"), std::string::npos);
  EXPECT_NE(error_of([] { probe_file("/nonexistent/x.parquet"); }).find("cannot open data file /nonexistent/x.parquet"),
            std::string::npos);
  // Outside the subset, found from the footer alone (the encodings it lists).
  EXPECT_NE(error_of([] { probe_file(kFixtures + "unsupported_delta.parquet"); })
                .find("column 'i64': is encoded with DELTA_BINARY_PACKED"),
            std::string::npos);
}

}  // namespace
}  // namespace verl::data
