// The slot engine's CUDA kernels (trainer/decode_ops.h wraps them for torch tensors), behind
// plain C++ launchers so that their translation unit needs no torch headers (nvcc compiles it
// alone). Built only with a CUDA libtorch (trainer/CMakeLists.txt). Each returns the launch's
// error code (cudaSuccess when queued on `stream`).
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

cudaError_t paged_decode_attention(const PagedDecodeArgs& args, cudaStream_t stream);

// Per row of x (fp32 [rows, n], updated in place): x += add (when add is not null; [rows, n] in
// `dtype`), then out = x / sqrt(mean(x^2) + eps) * w (w fp32 [n]) in `dtype`.
cudaError_t add_rms_norm(float* x, const void* add, const float* w, void* out, int rows, int n, float eps,
                         KvDtype dtype, cudaStream_t stream);

// Per row i of qkv ([b, (h + 2 kvh) d] in `dtype`): q and k rotated by the RoPE tables at
// position pos[i] (cos / sin fp32 [positions, d], rotate-half form), in fp32; q written to q_out
// [b, h, d], k and v to row write_row[i] of the caches viewed [rows, kvh, d].
cudaError_t rope_qkv_to_cache(const void* qkv, const float* cos, const float* sin, const int64_t* pos,
                              const int64_t* write_row, void* q_out, void* k_cache, void* v_cache, int b, int h,
                              int kvh, int d, KvDtype dtype, cudaStream_t stream);

// out [rows, n] = silu(gu[:, :n]) * gu[:, n:] for gu [rows, 2n], in fp32, rounded once to `dtype`.
cudaError_t silu_and_mul(const void* gu, void* out, int rows, int n, KvDtype dtype, cudaStream_t stream);

}  // namespace verl::trainer::cuda
