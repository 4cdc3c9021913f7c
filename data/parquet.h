// ParquetFile reads the parquet files that verl's data preprocess scripts write through
// pandas/pyarrow (and what arrow-rs, Spark or polars write in the same subset) into one JSON object
// per row: struct -> object, list -> array, null -> null, nesting rebuilt from the Dremel
// repetition/definition levels. The subset: BOOLEAN, INT32, INT64, FLOAT, DOUBLE and BYTE_ARRAY
// (strings) leaves, the null type, structs and lists at any depth (3-level LIST and the legacy
// 2-level forms); PLAIN, PLAIN_DICTIONARY and RLE_DICTIONARY values (RLE booleans), RLE/bit-packed
// levels; data pages v1 and v2; any number of row groups; UNCOMPRESSED, SNAPPY, GZIP and ZSTD.
// Anything else (DELTA_* encodings, BROTLI/LZ4/LZO, INT96, decimals, dates and timestamps, maps,
// encryption) is a verl::Error naming the file, the column's dotted path and what was found,
// with a hint on how to re-save the file in the subset. A truncated or corrupt file is a
// verl::Error naming the file, never a crash or an unbounded allocation.
//
// The schema is checked when the file is opened, so open_footer() is a complete check of
// everything but the pages. A ParquetFile is immutable after opening; read_rows() may be called
// from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::data {

struct ParquetLeaf {
  std::string path;      // dotted, as pyarrow names it: "prompt.list.element.content"
  std::string type;      // "BYTE_ARRAY (string)", "INT64", ...
};

class ParquetFile {
 public:
  // Reads the whole file into memory and parses its footer (verl loads whole data files too).
  static ParquetFile open(const std::string& path);
  // Reads only the footer: the schema, row counts and codecs, for a cheap check. read_rows()
  // on it throws.
  static ParquetFile open_footer(const std::string& path);
  // `name` is what errors call the file.
  static ParquetFile from_bytes(std::string bytes, const std::string& name);

  const std::string& name() const;
  int64_t num_rows() const;
  int64_t num_row_groups() const;
  const std::vector<std::string>& columns() const;  // the top-level column names, in order
  const std::vector<ParquetLeaf>& leaves() const;

  // Every row, in file order.
  std::vector<nlohmann::json> read_rows() const;

  struct Impl;

 private:
  explicit ParquetFile(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace verl::data
