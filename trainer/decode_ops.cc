#include "trainer/decode_ops.h"

#if VERL_TORCH_HAS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "trainer/decode_kernels.h"
#endif

#include <torch/version.h>

#include <string>

#include "common/error.h"
#include "trainer/model.h"

namespace verl::trainer {

namespace {

#if VERL_TORCH_HAS_CUDA && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))
constexpr bool kFusedSdpa = true;
#else
constexpr bool kFusedSdpa = false;
#endif

}  // namespace

torch::Tensor paged_decode_attention_reference(const torch::Tensor& q, const torch::Tensor& k_cache,
                                               const torch::Tensor& v_cache, const torch::Tensor& block_table,
                                               const torch::Tensor& lengths, int64_t window, double scale) {
  const int64_t b = q.size(0), h = q.size(1), d = q.size(2);
  const int64_t bs = k_cache.size(1), kvh = k_cache.size(2), mb = block_table.size(1), width = mb * bs;
  const auto rows = block_table.narrow(0, 0, b).reshape({-1});
  auto k = k_cache.index_select(0, rows).view({b, width, kvh, d}).transpose(1, 2);  // [b, kvh, W, d]
  auto v = v_cache.index_select(0, rows).view({b, width, kvh, d}).transpose(1, 2);
  const auto pos = torch::arange(width, lengths.options()).unsqueeze(0);
  auto valid = pos < lengths.unsqueeze(1);  // [b, W]
  if (window > 0) valid = valid.logical_and(pos >= (lengths - window).unsqueeze(1));
  valid = valid.view({b, 1, 1, width});
  // Grouped-query attention without repeating k/v: the h/kvh query heads of a kv head are the
  // query rows of one attention against that head's keys.
  const auto qg = q.reshape({b, kvh, h / kvh, d}).to(k_cache.scalar_type());
  torch::Tensor o;
  if (kFusedSdpa && q.is_cuda()) {
#if VERL_TORCH_HAS_CUDA && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))
    o = at::scaled_dot_product_attention(qg, k, v, valid, 0.0, false, scale);
#endif
  } else {
    constexpr double kMaskValue = -1e9;  // as model.cc: zeroes a softmax weight, keeps rows finite
    auto scores = torch::matmul(qg, k.transpose(2, 3)).to(torch::kFloat32) * scale;  // [b, kvh, g, W]
    scores = scores.masked_fill(valid.logical_not(), kMaskValue);
    o = torch::matmul(torch::softmax(scores, -1).to(k_cache.scalar_type()), v);
  }
  return o.reshape({b, h, d}).to(q.scalar_type());
}

bool paged_decode_kernel_supports(const torch::Tensor& q, const torch::Tensor& k_cache) {
#if VERL_TORCH_HAS_CUDA
  const auto dt = k_cache.scalar_type();
  return q.is_cuda() && k_cache.is_cuda() && (dt == torch::kBFloat16 || dt == torch::kFloat16) &&
         q.scalar_type() == dt && k_cache.is_contiguous() &&
         cuda::paged_decode_supported(static_cast<int>(q.size(1)), static_cast<int>(k_cache.size(2)),
                                      static_cast<int>(q.size(2)));
#else
  (void)q;
  (void)k_cache;
  return false;
#endif
}

torch::Tensor paged_decode_attention(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                     const torch::Tensor& block_table, const torch::Tensor& lengths, int64_t window,
                                     double scale) {
#if VERL_TORCH_HAS_CUDA
  if (paged_decode_kernel_supports(q, k_cache) && v_cache.is_contiguous() && v_cache.sizes() == k_cache.sizes()) {
    c10::cuda::CUDAGuard guard(q.device());
    const auto qc = q.contiguous();
    const auto table = block_table.to(torch::kLong).contiguous();
    const auto lens = lengths.to(torch::kLong).contiguous();
    auto out = torch::empty_like(qc);
    cuda::PagedDecodeArgs a;
    a.q = qc.data_ptr();
    a.k_cache = k_cache.data_ptr();
    a.v_cache = v_cache.data_ptr();
    a.block_table = table.data_ptr<int64_t>();
    a.lengths = lens.data_ptr<int64_t>();
    a.out = out.data_ptr();
    a.b = static_cast<int>(q.size(0));
    a.h = static_cast<int>(q.size(1));
    a.d = static_cast<int>(q.size(2));
    a.block_size = static_cast<int>(k_cache.size(1));
    a.kvh = static_cast<int>(k_cache.size(2));
    a.table_stride = static_cast<int>(table.size(1));
    a.window = static_cast<int>(window);
    a.scale = static_cast<float>(scale);
    a.dtype = k_cache.scalar_type() == torch::kBFloat16 ? cuda::KvDtype::kBFloat16 : cuda::KvDtype::kFloat16;
    const auto err = cuda::paged_decode_attention(a, c10::cuda::getCurrentCUDAStream(q.device().index()).stream());
    if (err != cudaSuccess)
      throw Error{ExitCode::kFailure,
                  std::string("rollout: the paged decode attention kernel failed to launch on ") + q.device().str() +
                      ": " + cudaGetErrorString(err),
                  "set actor_rollout_ref.rollout.enforce_eager=true to rule out CUDA graphs, and report the model's "
                  "head_dim and head counts"};
    return out;
  }
#endif
  return paged_decode_attention_reference(q, k_cache, v_cache, block_table, lengths, window, scale);
}

namespace {

#if VERL_TORCH_HAS_CUDA
cuda::KvDtype kernel_dtype(torch::Dtype dt) {
  return dt == torch::kBFloat16 ? cuda::KvDtype::kBFloat16 : cuda::KvDtype::kFloat16;
}

cudaStream_t stream_of(const torch::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

void check_launch(cudaError_t err, const char* what, const torch::Tensor& t) {
  if (err != cudaSuccess)
    throw Error{ExitCode::kFailure,
                std::string("rollout: the ") + what + " kernel failed to launch on " + t.device().str() + ": " +
                    cudaGetErrorString(err),
                "set actor_rollout_ref.rollout.enforce_eager=true to rule out CUDA graphs, and report the model's shape"};
}
#endif

}  // namespace

bool decode_kernels_for(const torch::Device& device, torch::Dtype dtype) {
  return VERL_TORCH_HAS_CUDA && device.is_cuda() && (dtype == torch::kBFloat16 || dtype == torch::kFloat16);
}

torch::Tensor add_rms_norm(torch::Tensor& x, const torch::Tensor& add, const torch::Tensor& w, double eps,
                           torch::Dtype dtype) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "add_rms_norm: x must be fp32 [rows, n]");
#if VERL_TORCH_HAS_CUDA
  if (decode_kernels_for(x.device(), dtype) && x.is_contiguous() && w.scalar_type() == torch::kFloat32 &&
      w.is_contiguous() && (!add.defined() || (add.scalar_type() == dtype && add.is_contiguous()))) {
    c10::cuda::CUDAGuard guard(x.device());
    auto out = torch::empty(x.sizes(), x.options().dtype(dtype));
    check_launch(cuda::add_rms_norm(x.data_ptr<float>(), add.defined() ? add.data_ptr() : nullptr, w.data_ptr<float>(),
                                    out.data_ptr(), static_cast<int>(x.size(0)), static_cast<int>(x.size(1)),
                                    static_cast<float>(eps), kernel_dtype(dtype), stream_of(x)),
                 "add_rms_norm", x);
    return out;
  }
#endif
  if (add.defined()) x.add_(add.to(torch::kFloat32));
  return (w * (x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps))).to(dtype);
}

torch::Tensor rope_qkv_to_cache(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                                const torch::Tensor& pos, const torch::Tensor& write_row, torch::Tensor& k_cache,
                                torch::Tensor& v_cache, int64_t h, int64_t kvh, int64_t d) {
  const int64_t b = qkv.size(0);
  const auto dt = qkv.scalar_type();
#if VERL_TORCH_HAS_CUDA
  if (decode_kernels_for(qkv.device(), dt) && qkv.is_contiguous() && k_cache.scalar_type() == dt &&
      v_cache.scalar_type() == dt && k_cache.is_contiguous() && v_cache.is_contiguous() && cos.is_contiguous() &&
      sin.is_contiguous() && cos.scalar_type() == torch::kFloat32 && d % 2 == 0) {
    c10::cuda::CUDAGuard guard(qkv.device());
    const auto p = pos.to(torch::kLong).contiguous(), rows = write_row.to(torch::kLong).contiguous();
    auto q = torch::empty({b, h, d}, qkv.options());
    check_launch(cuda::rope_qkv_to_cache(qkv.data_ptr(), cos.data_ptr<float>(), sin.data_ptr<float>(),
                                         p.data_ptr<int64_t>(), rows.data_ptr<int64_t>(), q.data_ptr(),
                                         k_cache.data_ptr(), v_cache.data_ptr(), static_cast<int>(b),
                                         static_cast<int>(h), static_cast<int>(kvh), static_cast<int>(d),
                                         kernel_dtype(dt), stream_of(qkv)),
                 "rope_qkv_to_cache", qkv);
    return q;
  }
#endif
  const auto c = cos.index_select(0, pos).unsqueeze(1), s = sin.index_select(0, pos).unsqueeze(1);  // [b, 1, d]
  auto qk = qkv.narrow(-1, 0, (h + kvh) * d).reshape({b, h + kvh, d}).to(torch::kFloat32);
  qk = qk * c + rotate_half(qk) * s;
  auto v = qkv.narrow(-1, (h + kvh) * d, kvh * d).reshape({b, kvh, d});
  k_cache.view({-1, kvh, d}).index_copy_(0, write_row, qk.narrow(1, h, kvh).to(k_cache.scalar_type()));
  v_cache.view({-1, kvh, d}).index_copy_(0, write_row, v.to(v_cache.scalar_type()));
  return qk.narrow(1, 0, h).to(dt);
}

torch::Tensor silu_and_mul(const torch::Tensor& gu) {
  const int64_t n = gu.size(-1) / 2;
#if VERL_TORCH_HAS_CUDA
  if (decode_kernels_for(gu.device(), gu.scalar_type()) && gu.is_contiguous()) {
    c10::cuda::CUDAGuard guard(gu.device());
    auto shape = gu.sizes().vec();
    shape.back() = n;
    auto out = torch::empty(shape, gu.options());
    check_launch(cuda::silu_and_mul(gu.data_ptr(), out.data_ptr(), static_cast<int>(gu.numel() / gu.size(-1)),
                                    static_cast<int>(n), kernel_dtype(gu.scalar_type()), stream_of(gu)),
                 "silu_and_mul", gu);
    return out;
  }
#endif
  return torch::silu(gu.narrow(-1, 0, n)) * gu.narrow(-1, n, n);
}

}  // namespace verl::trainer
