// Reading and writing Hugging Face's safetensors format: an 8-byte little-endian header length
// N, N bytes of JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {str: str}}), then the raw little-endian tensor bytes, offsets counted from the
// end of the header.
//
// Reading maps the file (mmap, read-only) and hands out torch::from_blob views over the mapping:
// no copy is made until the caller copies a view into its own tensor (with copy_, which converts
// device and dtype in the same step). A view is valid only while its File (or the Checkpoint that
// holds it) lives, and is read-only: writing into it faults. Every header is validated when the
// file is opened (known dtype, shape x element size == byte range, ranges inside the file and not
// overlapping), so a view never reads outside the mapping.
//
// A checkpoint is either one file (model.safetensors) or shards listed by
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map": {name: file}}), as
// transformers' save_pretrained writes them; Checkpoint opens either.
//
// Writing is atomic per file (a temp file in the same directory, fsync, rename). write_checkpoint
// shards the way save_pretrained does: tensors in the given order, a new shard when the next
// tensor would take the current one past max_shard_bytes (a tensor larger than that gets a shard
// of its own), names model-0000i-of-0000n.safetensors, the index written last.
//
// Errors: verl::Error with ExitCode::kInvalidConfig naming the file and, where there is one, the
// tensor (truncated file, bad header, unknown dtype, shape/offset mismatch); I/O failures while
// writing are ExitCode::kFailure. Not thread-safe to share a File across threads while it is
// being destroyed; concurrent view() calls on a live File are fine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace verl::trainer::safetensors {

struct TensorInfo {
  torch::Dtype dtype = torch::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the end of the header
  uint64_t end = 0;
};

// "F32" <-> torch::kFloat32, ...: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
const char* dtype_name(torch::Dtype dtype);  // throws verl::Error for a dtype safetensors lacks

// One mapped .safetensors file.
class File {
 public:
  // Maps and validates path; throws verl::Error (kInvalidConfig) naming path.
  static std::shared_ptr<const File> open(const std::string& path);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // A CPU view over the mapping (read-only; valid while this File lives). Throws verl::Error
  // naming the file and the tensor when absent.
  torch::Tensor view(const std::string& name) const;

 private:
  File() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;  // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory: model.safetensors, or the shards of
// model.safetensors.index.json. Shards are mapped when the checkpoint opens and stay mapped for
// its lifetime.
class Checkpoint {
 public:
  // Throws verl::Error (kInvalidConfig) naming dir when it has neither file, or naming the index
  // and the tensor when the index points at a shard that lacks it.
  static Checkpoint open_dir(const std::string& dir);
  // One file alone.
  static Checkpoint open_file(const std::string& path);

  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  // The file that holds name (for error messages).
  const std::string& file_of(const std::string& name) const;
  torch::Tensor view(const std::string& name) const;
  // What to name in an error about the checkpoint as a whole (the index or the single file).
  const std::string& description() const { return description_; }

 private:
  std::vector<std::shared_ptr<const File>> files_;
  std::map<std::string, size_t> where_;  // tensor -> index into files_
  std::string description_;
};

// A tensor to write under a name. Converted to `dtype` (when given) on the CPU one tensor at a
// time, so writing never holds more than one extra tensor in memory.
struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

struct WriteOptions {
  int64_t max_shard_bytes = 5'000'000'000;  // save_pretrained's default "5GB"
  c10::optional<torch::Dtype> dtype;         // nullopt: each tensor's own dtype
  std::map<std::string, std::string> metadata{{"format", "pt"}};
};

// One file, atomically. Throws verl::Error (kFailure) naming path on an I/O error.
void write_file(const std::string& path, const std::vector<NamedTensor>& tensors,
                const WriteOptions& options = {});

// model.safetensors, or model-0000i-of-0000n.safetensors + model.safetensors.index.json when the
// tensors do not fit in one shard. Shards and an index left in dir by an earlier save that this
// one does not use are removed, so the directory never mixes two saves. Returns the files
// written (file names, not paths), the index last.
std::vector<std::string> write_checkpoint(const std::string& dir, const std::vector<NamedTensor>& tensors,
                                          const WriteOptions& options = {});

}  // namespace verl::trainer::safetensors
