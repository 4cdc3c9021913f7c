// The CUDA kernel behind paged_decode_attention (trainer/paged_kv.h), behind a plain C++
// launcher so that its translation unit needs no torch headers (nvcc compiles it alone).
// Built only with a CUDA libtorch (trainer/CMakeLists.txt).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace verl::trainer::cuda {

enum class KvDtype { kBFloat16, kFloat16 };

struct PagedDecodeArgs {
  const void* q;               // [b, h, d]
  const void* k_cache;         // [num_blocks, block_size, kvh, d]
  const void* v_cache;
  const int64_t* block_table;  // [rows, table_stride]
  const int64_t* lengths;      // [b]
  void* out;                   // [b, h, d]
  int b, h, kvh, d, block_size, table_stride, window;
  float scale;
  KvDtype dtype;
};

// Whether the kernel handles head_dim d and h / kvh query heads per kv head.
bool paged_decode_supported(int h, int kvh, int d);

// Launches on `stream`; returns the launch's error code (cudaSuccess when queued).
cudaError_t paged_decode_attention(const PagedDecodeArgs& args, cudaStream_t stream);

}  // namespace verl::trainer::cuda
