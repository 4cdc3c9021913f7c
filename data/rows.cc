#include "data/rows.h"

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "data/parquet.h"

namespace verl::data {
namespace {

const char* kFormatsHint =
    "data files are .parquet (as verl's examples/data_preprocess scripts write them), .json or .jsonl "
    "(JSON lines, or one JSON array of row objects)";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::ifstream open_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error{ExitCode::kInvalidConfig, "cannot open data file " + path,
                "check data.train_files / data.val_files: the path must exist and be readable"};
  }
  return in;
}

// The first byte that is not whitespace (and not a UTF-8 byte order mark), or 0.
char first_char(std::istream& in) {
  char c;
  int seen = 0;
  while (in.get(c)) {
    if (seen++ < 3 && (static_cast<unsigned char>(c) == 0xef || static_cast<unsigned char>(c) == 0xbb ||
                       static_cast<unsigned char>(c) == 0xbf))
      continue;
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
  }
  return 0;
}

[[noreturn]] void not_json(const std::string& where, const nlohmann::json::exception& e, const std::string& hint) {
  throw Error{ExitCode::kInvalidConfig, where + ": not valid JSON: " + e.what(), hint};
}

void require_object(const nlohmann::json& row, const std::string& where) {
  if (!row.is_object())
    throw Error{ExitCode::kInvalidConfig, where + ": a row is " + std::string(row.type_name()) + ", not a JSON object",
                "each row is one object in verl's row shape: {\"prompt\": ..., \"reward_model\": {...}, ...}"};
}

}  // namespace

FileFormat format_of_path(const std::string& path) {
  if (ends_with(path, ".parquet")) return FileFormat::kParquet;
  if (ends_with(path, ".json") || ends_with(path, ".jsonl")) {
    auto in = open_text(path);
    return first_char(in) == '[' ? FileFormat::kJsonArray : FileFormat::kJsonLines;
  }
  throw Error{ExitCode::kInvalidConfig, path + ": unknown data file format (not .parquet, .json or .jsonl)",
              kFormatsHint};
}

RowFile RowFile::read(const std::string& path) {
  RowFile f;
  f.path_ = path;
  f.format_ = format_of_path(path);
  if (f.format_ == FileFormat::kParquet) {
    f.rows_ = ParquetFile::open(path).read_rows();
    return f;
  }
  auto in = open_text(path);
  if (f.format_ == FileFormat::kJsonArray) {
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      not_json(path, e, "a .json file holds JSON lines (one object per line) or one JSON array of objects");
    }
    f.rows_.reserve(doc.size());
    for (size_t i = 0; i < doc.size(); ++i) {
      require_object(doc[i], path + ": item " + std::to_string(i));
      f.rows_.push_back(std::move(doc[i]));
    }
    return f;
  }
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      not_json(where, e, "each line must be one JSON object (JSON lines)");
    }
    require_object(row, where);
    f.rows_.push_back(std::move(row));
    f.lines_.push_back(lineno);
  }
  return f;
}

std::string RowFile::location(size_t i) const {
  switch (format_) {
    case FileFormat::kJsonLines: return path_ + ":" + std::to_string(lines_.at(i));
    case FileFormat::kJsonArray: return path_ + ": item " + std::to_string(i);
    case FileFormat::kParquet: return path_ + ": row " + std::to_string(i);
  }
  return path_;
}

ProbeResult probe_file(const std::string& path, const std::string& prompt_key) {
  ProbeResult r;
  r.format = format_of_path(path);
  if (r.format == FileFormat::kParquet) {
    const auto file = ParquetFile::open_footer(path);
    r.rows = file.num_rows();
    r.columns = file.columns();
    bool found = false;
    for (const auto& c : r.columns) found = found || c == prompt_key;
    if (!found) {
      std::string have;
      for (const auto& c : r.columns) have += (have.empty() ? "" : ", ") + c;
      throw Error{ExitCode::kInvalidConfig,
                  path + ": no column '" + prompt_key + "' (data.prompt_key); the columns are: " + have,
                  "set data.prompt_key to the column that holds the prompt"};
    }
    return r;
  }
  auto in = open_text(path);
  nlohmann::json first;
  std::string where = path;
  if (r.format == FileFormat::kJsonArray) {
    // The whole array must parse to know its first element is one; a .json array is small
    // next to what training reads anyway.
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      not_json(path, e, "a .json file holds JSON lines (one object per line) or one JSON array of objects");
    }
    if (doc.empty()) throw Error{ExitCode::kInvalidConfig, path + ": the JSON array has no rows", kFormatsHint};
    where = path + ": item 0";
    first = std::move(doc[0]);
  } else {
    std::string line;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.find_first_not_of(" \t\r") != std::string::npos) break;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      throw Error{ExitCode::kInvalidConfig, path + ": no rows", "a JSON lines file with one row object per line"};
    where = path + ":" + std::to_string(lineno);
    try {
      first = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      not_json(where, e, "each line must be one JSON object (JSON lines)");
    }
  }
  require_object(first, where);
  for (const auto& [key, value] : first.items()) r.columns.push_back(key);
  if (!first.contains(prompt_key))
    throw Error{ExitCode::kInvalidConfig, where + ": row has no '" + prompt_key + "' key (data.prompt_key)",
                "set data.prompt_key to the prompt's key"};
  return r;
}

}  // namespace verl::data
