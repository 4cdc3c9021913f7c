#include "trainer/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "trainer/safetensors_header.h"

namespace verl::trainer::safetensors {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

struct DtypeName {
  const char* name;
  torch::Dtype dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16}, {"I64", torch::kInt64}, {"I32", torch::kInt32},
    {"I16", torch::kInt16},   {"I8", torch::kInt8},     {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

Error io_error(const std::string& what, const std::string& path, int err) {
  return Error{ExitCode::kFailure, "safetensors: cannot " + what + " " + path + ": " + std::strerror(err),
               "check the path, its permissions and free disk space"};
}

c10::optional<torch::Dtype> parse_dtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return c10::nullopt;
}

// Writes all of data or throws.
void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw io_error("write", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: the data itself was fsynced
  (void)::fsync(fd);
  ::close(fd);
}

torch::Tensor to_cpu_contiguous(const torch::Tensor& t, const c10::optional<torch::Dtype>& dtype) {
  auto out = t.detach();
  if (dtype && out.scalar_type() != *dtype) out = out.to(*dtype);
  return out.to(torch::kCPU).contiguous();
}

}  // namespace

const char* dtype_name(torch::Dtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  throw Error{ExitCode::kInvalidConfig, std::string("safetensors: no dtype for ") + c10::toString(dtype),
              "safetensors stores " + supported_dtypes()};
}

// ---------------------------------------------------------------------------------------------
// File

std::shared_ptr<const File> File::open(const std::string& path) {
  std::shared_ptr<File> f(new File());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error{ExitCode::kInvalidConfig, "safetensors: cannot open " + path + ": " + std::strerror(errno),
                "check that the model directory is complete"};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw io_error("stat", path, err);
  }
  f->size_ = static_cast<size_t>(st.st_size);
  void* map = f->size_ == 0 ? MAP_FAILED : ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (f->size_ == 0) throw invalid(path, "file is 0 bytes, shorter than the 8-byte header length");
  if (map == MAP_FAILED) throw io_error("mmap", path, map_err);
  f->map_ = map;  // from here on the destructor unmaps

  // Validated without torch (trainer/safetensors_header.h): a view never reads past the mapping.
  Header header = parse_header(static_cast<const unsigned char*>(map), f->size_, path);
  f->data_start_ = header.data_start;
  f->metadata_ = std::move(header.metadata);
  for (auto& [name, e] : header.tensors) {
    TensorInfo info;
    info.dtype = *parse_dtype(e.dtype);  // parse_header accepts only the names kDtypes has
    info.shape = std::move(e.shape);
    info.begin = e.begin;
    info.end = e.end;
    f->tensors_.emplace(name, std::move(info));
  }
  return f;
}

File::~File() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

torch::Tensor File::view(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw Error{ExitCode::kInvalidConfig, "safetensors: " + path_ + ": no tensor '" + name + "'", ""};
  }
  const TensorInfo& info = it->second;
  auto* data = static_cast<char*>(map_) + data_start_ + info.begin;
  // PROT_READ mapping: the view must never be written; from_blob wants a non-const pointer.
  return torch::from_blob(data, info.shape, torch::TensorOptions().dtype(info.dtype));
}

// ---------------------------------------------------------------------------------------------
// Checkpoint

Checkpoint Checkpoint::open_file(const std::string& path) {
  Checkpoint c;
  c.description_ = path;
  c.files_.push_back(File::open(path));
  for (const auto& kv : c.files_[0]->tensors()) c.where_[kv.first] = 0;
  return c;
}

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  const fs::path single = fs::path(dir) / kSingleFile;
  const fs::path index = fs::path(dir) / kIndexFile;
  if (fs::exists(single)) return open_file(single.string());
  if (!fs::exists(index)) {
    throw Error{ExitCode::kInvalidConfig,
                "model directory " + dir + " has neither " + kSingleFile + " nor " + kIndexFile,
                "verlctl loads safetensors weights only (convert *.bin / *.pt weights with transformers' "
                "save_pretrained(safe_serialization=True))"};
  }
  Checkpoint c;
  c.description_ = index.string();
  json j;
  try {
    j = json::parse(files::read_file(index.string()));
  } catch (const json::exception& e) {
    throw invalid(index.string(), std::string("not JSON: ") + e.what(), "rewrite the index or re-download the model");
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw invalid(index.string(), "has no weight_map object", "rewrite the index or re-download the model");
  }
  std::map<std::string, size_t> file_index;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) throw invalid(index.string(), "weight_map['" + it.key() + "'] is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.find('/') != std::string::npos || file == ".." || file.empty()) {
      throw invalid(index.string(), "weight_map['" + it.key() + "'] names '" + file + "' outside the directory");
    }
    auto found = file_index.find(file);
    if (found == file_index.end()) {
      c.files_.push_back(File::open((fs::path(dir) / file).string()));
      found = file_index.emplace(file, c.files_.size() - 1).first;
    }
    if (!c.files_[found->second]->contains(it.key())) {
      throw Error{ExitCode::kInvalidConfig,
                  "safetensors: " + index.string() + " puts tensor '" + it.key() + "' in " + file + ", which lacks it",
                  "the shards and the index come from different saves: re-download the model"};
    }
    c.where_[it.key()] = found->second;
  }
  return c;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& kv : where_) out.push_back(kv.first);
  return out;
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    throw Error{ExitCode::kInvalidConfig, "safetensors: " + description_ + ": no tensor '" + name + "'", ""};
  }
  return files_[it->second]->tensors().at(name);
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? description_ : files_[it->second]->path();
}

torch::Tensor Checkpoint::view(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    throw Error{ExitCode::kInvalidConfig, "safetensors: " + description_ + ": no tensor '" + name + "'", ""};
  }
  return files_[it->second]->view(name);
}

// ---------------------------------------------------------------------------------------------
// Writing

void write_file(const std::string& path, const std::vector<NamedTensor>& tensors, const WriteOptions& options) {
  // The header first: it needs every tensor's dtype, shape and byte range, not its data.
  json header = json::object();
  json meta = json::object();
  for (const auto& kv : options.metadata) meta[kv.first] = kv.second;
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    if (!seen.insert(t.name).second) {
      throw Error{ExitCode::kFailure, "safetensors: " + path + ": tensor '" + t.name + "' given twice", ""};
    }
    const torch::Dtype dtype = options.dtype ? *options.dtype : t.tensor.scalar_type();
    const uint64_t bytes = static_cast<uint64_t>(t.tensor.numel()) * c10::elementSize(dtype);
    header[t.name] = {{"dtype", dtype_name(dtype)},
                      {"shape", t.tensor.sizes().vec()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as safetensors pads
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i, n >>= 8) len[i] = static_cast<unsigned char>(n & 0xff);

  const fs::path final_path(path);
  const fs::path tmp = final_path.parent_path() / (final_path.filename().string() + ".tmp-" + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("create", tmp.string(), errno);
  try {
    write_all(fd, len, sizeof(len), tmp.string());
    write_all(fd, text.data(), text.size(), tmp.string());
    for (const auto& t : tensors) {
      auto cpu = to_cpu_contiguous(t.tensor, options.dtype);
      write_all(fd, cpu.data_ptr(), static_cast<size_t>(cpu.nbytes()), tmp.string());
    }
    if (::fsync(fd) != 0) throw io_error("fsync", tmp.string(), errno);
    if (::close(fd) != 0) {
      const int err = errno;
      fs::remove(tmp);
      throw io_error("close", tmp.string(), err);
    }
  } catch (...) {
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    std::error_code ec;
    fs::remove(tmp, ec);
    throw io_error("rename onto", path, err);
  }
  fsync_dir(final_path.parent_path().empty() ? fs::path(".") : final_path.parent_path());
}

std::vector<std::string> write_checkpoint(const std::string& dir, const std::vector<NamedTensor>& tensors,
                                          const WriteOptions& options) {
  const auto bytes_of = [&](const NamedTensor& t) {
    const torch::Dtype dtype = options.dtype ? *options.dtype : t.tensor.scalar_type();
    return static_cast<int64_t>(t.tensor.numel()) * static_cast<int64_t>(c10::elementSize(dtype));
  };
  // Shards as save_pretrained cuts them: greedily in order, a tensor never split.
  std::vector<std::vector<NamedTensor>> shards(1);
  int64_t current = 0, total = 0;
  for (const auto& t : tensors) {
    const int64_t b = bytes_of(t);
    if (!shards.back().empty() && current + b > options.max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += b;
    total += b;
  }
  fs::create_directories(dir);
  std::vector<std::string> written;
  if (shards.size() == 1) {
    write_file((fs::path(dir) / kSingleFile).string(), shards[0], options);
    written.push_back(kSingleFile);
  } else {
    json weight_map = json::object();
    char name[64];
    for (size_t i = 0; i < shards.size(); ++i) {
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      write_file((fs::path(dir) / name).string(), shards[i], options);
      for (const auto& t : shards[i]) weight_map[t.name] = name;
      written.push_back(name);
    }
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    files::write_atomic((fs::path(dir) / kIndexFile).string(), index.dump(2) + "\n");
    written.push_back(kIndexFile);
  }
  // Leftovers of an earlier save into the same directory would be read instead of (or with) ours.
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  std::set<std::string> keep(written.begin(), written.end());
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    const bool ours = f == kSingleFile || f == kIndexFile || std::regex_match(f, kShard);
    if (ours && keep.count(f) == 0) fs::remove(e.path());
  }
  return written;
}

}  // namespace verl::trainer::safetensors
