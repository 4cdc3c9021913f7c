#include "data/parquet.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>

#include "common/error.h"
#include "common/strings.h"
#include "data/thrift_compact.h"

namespace verl::data {
namespace {

// The format's enums (parquet.thrift), as far as we name them.
enum PhysicalType { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6,
                    kFixedLenByteArray = 7 };
enum Repetition { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum PageType { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
enum Codec { kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7 };
enum Encoding { kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5,
                kDeltaLengthByteArray = 6, kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9 };
// ConvertedType values we act on.
enum Converted { kUtf8 = 0, kMap = 1, kMapKeyValue = 2, kList = 3, kEnum = 4, kUint8 = 11, kUint16 = 12,
                 kUint32 = 13, kUint64 = 14, kInt8 = 15, kInt16 = 16, kInt32C = 17, kInt64C = 18, kJson = 19 };
// LogicalType union members (the field id inside LogicalType).
enum Logical { kLString = 1, kLMap = 2, kLList = 3, kLEnum = 4, kLDecimal = 5, kLDate = 6, kLTime = 7,
               kLTimestamp = 8, kLInteger = 10, kLUnknown = 11, kLJson = 12, kLBson = 13, kLUuid = 14,
               kLFloat16 = 15 };

// Bounds that no file verl's scripts write comes near, so that a corrupt header cannot make us
// allocate what the file does not hold.
constexpr int64_t kMaxPageBytes = int64_t{1} << 30;
constexpr int64_t kMaxPageValues = int64_t{1} << 26;
constexpr int kMaxSchemaDepth = 64;

const char* kResaveHint =
    "re-save the file with pandas, e.g. df.to_parquet(path, compression='zstd'): pyarrow writes PLAIN and "
    "dictionary encodings, which verlctl reads";
const char* kCorruptHint = "the file is truncated or is not parquet: re-create it (verl's examples/data_preprocess scripts)";

const char* physical_name(int t) {
  switch (t) {
    case kBoolean: return "BOOLEAN";
    case kInt32: return "INT32";
    case kInt64: return "INT64";
    case kInt96: return "INT96";
    case kFloat: return "FLOAT";
    case kDouble: return "DOUBLE";
    case kByteArray: return "BYTE_ARRAY";
    case kFixedLenByteArray: return "FIXED_LEN_BYTE_ARRAY";
  }
  return "an unknown physical type";
}

std::string codec_name(int c) {
  static const char* names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  return c >= 0 && c < 8 ? names[c] : "codec #" + std::to_string(c);
}

std::string encoding_name(int e) {
  static const char* names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e < 10 ? names[e] : "encoding #" + std::to_string(e);
}

std::string logical_name(int l) {
  switch (l) {
    case kLDecimal: return "DECIMAL";
    case kLDate: return "DATE";
    case kLTime: return "TIME";
    case kLTimestamp: return "TIMESTAMP";
    case kLBson: return "BSON";
    case kLUuid: return "UUID";
    case kLFloat16: return "FLOAT16";
    case kLMap: return "MAP";
  }
  return "logical type #" + std::to_string(l);
}

// ---- metadata -------------------------------------------------------------------------------

struct SchemaNode {
  std::string name;
  int physical = -1;  // -1: a group
  int repetition = kRequired;
  int num_children = 0;
  int converted = -1;
  int logical = -1;
  bool logical_signed = true;  // LogicalType INTEGER's isSigned
  std::vector<int> children;
};

struct ColumnChunk {
  int physical = -1;
  int codec = 0;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;
  std::vector<std::string> path;
  std::vector<int> encodings;  // every encoding the chunk's pages use (levels' too)
  bool has_meta = false;
  bool encrypted = false;
};

struct RowGroup {
  int64_t num_rows = 0;
  std::vector<ColumnChunk> columns;
};

// How a schema node appears in the JSON of a row.
enum class Role {
  kField,          // a key of the enclosing object
  kRepeatedField,  // a key of the enclosing object holding an array; each repetition an element
  kListRepeated,   // the repeated group of a LIST: each repetition an element of the LIST's array
  kListElement,    // the one child of a 3-level LIST's repeated group: the element's value
};
enum class Shape { kObject, kArray, kLeaf, kNone /* a 3-level LIST's repeated group: no value */ };

struct Step {
  Role role;
  Shape shape;
  std::string name;
  bool optional;
  int def;  // the definition level at which this node is present
  int rep;  // the repetition level of this node (repeated nodes)
};

struct Leaf {
  std::string path;
  int physical;
  int converted;
  int logical;
  bool is_signed;
  int max_def = 0;
  int max_rep = 0;
  std::vector<Step> steps;
};

}  // namespace

struct ParquetFile::Impl {
  std::string name;
  std::string bytes;  // the whole file (empty for open_footer)
  bool footer_only = false;
  int64_t num_rows = 0;
  std::vector<SchemaNode> schema;
  std::vector<RowGroup> row_groups;
  std::vector<Leaf> leaves;
  std::vector<std::string> columns;
  std::vector<ParquetLeaf> leaf_info;
};

namespace {

using Impl = ParquetFile::Impl;

[[noreturn]] void corrupt(const std::string& file, const std::string& what) {
  throw Error{ExitCode::kInvalidConfig, file + ": not a readable parquet file: " + what, kCorruptHint};
}

[[noreturn]] void column_error(const std::string& file, const std::string& column, const std::string& what,
                               const std::string& hint = kResaveHint) {
  throw Error{ExitCode::kInvalidConfig, file + ": column '" + column + "': " + what, hint};
}

void parse_logical(ThriftReader& r, SchemaNode& node) {
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(&id, &t)) {
    node.logical = id;
    if (id == kLInteger && t == ThriftType::kStruct) {
      r.begin_struct();
      int16_t iid;
      ThriftType it;
      while (r.next_field(&iid, &it)) {
        if (iid == 2 && (it == ThriftType::kTrue || it == ThriftType::kFalse)) node.logical_signed = r.read_bool(it);
        else r.skip(it);
      }
      r.end_struct();
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
}

SchemaNode parse_schema_element(ThriftReader& r) {
  SchemaNode n;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(&id, &t)) {
    switch (id) {
      case 1: n.physical = r.read_i32(); break;
      case 3: n.repetition = r.read_i32(); break;
      case 4: n.name = r.read_string(); break;
      case 5: n.num_children = r.read_i32(); break;
      case 6: n.converted = r.read_i32(); break;
      case 10: if (t == ThriftType::kStruct) parse_logical(r, n); else r.skip(t); break;
      default: r.skip(t);
    }
  }
  r.end_struct();
  return n;
}

ColumnChunk parse_column_chunk(ThriftReader& r) {
  ColumnChunk c;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(&id, &t)) {
    if (id == 3 && t == ThriftType::kStruct) {  // ColumnMetaData
      c.has_meta = true;
      r.begin_struct();
      int16_t mid;
      ThriftType mt;
      while (r.next_field(&mid, &mt)) {
        switch (mid) {
          case 1: c.physical = r.read_i32(); break;
          case 2: {
            ThriftType et;
            const size_t n = r.read_list_header(&et);
            for (size_t i = 0; i < n; ++i) c.encodings.push_back(r.read_i32());
            break;
          }
          case 3: {
            ThriftType et;
            const size_t n = r.read_list_header(&et);
            for (size_t i = 0; i < n; ++i) c.path.push_back(r.read_string());
            break;
          }
          case 4: c.codec = r.read_i32(); break;
          case 5: c.num_values = r.read_i64(); break;
          case 7: c.total_compressed_size = r.read_i64(); break;
          case 9: c.data_page_offset = r.read_i64(); break;
          case 11: c.dictionary_page_offset = r.read_i64(); break;
          default: r.skip(mt);
        }
      }
      r.end_struct();
    } else if (id == 8 || id == 9) {  // crypto_metadata, encrypted_column_metadata
      c.encrypted = true;
      r.skip(t);
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  return c;
}

RowGroup parse_row_group(ThriftReader& r) {
  RowGroup g;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(&id, &t)) {
    if (id == 1 && t == ThriftType::kList) {
      ThriftType et;
      const size_t n = r.read_list_header(&et);
      for (size_t i = 0; i < n; ++i) g.columns.push_back(parse_column_chunk(r));
    } else if (id == 3) {
      g.num_rows = r.read_i64();
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  return g;
}

void parse_file_metadata(Impl& impl, const uint8_t* data, size_t size) {
  ThriftReader r(data, size);
  bool encrypted = false;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(&id, &t)) {
    if (id == 2 && t == ThriftType::kList) {
      ThriftType et;
      const size_t n = r.read_list_header(&et);
      for (size_t i = 0; i < n; ++i) impl.schema.push_back(parse_schema_element(r));
    } else if (id == 3) {
      impl.num_rows = r.read_i64();
    } else if (id == 4 && t == ThriftType::kList) {
      ThriftType et;
      const size_t n = r.read_list_header(&et);
      for (size_t i = 0; i < n; ++i) impl.row_groups.push_back(parse_row_group(r));
    } else if (id == 8) {  // encryption_algorithm: a plaintext footer with encrypted columns
      encrypted = true;
      r.skip(t);
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  if (encrypted) {
    throw Error{ExitCode::kInvalidConfig, impl.name + ": the parquet file is encrypted (modular encryption)",
                "verlctl reads unencrypted files: re-save it without encryption, e.g. df.to_parquet(path)"};
  }
}

// Builds the tree from the flat depth-first list and the steps of every leaf.
void build_schema(Impl& impl) {
  auto& s = impl.schema;
  if (s.empty()) corrupt(impl.name, "the footer has no schema");
  // Column names become the rows' JSON keys: text, as every writer makes them (found by the fuzzer:
  // a 0xFF in a name made the rows undumpable).
  for (const auto& e : s)
    if (invalid_utf8_at(e.name) != std::string::npos) corrupt(impl.name, "a column name in the schema is not UTF-8 text");
  size_t next = 1;
  // Children by the num_children counts of the flat list.
  std::vector<std::pair<int, int>> stack;  // (node, children still to attach)
  stack.push_back({0, s[0].num_children});
  while (!stack.empty()) {
    if (stack.back().second == 0) { stack.pop_back(); continue; }
    if (next >= s.size()) corrupt(impl.name, "the schema's child counts run past its " + std::to_string(s.size()) + " elements");
    const int child = static_cast<int>(next++);
    --stack.back().second;
    s[static_cast<size_t>(stack.back().first)].children.push_back(child);
    if (s[static_cast<size_t>(child)].num_children < 0) corrupt(impl.name, "a negative child count in the schema");
    if (s[static_cast<size_t>(child)].physical < 0 || s[static_cast<size_t>(child)].num_children > 0) {
      if (stack.size() >= static_cast<size_t>(kMaxSchemaDepth)) corrupt(impl.name, "the schema nests deeper than 64 levels");
      stack.push_back({child, s[static_cast<size_t>(child)].num_children});
    }
  }
  if (next != s.size()) corrupt(impl.name, "the schema has elements that belong to no group");
  for (int c : s[0].children) impl.columns.push_back(s[static_cast<size_t>(c)].name);

  // Depth-first: the leaves come out in the order of the row groups' column chunks.
  struct Walk {
    Impl& impl;
    void node(int index, const std::string& prefix, std::vector<Step> steps, int def, int rep, Role role) {
      const SchemaNode& n = impl.schema[static_cast<size_t>(index)];
      const std::string path = prefix.empty() ? n.name : prefix + "." + n.name;
      if (n.repetition == kOptional || n.repetition == kRepeated) ++def;
      if (n.repetition == kRepeated) ++rep;
      const bool is_group = n.physical < 0;
      const bool is_list = is_group && (n.converted == kList || n.logical == kLList);
      const bool is_map = is_group && (n.converted == kMap || n.converted == kMapKeyValue || n.logical == kLMap);
      if (is_map) {
        column_error(impl.name, path, "is a MAP; verlctl reads strings, numbers, booleans, structs and lists",
                     "store it as a struct (a dict with the same keys in every row) or as a list of {key, value} "
                     "structs, then re-save with df.to_parquet(path)");
      }
      Shape shape = is_list ? Shape::kArray : is_group ? Shape::kObject : Shape::kLeaf;
      // A 3-level LIST's repeated group holds the element as its one child; the legacy 2-level
      // forms (the repeated node is itself the element) are told apart as the format's
      // backward-compatibility rules say.
      bool transparent = false;
      if (role == Role::kListRepeated && is_group && n.children.size() == 1 && n.name != "array") {
        transparent = !ends_with_tuple(prefix, n.name);
      }
      if (transparent) shape = Shape::kNone;
      steps.push_back(Step{role, shape, n.name, n.repetition == kOptional, def, rep});
      if (!is_group) {
        leaf(path, n, std::move(steps), def, rep);
        return;
      }
      if (n.children.empty()) column_error(impl.name, path, "is a group without fields", kCorruptHint);
      if (is_list) {
        if (n.children.size() != 1 || impl.schema[static_cast<size_t>(n.children[0])].repetition != kRepeated)
          column_error(impl.name, path, "is a LIST whose child is not one repeated field", kCorruptHint);
        node(n.children[0], path, std::move(steps), def, rep, Role::kListRepeated);
        return;
      }
      for (int c : n.children) {
        const Role r = transparent ? Role::kListElement
                       : impl.schema[static_cast<size_t>(c)].repetition == kRepeated ? Role::kRepeatedField
                                                                                    : Role::kField;
        node(c, path, steps, def, rep, r);
      }
    }
    static bool ends_with_tuple(const std::string& list_path, const std::string& name) {
      const auto dot = list_path.rfind('.');
      const std::string list_name = dot == std::string::npos ? list_path : list_path.substr(dot + 1);
      return name == list_name + "_tuple";
    }
    void leaf(const std::string& path, const SchemaNode& n, std::vector<Step> steps, int def, int rep) {
      auto unsupported = [&](const std::string& what) {
        column_error(impl.name, path, what + "; verlctl reads strings, integers, floats, booleans, nulls, structs and lists",
                     "convert the column (e.g. df[col] = df[col].astype(str)) or drop it, then re-save with "
                     "df.to_parquet(path)");
      };
      if (n.physical == kInt96) unsupported("is INT96 (a legacy timestamp)");
      if (n.physical == kFixedLenByteArray) unsupported("is FIXED_LEN_BYTE_ARRAY" + (n.logical > 0 ? " (" + logical_name(n.logical) + ")" : std::string()));
      if (n.physical < 0 || n.physical > kFixedLenByteArray)
        column_error(impl.name, path, "has physical type #" + std::to_string(n.physical), kCorruptHint);
      switch (n.logical) {
        case -1: case kLString: case kLEnum: case kLJson: case kLInteger: case kLUnknown: break;
        default: unsupported("is " + logical_name(n.logical) + " (" + physical_name(n.physical) + ")");
      }
      switch (n.converted) {
        case -1: case kUtf8: case kEnum: case kJson: case kUint8: case kUint16: case kUint32: case kUint64:
        case kInt8: case kInt16: case kInt32C: case kInt64C: break;
        case 5: unsupported("is a DECIMAL"); break;
        case 6: unsupported("is a DATE"); break;
        case 7: case 8: unsupported("is a TIME"); break;
        case 9: case 10: unsupported("is a TIMESTAMP"); break;
        case 21: unsupported("is an INTERVAL"); break;
        default: unsupported("has converted type #" + std::to_string(n.converted));
      }
      if (def > 255 || rep > 255) column_error(impl.name, path, "nests deeper than 255 levels", kCorruptHint);
      bool is_signed = n.logical == kLInteger ? n.logical_signed
                       : !(n.converted >= kUint8 && n.converted <= kUint64);
      impl.leaves.push_back(Leaf{path, n.physical, n.converted, n.logical, is_signed, def, rep, std::move(steps)});
      std::string type = physical_name(n.physical);
      if (n.physical == kByteArray) type += n.converted == kUtf8 || n.logical == kLString ? " (string)" : " (binary)";
      if (n.logical == kLUnknown) type += " (null)";
      impl.leaf_info.push_back(ParquetLeaf{path, type});
    }
  };
  Walk walk{impl};
  for (int c : s[0].children) {
    const Role role = s[static_cast<size_t>(c)].repetition == kRepeated ? Role::kRepeatedField : Role::kField;
    walk.node(c, "", {}, 0, 0, role);
  }
  if (impl.leaves.empty()) corrupt(impl.name, "the schema has no columns");

  int64_t rows = 0;
  for (size_t g = 0; g < impl.row_groups.size(); ++g) {
    const RowGroup& rg = impl.row_groups[g];
    if (rg.columns.size() != impl.leaves.size())
      corrupt(impl.name, "row group " + std::to_string(g) + " has " + std::to_string(rg.columns.size()) +
                             " column chunks for " + std::to_string(impl.leaves.size()) + " columns");
    if (rg.num_rows < 0 || rows > std::numeric_limits<int64_t>::max() - rg.num_rows)
      corrupt(impl.name, "row group " + std::to_string(g) + " has a row count of " + std::to_string(rg.num_rows));
    rows += rg.num_rows;
    for (size_t c = 0; c < rg.columns.size(); ++c) {
      const ColumnChunk& cc = rg.columns[c];
      const Leaf& leaf = impl.leaves[c];
      if (cc.encrypted)
        throw Error{ExitCode::kInvalidConfig, impl.name + ": column '" + leaf.path + "' is encrypted",
                    "verlctl reads unencrypted files: re-save it without encryption, e.g. df.to_parquet(path)"};
      if (!cc.has_meta) column_error(impl.name, leaf.path, "has no column metadata in row group " + std::to_string(g), kCorruptHint);
      if (cc.physical != leaf.physical)
        column_error(impl.name, leaf.path, std::string("is ") + physical_name(cc.physical) + " in row group " +
                                               std::to_string(g) + " but " + physical_name(leaf.physical) + " in the schema",
                     kCorruptHint);
      if (cc.codec != kUncompressed && cc.codec != kSnappy && cc.codec != kGzip && cc.codec != kZstd)
        column_error(impl.name, leaf.path, "is compressed with " + codec_name(cc.codec) +
                                               "; verlctl reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD",
                     "re-save the file with pandas: df.to_parquet(path, compression='zstd')");
      // The footer lists the chunk's encodings: one outside the subset is refused here, so that
      // `config validate` (which reads only the footer) finds it too.
      for (int e : cc.encodings) {
        if (e == kDeltaBinaryPacked || e == kDeltaLengthByteArray || e == kDeltaByteArray || e == kByteStreamSplit)
          column_error(impl.name, leaf.path, "is encoded with " + encoding_name(e) +
                                                 "; verlctl reads PLAIN and dictionary encodings");
      }
    }
  }
  if (rows != impl.num_rows)
    corrupt(impl.name, "the footer says " + std::to_string(impl.num_rows) + " rows, its row groups " + std::to_string(rows));
}

void parse_footer(Impl& impl, const uint8_t* tail, size_t tail_size, size_t file_size) {
  // The last 8 bytes: the footer's length and "PAR1" ("PARE": an encrypted footer).
  if (file_size < 12) corrupt(impl.name, "it has " + std::to_string(file_size) + " bytes, fewer than a parquet file's 12");
  const uint8_t* end = tail + tail_size;
  if (std::memcmp(end - 4, "PARE", 4) == 0)
    throw Error{ExitCode::kInvalidConfig, impl.name + ": the parquet file is encrypted (its footer too)",
                "verlctl reads unencrypted files: re-save it without encryption, e.g. df.to_parquet(path)"};
  if (std::memcmp(end - 4, "PAR1", 4) != 0) corrupt(impl.name, "it does not end with the magic bytes PAR1");
  uint32_t len;
  std::memcpy(&len, end - 8, 4);  // little-endian on every machine we build for
  if (static_cast<uint64_t>(len) + 12 > file_size) corrupt(impl.name, "its footer length " + std::to_string(len) + " is larger than the file");
  if (len + 8 > tail_size) corrupt(impl.name, "footer read short");
  try {
    parse_file_metadata(impl, end - 8 - len, len);
  } catch (const ThriftError& e) {
    corrupt(impl.name, std::string("its footer does not decode: ") + e.what());
  }
  build_schema(impl);
}

// ---- pages ----------------------------------------------------------------------------------

struct PageHeader {
  int type = -1;
  int32_t uncompressed_size = 0;
  int32_t compressed_size = 0;
  int32_t num_values = 0;
  int encoding = 0;
  int def_encoding = kRle;
  int rep_encoding = kRle;
  int32_t def_bytes = 0;  // v2
  int32_t rep_bytes = 0;  // v2
  bool v2_compressed = true;
};

PageHeader parse_page_header(ThriftReader& r) {
  PageHeader h;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(&id, &t)) {
    switch (id) {
      case 1: h.type = r.read_i32(); break;
      case 2: h.uncompressed_size = r.read_i32(); break;
      case 3: h.compressed_size = r.read_i32(); break;
      case 5: case 7: case 8: {  // data_page_header, dictionary_page_header, data_page_header_v2
        if (t != ThriftType::kStruct) { r.skip(t); break; }
        r.begin_struct();
        int16_t sid;
        ThriftType st;
        while (r.next_field(&sid, &st)) {
          if (sid == 1) { h.num_values = r.read_i32(); continue; }
          if (id == 5) {
            if (sid == 2) h.encoding = r.read_i32();
            else if (sid == 3) h.def_encoding = r.read_i32();
            else if (sid == 4) h.rep_encoding = r.read_i32();
            else r.skip(st);
          } else if (id == 7) {
            if (sid == 2) h.encoding = r.read_i32(); else r.skip(st);
          } else {
            if (sid == 4) h.encoding = r.read_i32();
            else if (sid == 5) h.def_bytes = r.read_i32();
            else if (sid == 6) h.rep_bytes = r.read_i32();
            else if (sid == 7 && (st == ThriftType::kTrue || st == ThriftType::kFalse)) h.v2_compressed = r.read_bool(st);
            else r.skip(st);
          }
        }
        r.end_struct();
        break;
      }
      default: r.skip(t);
    }
  }
  r.end_struct();
  return h;
}

// Everything that a page error needs to say where it is.
struct Where {
  const std::string& file;
  const Leaf& leaf;
  size_t row_group;
  [[noreturn]] void corrupt(const std::string& what) const {
    throw Error{ExitCode::kInvalidConfig,
                file + ": column '" + leaf.path + "', row group " + std::to_string(row_group) + ": " + what,
                kCorruptHint};
  }
};

struct Buffer {
  std::unique_ptr<uint8_t[]> owned;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

Buffer decompress(const Where& w, int codec, const uint8_t* in, size_t in_size, int64_t out_size) {
  Buffer b;
  if (codec == kUncompressed) {
    if (static_cast<int64_t>(in_size) != out_size)
      w.corrupt("an uncompressed page of " + std::to_string(in_size) + " bytes says " + std::to_string(out_size));
    b.data = in;
    b.size = in_size;
    return b;
  }
  if (out_size < 0 || out_size > kMaxPageBytes) w.corrupt("a page claims " + std::to_string(out_size) + " uncompressed bytes");
  const auto n = static_cast<size_t>(out_size);
  b.owned.reset(new uint8_t[n ? n : 1]);
  b.data = b.owned.get();
  b.size = n;
  char* out = reinterpret_cast<char*>(b.owned.get());
  if (codec == kSnappy) {
    size_t len = 0;
    if (!snappy::GetUncompressedLength(reinterpret_cast<const char*>(in), in_size, &len) || len != n)
      w.corrupt("a SNAPPY page does not decompress to its " + std::to_string(n) + " bytes");
    if (!snappy::RawUncompress(reinterpret_cast<const char*>(in), in_size, out))
      w.corrupt("a SNAPPY page does not decompress");
  } else if (codec == kZstd) {
    // A page may hold several frames (the format allows it), so no frame-size check: the result
    // length is.
    const size_t got = ZSTD_decompress(out, n, in, in_size);
    if (ZSTD_isError(got)) w.corrupt(std::string("a ZSTD page does not decompress: ") + ZSTD_getErrorName(got));
    if (got != n) w.corrupt("a ZSTD page decompresses to " + std::to_string(got) + " bytes, not " + std::to_string(n));
  } else if (codec == kGzip) {
    z_stream z{};
    if (inflateInit2(&z, 15 + 32) != Z_OK) w.corrupt("zlib cannot start");  // 32: gzip or zlib header
    z.next_in = const_cast<Bytef*>(in);
    z.avail_in = static_cast<uInt>(in_size);
    z.next_out = reinterpret_cast<Bytef*>(out);
    z.avail_out = static_cast<uInt>(n);
    int rc = Z_OK;
    while (true) {
      rc = inflate(&z, Z_FINISH);
      // Concatenated gzip members: start the next one where the last ended.
      if (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) {
        if (inflateReset(&z) != Z_OK) break;
        continue;
      }
      break;
    }
    const size_t got = n - z.avail_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || got != n)
      w.corrupt("a GZIP page does not decompress to its " + std::to_string(n) + " bytes");
  } else {
    w.corrupt("codec " + codec_name(codec));  // checked at open
  }
  return b;
}

// The RLE / bit-packed hybrid (levels, dictionary indices, RLE booleans).
class RleDecoder {
 public:
  RleDecoder(const Where& w, const uint8_t* p, size_t size, int bit_width)
      : w_(w), p_(p), end_(p + size), bit_width_(bit_width) {
    if (bit_width < 0 || bit_width > 32) w_.corrupt("a bit width of " + std::to_string(bit_width));
  }
  // Appends n values to out.
  template <typename T>
  void decode(size_t n, std::vector<T>& out) {
    const size_t value_bytes = static_cast<size_t>((bit_width_ + 7) / 8);
    while (n > 0) {
      const uint64_t header = varint();
      if (header & 1) {  // bit-packed groups of 8 values, bit_width bytes each
        const uint64_t groups = header >> 1;
        const auto left = static_cast<uint64_t>(end_ - p_);
        const uint64_t take = groups >= n / 8 + 1 ? n : groups * 8;
        // The last group may stop at the last value's byte: only the values taken must be there.
        const uint64_t need = (take * static_cast<uint64_t>(bit_width_) + 7) / 8;
        if (need > left) w_.corrupt("a bit-packed run runs past the end of the page");
        uint64_t bit = 0;
        for (uint64_t i = 0; i < take; ++i) {
          uint64_t v = 0;
          for (int k = 0; k < bit_width_; ++k, ++bit) v |= static_cast<uint64_t>((p_[bit >> 3] >> (bit & 7)) & 1) << k;
          out.push_back(static_cast<T>(v));
        }
        const uint64_t run_bytes = groups > left ? left : std::min(left, groups * static_cast<uint64_t>(bit_width_));
        p_ += run_bytes;
        n -= static_cast<size_t>(take);
      } else {
        const uint64_t count = header >> 1;
        if (count == 0) w_.corrupt("an RLE run of length 0");
        if (value_bytes > static_cast<size_t>(end_ - p_)) w_.corrupt("an RLE run runs past the end of the page");
        uint64_t v = 0;
        for (size_t k = 0; k < value_bytes; ++k) v |= static_cast<uint64_t>(p_[k]) << (8 * k);
        p_ += value_bytes;
        const size_t take = static_cast<size_t>(std::min<uint64_t>(count, n));
        out.insert(out.end(), take, static_cast<T>(v));
        n -= take;
      }
    }
  }

 private:
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) w_.corrupt("RLE data ends before its values");
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    w_.corrupt("an RLE header longer than 10 bytes");
  }
  const Where& w_;
  const uint8_t* p_;
  const uint8_t* end_;
  int bit_width_;
};

int bit_width_of(int max_level) {
  int w = 0;
  while ((1 << w) <= max_level) ++w;
  return w;
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

bool valid_utf8(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

// PLAIN values: n of them from [p, p + size), appended to out as JSON.
void decode_plain(const Where& w, const uint8_t* p, size_t size, size_t n, std::vector<nlohmann::json>& out) {
  const Leaf& leaf = w.leaf;
  auto need = [&](uint64_t bytes) {
    if (bytes > size) w.corrupt("PLAIN values need " + std::to_string(bytes) + " bytes, the page has " + std::to_string(size));
  };
  switch (leaf.physical) {
    case kBoolean:
      need((static_cast<uint64_t>(n) + 7) / 8);
      for (size_t i = 0; i < n; ++i) out.emplace_back(static_cast<bool>((p[i >> 3] >> (i & 7)) & 1));
      return;
    case kInt32:
      need(uint64_t{4} * n);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = read_u32(p + 4 * i);
        if (leaf.is_signed) out.emplace_back(static_cast<int64_t>(static_cast<int32_t>(u)));
        else out.emplace_back(static_cast<uint64_t>(u));
      }
      return;
    case kInt64:
      need(uint64_t{8} * n);
      for (size_t i = 0; i < n; ++i) {
        uint64_t u;
        std::memcpy(&u, p + 8 * i, 8);
        if (leaf.is_signed) out.emplace_back(static_cast<int64_t>(u));
        else out.emplace_back(u);
      }
      return;
    case kFloat:
      need(uint64_t{4} * n);
      for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out.emplace_back(static_cast<double>(f));
      }
      return;
    case kDouble:
      need(uint64_t{8} * n);
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out.emplace_back(d);
      }
      return;
    case kByteArray: {
      size_t at = 0;
      for (size_t i = 0; i < n; ++i) {
        if (size - at < 4) w.corrupt("a string's length runs past the end of the page");
        const uint32_t len = read_u32(p + at);
        at += 4;
        if (len > size - at) w.corrupt("a string of " + std::to_string(len) + " bytes runs past the end of the page");
        if (!valid_utf8(p + at, len))
          throw Error{ExitCode::kInvalidConfig,
                      w.file + ": column '" + leaf.path + "': a value is not UTF-8 text (binary data?)",
                      "verlctl reads text columns: decode the bytes to str in pandas, then re-save with df.to_parquet(path)"};
        out.emplace_back(std::string(reinterpret_cast<const char*>(p + at), len));
        at += len;
      }
      return;
    }
  }
  w.corrupt("physical type " + std::to_string(leaf.physical));
}

// Puts one (repetition, definition, value) triple of a leaf into the rows: the Dremel assembly.
// `index[k]` is the element index in the list at repetition level k, for the current value.
class Assembler {
 public:
  Assembler(const Where& w, std::vector<nlohmann::json>& rows, size_t row_base, int64_t rows_in_group)
      : w_(w), rows_(rows), base_(row_base), limit_(rows_in_group),
        index_(static_cast<size_t>(w.leaf.max_rep) + 1, 0) {}

  // `value` (present when def is the leaf's maximum) is moved into the row.
  void add(int rep, int def, nlohmann::json* value) {
    if (rep == 0) {
      ++row_;
      if (row_ >= limit_) w_.corrupt("more rows than the row group's " + std::to_string(limit_));
      std::fill(index_.begin(), index_.end(), 0);
    } else {
      if (row_ < 0) w_.corrupt("the first value repeats a list (repetition level " + std::to_string(rep) + ")");
      ++index_[static_cast<size_t>(rep)];
      for (size_t k = static_cast<size_t>(rep) + 1; k < index_.size(); ++k) index_[k] = 0;
    }
    const size_t at = base_ + static_cast<size_t>(row_);
    if (at == rows_.size()) rows_.push_back(nlohmann::json::object());  // the first column makes the rows
    nlohmann::json* slot = &rows_[at];
    for (const Step& s : w_.leaf.steps) {
      switch (s.role) {
        case Role::kField:
          slot = &as_object(*slot, s)[s.name];
          if (def < s.def) { *slot = nullptr; return; }
          break;
        case Role::kRepeatedField: {
          nlohmann::json& arr = as_array(as_object(*slot, s)[s.name], s);
          if (def < s.def) return;  // an empty list
          slot = &element(arr, s);
          break;
        }
        case Role::kListRepeated: {
          nlohmann::json& arr = as_array(*slot, s);
          if (def < s.def) return;
          slot = &element(arr, s);
          if (s.shape == Shape::kNone) continue;
          break;
        }
        case Role::kListElement:
          if (def < s.def) { *slot = nullptr; return; }
          break;
      }
      if (s.shape == Shape::kLeaf) {
        *slot = std::move(*value);
        return;
      }
    }
  }

  int64_t rows_seen() const { return row_ + 1; }

 private:
  nlohmann::json& as_object(nlohmann::json& j, const Step& s) {
    if (j.is_null()) j = nlohmann::json::object();
    else if (!j.is_object()) w_.corrupt("levels disagree between columns at '" + s.name + "'");
    return j;
  }
  nlohmann::json& as_array(nlohmann::json& j, const Step& s) {
    if (j.is_null()) j = nlohmann::json::array();
    else if (!j.is_array()) w_.corrupt("levels disagree between columns at '" + s.name + "'");
    return j;
  }
  nlohmann::json& element(nlohmann::json& arr, const Step& s) {
    const size_t i = index_[static_cast<size_t>(s.rep)];
    if (i > arr.size()) w_.corrupt("a list element is skipped at '" + s.name + "'");
    if (i == arr.size()) arr.push_back(nullptr);
    return arr[i];
  }

  const Where& w_;
  std::vector<nlohmann::json>& rows_;
  size_t base_;
  int64_t limit_;
  int64_t row_ = -1;
  std::vector<size_t> index_;
};

void read_column_chunk(const Impl& impl, size_t g, size_t c, std::vector<nlohmann::json>& rows, size_t row_base) {
  const RowGroup& rg = impl.row_groups[g];
  const ColumnChunk& cc = rg.columns[c];
  const Leaf& leaf = impl.leaves[c];
  const Where w{impl.name, leaf, g};
  const auto file_size = static_cast<int64_t>(impl.bytes.size());
  int64_t start = cc.data_page_offset;
  if (cc.dictionary_page_offset > 0 && cc.dictionary_page_offset < start) start = cc.dictionary_page_offset;
  if (start < 4 || start >= file_size || cc.total_compressed_size < 0 || cc.total_compressed_size > file_size - start)
    w.corrupt("the column chunk at byte " + std::to_string(start) + " (" + std::to_string(cc.total_compressed_size) +
              " bytes) lies outside the file's " + std::to_string(file_size) + " bytes");
  if (cc.num_values < 0) w.corrupt("a value count of " + std::to_string(cc.num_values));
  const auto* data = reinterpret_cast<const uint8_t*>(impl.bytes.data());
  size_t pos = static_cast<size_t>(start);
  const size_t end = static_cast<size_t>(start + cc.total_compressed_size);

  std::vector<nlohmann::json> dictionary;
  bool have_dictionary = false;
  std::vector<uint8_t> reps, defs;
  std::vector<nlohmann::json> values;
  std::vector<uint32_t> indices;
  Assembler assembler(w, rows, row_base, rg.num_rows);
  int64_t seen = 0;
  while (seen < cc.num_values) {
    if (pos >= end) w.corrupt("the column chunk ends after " + std::to_string(seen) + " of its " + std::to_string(cc.num_values) + " values");
    PageHeader h;
    ThriftReader r(data + pos, end - pos);
    try {
      h = parse_page_header(r);
    } catch (const ThriftError& e) {
      w.corrupt(std::string("a page header at byte ") + std::to_string(pos) + " does not decode: " + e.what());
    }
    pos += r.consumed();
    if (h.compressed_size < 0 || static_cast<size_t>(h.compressed_size) > end - pos)
      w.corrupt("a page of " + std::to_string(h.compressed_size) + " bytes runs past the column chunk");
    const uint8_t* body = data + pos;
    const auto body_size = static_cast<size_t>(h.compressed_size);
    pos += body_size;

    if (h.type == kDictionaryPage) {
      if (h.num_values < 0 || h.num_values > kMaxPageValues) w.corrupt("a dictionary of " + std::to_string(h.num_values) + " values");
      if (h.encoding != kPlain && h.encoding != kPlainDictionary)
        column_error(impl.name, leaf.path, "has a dictionary page encoded with " + encoding_name(h.encoding));
      Buffer b = decompress(w, cc.codec, body, body_size, h.uncompressed_size);
      dictionary.clear();
      dictionary.reserve(std::min<size_t>(static_cast<size_t>(h.num_values), b.size + 1));
      decode_plain(w, b.data, b.size, static_cast<size_t>(h.num_values), dictionary);
      have_dictionary = true;
      continue;
    }
    if (h.type != kDataPage && h.type != kDataPageV2) continue;  // index pages carry no values
    if (h.num_values < 0 || h.num_values > kMaxPageValues || h.num_values > cc.num_values - seen)
      w.corrupt("a page of " + std::to_string(h.num_values) + " values in a chunk of " + std::to_string(cc.num_values));
    const auto n = static_cast<size_t>(h.num_values);

    // The levels, and where the values start.
    Buffer page;
    const uint8_t* levels;
    size_t levels_size;
    if (h.type == kDataPage) {
      page = decompress(w, cc.codec, body, body_size, h.uncompressed_size);
      levels = page.data;
      levels_size = page.size;
    } else {
      if (h.rep_bytes < 0 || h.def_bytes < 0 || static_cast<uint64_t>(h.rep_bytes) + static_cast<uint64_t>(h.def_bytes) > body_size)
        w.corrupt("a v2 page's level lengths exceed the page");
      levels = body;
      levels_size = static_cast<size_t>(h.rep_bytes + h.def_bytes);
    }
    size_t at = 0;
    reps.clear();
    defs.clear();
    for (int which = 0; which < 2; ++which) {  // repetition levels first
      const int max_level = which == 0 ? leaf.max_rep : leaf.max_def;
      auto& out = which == 0 ? reps : defs;
      if (max_level == 0) continue;
      size_t len;
      if (h.type == kDataPage) {
        const int enc = which == 0 ? h.rep_encoding : h.def_encoding;
        if (enc != kRle)
          column_error(impl.name, leaf.path, "has levels encoded with " + encoding_name(enc) + " (deprecated)");
        if (levels_size - at < 4) w.corrupt("a page's levels run past its end");
        len = read_u32(levels + at);
        at += 4;
      } else {
        len = static_cast<size_t>(which == 0 ? h.rep_bytes : h.def_bytes);
      }
      if (len > levels_size - at) w.corrupt("a page's levels run past its end");
      RleDecoder(w, levels + at, len, bit_width_of(max_level)).decode(n, out);
      for (uint8_t l : out) {
        if (l > max_level) w.corrupt("a level " + std::to_string(l) + " above the maximum " + std::to_string(max_level));
      }
      at += len;
    }
    const uint8_t* vals;
    size_t vals_size;
    if (h.type == kDataPage) {
      vals = levels + at;
      vals_size = levels_size - at;
    } else {
      const size_t rest = body_size - levels_size;
      const int64_t rest_uncompressed = static_cast<int64_t>(h.uncompressed_size) - static_cast<int64_t>(levels_size);
      if (h.v2_compressed && cc.codec != kUncompressed) {
        page = decompress(w, cc.codec, body + levels_size, rest, rest_uncompressed);
        vals = page.data;
        vals_size = page.size;
      } else {
        vals = body + levels_size;
        vals_size = rest;
      }
    }
    size_t present = 0;
    if (leaf.max_def == 0) present = n;
    else for (uint8_t d : defs) present += d == leaf.max_def;

    values.clear();
    values.reserve(present);
    if (h.encoding == kPlain) {
      decode_plain(w, vals, vals_size, present, values);
    } else if (h.encoding == kPlainDictionary || h.encoding == kRleDictionary) {
      if (!have_dictionary) w.corrupt("a dictionary-encoded page without a dictionary page");
      if (present > 0) {
        if (vals_size < 1) w.corrupt("a dictionary-encoded page without its bit width");
        indices.clear();
        RleDecoder(w, vals + 1, vals_size - 1, vals[0]).decode(present, indices);
        for (uint32_t i : indices) {
          if (i >= dictionary.size())
            w.corrupt("a dictionary index " + std::to_string(i) + " past the dictionary's " + std::to_string(dictionary.size()) + " values");
          values.push_back(dictionary[i]);
        }
      }
    } else if (h.encoding == kRle && leaf.physical == kBoolean) {
      if (vals_size < 4) w.corrupt("RLE booleans without their length");
      const uint32_t len = read_u32(vals);
      if (len > vals_size - 4) w.corrupt("RLE booleans run past the end of the page");
      indices.clear();
      RleDecoder(w, vals + 4, len, 1).decode(present, indices);
      for (uint32_t b : indices) values.emplace_back(b != 0);
    } else {
      column_error(impl.name, leaf.path, "has a page encoded with " + encoding_name(h.encoding) +
                                             "; verlctl reads PLAIN and dictionary encodings");
    }

    size_t next_value = 0;
    for (size_t i = 0; i < n; ++i) {
      const int rep = leaf.max_rep ? reps[i] : 0;
      const int def = leaf.max_def ? defs[i] : 0;
      assembler.add(rep, def, def == leaf.max_def ? &values[next_value++] : nullptr);
    }
    seen += h.num_values;
  }
  if (assembler.rows_seen() != rg.num_rows)
    w.corrupt("the column has " + std::to_string(assembler.rows_seen()) + " rows, its row group " + std::to_string(rg.num_rows));
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error{ExitCode::kInvalidConfig, "cannot open data file " + path,
                "check data.train_files / data.val_files: the path must exist and be readable"};
  }
  std::string bytes;
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) throw Error{ExitCode::kInvalidConfig, "cannot read data file " + path, "is it a regular file?"};
  bytes.resize(static_cast<size_t>(size));
  in.seekg(0);
  in.read(bytes.data(), size);
  if (!in) throw Error{ExitCode::kInvalidConfig, "cannot read data file " + path, "is it a regular file?"};
  return bytes;
}

}  // namespace

ParquetFile ParquetFile::from_bytes(std::string bytes, const std::string& name) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  impl->bytes = std::move(bytes);
  if (impl->bytes.size() < 12 || std::memcmp(impl->bytes.data(), "PAR1", 4) != 0) {
    if (impl->bytes.size() >= 4 && std::memcmp(impl->bytes.data(), "PARE", 4) == 0)
      throw Error{ExitCode::kInvalidConfig, name + ": the parquet file is encrypted (its footer too)",
                  "verlctl reads unencrypted files: re-save it without encryption, e.g. df.to_parquet(path)"};
    corrupt(name, "it does not start with the magic bytes PAR1");
  }
  const auto* data = reinterpret_cast<const uint8_t*>(impl->bytes.data());
  parse_footer(*impl, data, impl->bytes.size(), impl->bytes.size());
  return ParquetFile(std::move(impl));
}

ParquetFile ParquetFile::open(const std::string& path) { return from_bytes(read_whole(path), path); }

ParquetFile ParquetFile::open_footer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error{ExitCode::kInvalidConfig, "cannot open data file " + path,
                "check data.train_files / data.val_files: the path must exist and be readable"};
  }
  in.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(in.tellg());
  auto impl = std::make_shared<Impl>();
  impl->name = path;
  impl->footer_only = true;
  if (size < 12) corrupt(path, "it has " + std::to_string(size < 0 ? 0 : size) + " bytes, fewer than a parquet file's 12");
  char head[4];
  in.seekg(0);
  in.read(head, 4);
  if (std::memcmp(head, "PAR1", 4) != 0 && std::memcmp(head, "PARE", 4) != 0)
    corrupt(path, "it does not start with the magic bytes PAR1");
  char tail[8];
  in.seekg(size - 8);
  in.read(tail, 8);
  uint32_t len;
  std::memcpy(&len, tail, 4);
  const int64_t want = std::min<int64_t>(size, static_cast<int64_t>(len) + 8);
  std::string footer(static_cast<size_t>(want), '\0');
  in.seekg(size - want);
  in.read(footer.data(), want);
  if (!in) throw Error{ExitCode::kInvalidConfig, "cannot read data file " + path, "is it a regular file?"};
  parse_footer(*impl, reinterpret_cast<const uint8_t*>(footer.data()), footer.size(), static_cast<size_t>(size));
  return ParquetFile(std::move(impl));
}

const std::string& ParquetFile::name() const { return impl_->name; }
int64_t ParquetFile::num_rows() const { return impl_->num_rows; }
int64_t ParquetFile::num_row_groups() const { return static_cast<int64_t>(impl_->row_groups.size()); }
const std::vector<std::string>& ParquetFile::columns() const { return impl_->columns; }
const std::vector<ParquetLeaf>& ParquetFile::leaves() const { return impl_->leaf_info; }

std::vector<nlohmann::json> ParquetFile::read_rows() const {
  const Impl& impl = *impl_;
  if (impl.footer_only) throw Error{ExitCode::kFailure, impl.name + ": opened for its footer only", "use ParquetFile::open"};
  std::vector<nlohmann::json> rows;
  size_t base = 0;
  try {
    for (size_t g = 0; g < impl.row_groups.size(); ++g) {
      // Rows take memory as the pages prove they exist (the first column makes them), never as a
      // corrupt count claims.
      const auto n = static_cast<size_t>(impl.row_groups[g].num_rows);
      for (size_t c = 0; c < impl.leaves.size(); ++c) read_column_chunk(impl, g, c, rows, base);
      base += n;
    }
  } catch (const std::bad_alloc&) {
    corrupt(impl.name, "it needs more memory than there is (a corrupt size?)");
  }
  return rows;
}

}  // namespace verl::data
