#include "trainer/paged_kv.h"

#if VERL_TORCH_HAS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "trainer/paged_attention_cuda.h"
#endif

#include <torch/version.h>

#include <numeric>
#include <string>

#include "common/error.h"

namespace verl::trainer {

KvBlockPool::KvBlockPool(int64_t num_blocks) : refs_(static_cast<size_t>(std::max<int64_t>(num_blocks, 1)), 0) {
  refs_[0] = 1;  // reserved
  for (int64_t b = num_blocks - 1; b >= 1; --b) free_.push_back(b);
}

std::vector<int64_t> KvBlockPool::allocate(int64_t n) {
  if (n > free_blocks()) return {};
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(free_.back());
    free_.pop_back();
    refs_[static_cast<size_t>(out.back())] = 1;
  }
  peak_used_ = std::max(peak_used_, used_blocks());
  return out;
}

void KvBlockPool::share(int64_t block) {
  TORCH_CHECK(block > 0 && block < num_blocks() && refs_[static_cast<size_t>(block)] > 0,
              "KvBlockPool: sharing block ", block, ", which is not allocated");
  ++refs_[static_cast<size_t>(block)];
}

void KvBlockPool::release(int64_t block) {
  TORCH_CHECK(block > 0 && block < num_blocks() && refs_[static_cast<size_t>(block)] > 0,
              "KvBlockPool: releasing block ", block, ", which is not allocated");
  if (--refs_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

void KvBlockPool::release(const std::vector<int64_t>& blocks) {
  for (auto b : blocks) release(b);
}

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

}  // namespace verl::trainer
