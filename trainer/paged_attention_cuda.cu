// Paged decode attention on CUDA: one thread block per (sequence, kv head), four warps walking
// the sequence's cached positions through its block table (warp w takes positions w, w+4, ...),
// each lane holding d/32 of the head dimensions. Per position a warp loads the key row once,
// scores it against the kv head's G query heads (warp-wide sums), and folds the value row into
// a running softmax (the online form of FlashAttention / flash-decoding). The four warps' partial
// results are merged through shared memory at the end. Only positions below the sequence's
// length are read: no mask, no padding.
#include "trainer/paged_attention_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace verl::trainer::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;  // query heads per kv head

template <typename T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ float2 to_float2(type v) { return __bfloat1622float2(v); }
  static __device__ __nv_bfloat16 from_float(float f) { return __float2bfloat16(f); }
  static __device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
};
template <>
struct Pair<__half> {
  using type = __half2;
  static __device__ float2 to_float2(type v) { return __half22float2(v); }
  static __device__ __half from_float(float f) { return __float2half(f); }
  static __device__ float to_float(__half v) { return __half2float(v); }
};

// DPL: head dimensions per lane (d = 32 * DPL).
template <typename T, int DPL>
__global__ void __launch_bounds__(kWarps * 32)
    paged_decode_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                        const int64_t* __restrict__ block_table, const int64_t* __restrict__ lengths, T* __restrict__ out,
                        int h, int kvh, int block_size, int table_stride, int window, float scale) {
  using P = Pair<T>;
  using T2 = typename P::type;
  constexpr int d = 32 * DPL;
  const int kv = blockIdx.x, seq = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = h / kvh;
  const int n = static_cast<int>(lengths[seq]);
  const int start = window > 0 && n > window ? n - window : 0;

  float qr[kMaxGroup][DPL];
#pragma unroll
  for (int j = 0; j < kMaxGroup; ++j) {
#pragma unroll
    for (int k = 0; k < DPL; ++k)
      qr[j][k] = j < group ? P::to_float(q[(static_cast<size_t>(seq) * h + kv * group + j) * d + lane * DPL + k]) * scale
                           : 0.f;
  }
  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][DPL];
#pragma unroll
  for (int j = 0; j < kMaxGroup; ++j) {
    m[j] = -1e30f;
    l[j] = 0.f;
#pragma unroll
    for (int k = 0; k < DPL; ++k) acc[j][k] = 0.f;
  }

  const int64_t* table = block_table + static_cast<size_t>(seq) * table_stride;
  for (int p = start + warp; p < n; p += kWarps) {
    const int64_t blk = table[p / block_size];
    const size_t row = ((static_cast<size_t>(blk) * block_size + p % block_size) * kvh + kv) * d + lane * DPL;
    float kf[DPL], vf[DPL];
#pragma unroll
    for (int k = 0; k < DPL; k += 2) {
      const float2 kk = P::to_float2(*reinterpret_cast<const T2*>(kc + row + k));
      const float2 vv = P::to_float2(*reinterpret_cast<const T2*>(vc + row + k));
      kf[k] = kk.x, kf[k + 1] = kk.y;
      vf[k] = vv.x, vf[k + 1] = vv.y;
    }
    float s[kMaxGroup];
#pragma unroll
    for (int j = 0; j < kMaxGroup; ++j) {
      float t = 0.f;
#pragma unroll
      for (int k = 0; k < DPL; ++k) t += qr[j][k] * kf[k];
      s[j] = t;
    }
#pragma unroll
    for (int j = 0; j < kMaxGroup; ++j) {
      if (j < group) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s[j] += __shfl_xor_sync(0xffffffffu, s[j], o);
      }
    }
#pragma unroll
    for (int j = 0; j < kMaxGroup; ++j) {
      if (j < group) {
        const float mn = fmaxf(m[j], s[j]);
        const float c = __expf(m[j] - mn), e = __expf(s[j] - mn);
        l[j] = l[j] * c + e;
#pragma unroll
        for (int k = 0; k < DPL; ++k) acc[j][k] = acc[j][k] * c + e * vf[k];
        m[j] = mn;
      }
    }
  }

  __shared__ float sm_m[kWarps][kMaxGroup], sm_l[kWarps][kMaxGroup];
  __shared__ float sm_acc[kWarps][kMaxGroup][d];
#pragma unroll
  for (int j = 0; j < kMaxGroup; ++j) {
    if (j < group) {
      if (lane == 0) sm_m[warp][j] = m[j], sm_l[warp][j] = l[j];
#pragma unroll
      for (int k = 0; k < DPL; ++k) sm_acc[warp][j][lane * DPL + k] = acc[j][k];
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < group * d; t += blockDim.x) {
    const int j = t / d, dim = t % d;
    float mx = -1e30f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w][j]);
    float sum = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = __expf(sm_m[w][j] - mx);
      sum += sm_l[w][j] * f;
      o += sm_acc[w][j][dim] * f;
    }
    out[(static_cast<size_t>(seq) * h + kv * group + j) * d + dim] = P::from_float(sum > 0.f ? o / sum : 0.f);
  }
}

template <typename T>
cudaError_t launch(const PagedDecodeArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.kvh), static_cast<unsigned>(a.b));
  const dim3 block(kWarps * 32);
  auto* q = static_cast<const T*>(a.q);
  auto* kc = static_cast<const T*>(a.k_cache);
  auto* vc = static_cast<const T*>(a.v_cache);
  auto* out = static_cast<T*>(a.out);
  if (a.d == 64)
    paged_decode_kernel<T, 2><<<grid, block, 0, stream>>>(q, kc, vc, a.block_table, a.lengths, out, a.h, a.kvh,
                                                          a.block_size, a.table_stride, a.window, a.scale);
  else
    paged_decode_kernel<T, 4><<<grid, block, 0, stream>>>(q, kc, vc, a.block_table, a.lengths, out, a.h, a.kvh,
                                                          a.block_size, a.table_stride, a.window, a.scale);
  return cudaGetLastError();
}

}  // namespace

bool paged_decode_supported(int h, int kvh, int d) {
  return kvh > 0 && h % kvh == 0 && h / kvh <= kMaxGroup && (d == 64 || d == 128);
}

cudaError_t paged_decode_attention(const PagedDecodeArgs& args, cudaStream_t stream) {
  if (!paged_decode_supported(args.h, args.kvh, args.d)) return cudaErrorInvalidValue;
  if (args.b == 0) return cudaSuccess;
  return args.dtype == KvDtype::kBFloat16 ? launch<__nv_bfloat16>(args, stream) : launch<__half>(args, stream);
}

}  // namespace verl::trainer::cuda
