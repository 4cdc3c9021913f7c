// The paged KV cache's parts: the block pool's accounting, and paged decode attention against
// attention over each sequence's keys laid out contiguously. On a CUDA machine the kernel is
// checked against the gathered reference too (bf16, both head sizes, grouped queries, windows).
#include "trainer/paged_kv.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <numeric>

namespace verl::trainer {
namespace {

TEST(KvBlockPool, HandsOutEveryBlockButTheReservedOneAndTakesSharedBlocksBackAtTheLastOwner) {
  KvBlockPool pool(5);
  EXPECT_EQ(pool.free_blocks(), 4);
  auto a = pool.allocate(3);
  ASSERT_EQ(a.size(), 3u);
  for (auto b : a) EXPECT_NE(b, 0);
  EXPECT_TRUE(pool.allocate(2).empty()) << "only one block is left";
  EXPECT_EQ(pool.free_blocks(), 1) << "a refused request takes nothing";
  pool.share(a[0]);
  pool.release(a[0]);
  EXPECT_EQ(pool.free_blocks(), 1) << "the block still has an owner";
  pool.release(a[0]);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.peak_used(), 3);
  EXPECT_THROW(pool.release(a[0]), c10::Error) << "a double free is caught";
  EXPECT_THROW(pool.release(0), c10::Error) << "the reserved block is never freed";
  auto b = pool.allocate(2);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(pool.used_blocks(), 4);
}

struct Case {
  int64_t b, h, kvh, d, bs, window;
  torch::Dtype dtype;
};

// A cache of shuffled blocks holding `b` sequences of random lengths, and the same keys/values
// per sequence as contiguous tensors.
struct PagedCase {
  torch::Tensor q, kc, vc, table, lengths;
  std::vector<torch::Tensor> k_seq, v_seq;  // [len, kvh, d] per sequence
};

PagedCase make_case(const Case& c, uint64_t seed, const torch::Device& dev) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t max_blocks = 9, blocks = c.b * max_blocks + 1;
  PagedCase pc;
  pc.kc = torch::randn({blocks, c.bs, c.kvh, c.d}, gen, torch::kFloat32);
  pc.vc = torch::randn({blocks, c.bs, c.kvh, c.d}, gen, torch::kFloat32);
  pc.q = torch::randn({c.b, c.h, c.d}, gen, torch::kFloat32);
  auto perm = torch::randperm(blocks - 1, gen, torch::kLong);
  pc.table = torch::zeros({c.b + 2, max_blocks}, torch::kLong);  // more rows than sequences, as the engine's
  pc.lengths = torch::zeros({c.b}, torch::kLong);
  for (int64_t i = 0; i < c.b; ++i) {
    const int64_t len = 1 + torch::randint(max_blocks * c.bs, {1}, gen, torch::kLong).item<int64_t>();
    pc.lengths[i] = len;
    for (int64_t j = 0; j < max_blocks; ++j) pc.table[i][j] = 1 + perm[i * max_blocks + j].item<int64_t>();
    auto rows = pc.table[i].narrow(0, 0, blocks_for(len, c.bs));
    pc.k_seq.push_back(pc.kc.index_select(0, rows).reshape({-1, c.kvh, c.d}).narrow(0, 0, len));
    pc.v_seq.push_back(pc.vc.index_select(0, rows).reshape({-1, c.kvh, c.d}).narrow(0, 0, len));
  }
  auto to = [&](torch::Tensor& t, bool cast) { t = cast ? t.to(c.dtype).to(dev) : t.to(dev); };
  to(pc.q, true);
  to(pc.kc, true);
  to(pc.vc, true);
  to(pc.table, false);
  to(pc.lengths, false);
  return pc;
}

// softmax(q k^T * scale) v per head over a sequence's last `window` (or all) keys, in float64.
torch::Tensor contiguous_attention(const PagedCase& pc, const Case& c, double scale) {
  const int64_t g = c.h / c.kvh;
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < c.b; ++i) {
    auto k = pc.k_seq[static_cast<size_t>(i)].to(torch::kFloat64), v = pc.v_seq[static_cast<size_t>(i)].to(torch::kFloat64);
    // The values the cache holds (rounded to its dtype), as the kernel reads them.
    k = k.to(c.dtype).to(torch::kFloat64);
    v = v.to(c.dtype).to(torch::kFloat64);
    const int64_t len = k.size(0), start = c.window > 0 ? std::max<int64_t>(0, len - c.window) : 0;
    k = k.narrow(0, start, len - start), v = v.narrow(0, start, len - start);
    auto q = pc.q[i].cpu().to(torch::kFloat64);                                   // [h, d]
    auto kh = k.repeat_interleave(g, 1).permute({1, 0, 2});                      // [h, n, d]
    auto vh = v.repeat_interleave(g, 1).permute({1, 0, 2});
    auto p = torch::softmax(torch::matmul(q.unsqueeze(1), kh.transpose(1, 2)) * scale, -1);  // [h, 1, n]
    out.push_back(torch::matmul(p, vh).squeeze(1));
  }
  return torch::stack(out);
}

TEST(PagedDecodeAttention, TheGatheredFormEqualsAttentionOverContiguousKeys) {
  for (const Case& c : {Case{5, 4, 2, 8, 4, 0, torch::kFloat32}, Case{3, 6, 1, 16, 2, 5, torch::kFloat32},
                        Case{4, 2, 2, 8, 16, 0, torch::kFloat32}}) {
    const auto pc = make_case(c, 7, torch::kCPU);
    const double scale = 0.3;
    auto got = paged_decode_attention(pc.q, pc.kc, pc.vc, pc.table, pc.lengths, c.window, scale);
    auto want = contiguous_attention(pc, c, scale);
    EXPECT_TRUE(torch::allclose(got.to(torch::kFloat64), want, 1e-5, 1e-5))
        << "h " << c.h << " kvh " << c.kvh << " window " << c.window << ": max diff "
        << (got.to(torch::kFloat64) - want).abs().max().item<double>();
  }
}

// On CUDA: the kernel (bf16, head_dim 64 and 128, 1 to 8 query heads per kv head, windows)
// against attention over contiguous keys; the CPU has no kernel to test.
TEST(PagedDecodeAttention, TheCudaKernelEqualsAttentionOverContiguousKeys) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device dev(torch::kCUDA, 0);
  for (const Case& c : {Case{37, 14, 2, 64, 16, 0, torch::kBFloat16}, Case{9, 12, 2, 128, 16, 0, torch::kBFloat16},
                        Case{5, 16, 2, 128, 16, 40, torch::kBFloat16}, Case{6, 8, 8, 128, 16, 0, torch::kFloat16},
                        Case{3, 32, 4, 64, 8, 0, torch::kBFloat16}}) {
    const auto pc = make_case(c, 11, dev);
    ASSERT_TRUE(paged_decode_kernel_supports(pc.q, pc.kc)) << "h " << c.h << " kvh " << c.kvh << " d " << c.d;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    auto got = paged_decode_attention(pc.q, pc.kc, pc.vc, pc.table, pc.lengths, c.window, scale);
    auto want = contiguous_attention(pc, c, scale);
    auto diff = (got.cpu().to(torch::kFloat64) - want).abs().max().item<double>();
    EXPECT_LT(diff, 2e-2) << "h " << c.h << " kvh " << c.kvh << " d " << c.d << " window " << c.window;
    auto ref = paged_decode_attention_reference(pc.q, pc.kc, pc.vc, pc.table, pc.lengths, c.window, scale);
    EXPECT_LT((got - ref).abs().max().item<double>(), 2e-2) << "against the gathered form";
  }
}

}  // namespace
}  // namespace verl::trainer
