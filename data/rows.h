// The one way data files become rows: data.train_files / data.val_files may be parquet or JSON,
// as verl's RLHFDataset reads them through datasets.load_dataset:
//   .parquet  -> ParquetFile (data/parquet.h)
//   .json     -> JSON lines, or one JSON array of row objects (what datasets' json loader accepts)
//   .jsonl    -> the same (verl refuses the extension; verlctl always read it)
// Every row keeps where it came from, so that an error about it names file:line (JSON lines),
// file: item N (a JSON array) or file: row N (parquet, 0-based as pandas counts).
//
// probe_file is the cheap check for `verlctl config validate`: the file exists and is readable,
// its format is known, its footer (parquet) or first row (JSON) parses, and the prompt column
// is there. Everything throws verl::Error (exit 3) naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::data {

enum class FileFormat { kParquet, kJsonLines, kJsonArray };

// By the extension (as verl decides), with the content deciding between JSON lines and an array.
// Throws for an extension that is neither.
FileFormat format_of_path(const std::string& path);

class RowFile {
 public:
  static RowFile read(const std::string& path);

  const std::string& path() const { return path_; }
  FileFormat format() const { return format_; }
  size_t size() const { return rows_.size(); }
  const nlohmann::json& operator[](size_t i) const { return rows_[i]; }
  nlohmann::json& operator[](size_t i) { return rows_[i]; }
  // "train.jsonl:12", "train.json: item 3", "train.parquet: row 17".
  std::string location(size_t i) const;

 private:
  std::string path_;
  FileFormat format_ = FileFormat::kJsonLines;
  std::vector<nlohmann::json> rows_;
  std::vector<int64_t> lines_;  // JSON lines: each row's line number
};

struct ProbeResult {
  FileFormat format;
  int64_t rows = -1;                 // parquet: from the footer; JSON: -1 (not counted)
  std::vector<std::string> columns;  // parquet: top-level columns; JSON: the first row's keys
};

ProbeResult probe_file(const std::string& path, const std::string& prompt_key = "prompt");

}  // namespace verl::data
