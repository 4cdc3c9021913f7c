// The slot engine's decode kernels. Paged decode attention: one thread block per (sequence, kv head), four warps walking
// the sequence's cached positions through its block table (warp w takes positions w, w+4, ...),
// each lane holding d/32 of the head dimensions. Per position a warp loads the key row once,
// scores it against the kv head's G query heads (warp-wide sums), and folds the value row into
// a running softmax (the online form of FlashAttention / flash-decoding). The four warps' partial
// results are merged through shared memory at the end. Only positions below the sequence's
// length are read: no mask, no padding.
#include "trainer/decode_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

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

template <typename T>
__device__ float to_f(T v) {
  return Pair<T>::to_float(v);
}

// One block per row: the residual add and the sum of squares in one pass, the scaled row in a
// second (the row stays in L1/L2: n is the hidden size).
template <typename T>
__global__ void add_rms_norm_kernel(float* __restrict__ x, const T* __restrict__ add, const float* __restrict__ w,
                                    T* __restrict__ out, int n, float eps) {
  const size_t row = blockIdx.x;
  float* xr = x + row * n;
  float ss = 0.f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float v = xr[c];
    if (add != nullptr) {
      v += to_f(add[row * n + c]);
      xr[c] = v;
    }
    ss += v * v;
  }
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (threadIdx.x == 0) warp_sums[0] = t;
  }
  __syncthreads();
  const float r = rsqrtf(warp_sums[0] / static_cast<float>(n) + eps);
  for (int c = threadIdx.x; c < n; c += blockDim.x) out[row * n + c] = Pair<T>::from_float(xr[c] * r * w[c]);
}

// One block per row: (h + kvh) heads x d/2 rotated pairs, then kvh x d values copied.
template <typename T>
__global__ void rope_qkv_to_cache_kernel(const T* __restrict__ qkv, const float* __restrict__ cos,
                                         const float* __restrict__ sin, const int64_t* __restrict__ pos,
                                         const int64_t* __restrict__ write_row, T* __restrict__ q_out,
                                         T* __restrict__ kc, T* __restrict__ vc, int h, int kvh, int d) {
  const size_t i = blockIdx.x;
  const int half = d / 2;
  const T* row = qkv + i * static_cast<size_t>((h + 2 * kvh) * d);
  const float* c = cos + static_cast<size_t>(pos[i]) * d;
  const float* s = sin + static_cast<size_t>(pos[i]) * d;
  const size_t dst = static_cast<size_t>(write_row[i]) * kvh * d;
  for (int t = threadIdx.x; t < (h + kvh) * half; t += blockDim.x) {
    const int head = t / half, k = t % half;
    const float x1 = to_f(row[head * d + k]), x2 = to_f(row[head * d + k + half]);
    const float o1 = x1 * c[k] - x2 * s[k];
    const float o2 = x2 * c[k + half] + x1 * s[k + half];
    T* o = head < h ? q_out + (i * h + head) * d : kc + dst + static_cast<size_t>(head - h) * d;
    o[k] = Pair<T>::from_float(o1);
    o[k + half] = Pair<T>::from_float(o2);
  }
  for (int t = threadIdx.x; t < kvh * d; t += blockDim.x) vc[dst + t] = row[(h + kvh) * d + t];
}

template <typename T>
__global__ void silu_and_mul_kernel(const T* __restrict__ gu, T* __restrict__ out, int rows, int n) {
  const size_t total = static_cast<size_t>(rows) * n;
  for (size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = t / n, c = t % n;
    const float g = to_f(gu[r * 2 * n + c]), u = to_f(gu[r * 2 * n + n + c]);
    out[t] = Pair<T>::from_float(g / (1.f + __expf(-g)) * u);
  }
}

}  // namespace

cudaError_t add_rms_norm(float* x, const void* add, const float* w, void* out, int rows, int n, float eps,
                         KvDtype dtype, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const int threads = n >= 1024 ? 512 : 256;
  if (dtype == KvDtype::kBFloat16)
    add_rms_norm_kernel<__nv_bfloat16><<<rows, threads, 0, stream>>>(x, static_cast<const __nv_bfloat16*>(add), w,
                                                                     static_cast<__nv_bfloat16*>(out), n, eps);
  else
    add_rms_norm_kernel<__half><<<rows, threads, 0, stream>>>(x, static_cast<const __half*>(add), w,
                                                              static_cast<__half*>(out), n, eps);
  return cudaGetLastError();
}

cudaError_t rope_qkv_to_cache(const void* qkv, const float* cos, const float* sin, const int64_t* pos,
                              const int64_t* write_row, void* q_out, void* k_cache, void* v_cache, int b, int h,
                              int kvh, int d, KvDtype dtype, cudaStream_t stream) {
  if (b == 0) return cudaSuccess;
  if (dtype == KvDtype::kBFloat16)
    rope_qkv_to_cache_kernel<__nv_bfloat16><<<b, 256, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(qkv), cos, sin, pos, write_row, static_cast<__nv_bfloat16*>(q_out),
        static_cast<__nv_bfloat16*>(k_cache), static_cast<__nv_bfloat16*>(v_cache), h, kvh, d);
  else
    rope_qkv_to_cache_kernel<__half><<<b, 256, 0, stream>>>(static_cast<const __half*>(qkv), cos, sin, pos, write_row,
                                                            static_cast<__half*>(q_out), static_cast<__half*>(k_cache),
                                                            static_cast<__half*>(v_cache), h, kvh, d);
  return cudaGetLastError();
}

cudaError_t silu_and_mul(const void* gu, void* out, int rows, int n, KvDtype dtype, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * n;
  if (total == 0) return cudaSuccess;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<size_t>((total + threads - 1) / threads, 65535));
  if (dtype == KvDtype::kBFloat16)
    silu_and_mul_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(gu),
                                                                       static_cast<__nv_bfloat16*>(out), rows, n);
  else
    silu_and_mul_kernel<__half><<<blocks, threads, 0, stream>>>(static_cast<const __half*>(gu), static_cast<__half*>(out),
                                                                rows, n);
  return cudaGetLastError();
}

bool paged_decode_supported(int h, int kvh, int d) {
  return kvh > 0 && h % kvh == 0 && h / kvh <= kMaxGroup && (d == 64 || d == 128);
}

cudaError_t paged_decode_attention(const PagedDecodeArgs& args, cudaStream_t stream) {
  if (!paged_decode_supported(args.h, args.kvh, args.d)) return cudaErrorInvalidValue;
  if (args.b == 0) return cudaSuccess;
  return args.dtype == KvDtype::kBFloat16 ? launch<__nv_bfloat16>(args, stream) : launch<__half>(args, stream);
}

}  // namespace verl::trainer::cuda
