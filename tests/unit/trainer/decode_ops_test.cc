// The slot engine's decode ops (trainer/decode_ops.h). Their torch forms against independent
// formulas on the CPU (paged attention against attention over each sequence's keys laid out
// contiguously); on a CUDA machine the kernels against those forms (bf16 / fp16, both head
// sizes, grouped queries, windows).
#include "trainer/decode_ops.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

#include "trainer/paged_kv.h"

namespace verl::trainer {
namespace {

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

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu().to(torch::kFloat64) - b.cpu().to(torch::kFloat64)).abs().max().item<double>();
}

TEST(DecodeOps, AddRmsNormAddsIntoTheResidualAndNormsIt) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto x = torch::randn({5, 24}, gen, torch::kFloat32), add = torch::randn({5, 24}, gen, torch::kFloat32);
  auto w = torch::rand({24}, gen, torch::kFloat32) + 0.5;
  auto sum = x + add;
  auto want = sum / torch::sqrt(sum.pow(2).mean(-1, true) + 1e-6) * w;
  auto xs = x.clone();
  auto got = add_rms_norm(xs, add, w, 1e-6, torch::kFloat32);
  EXPECT_LT(max_diff(got, want), 1e-5);
  EXPECT_LT(max_diff(xs, sum), 1e-6) << "the residual stream takes the sum";
  auto x2 = x.clone();
  EXPECT_LT(max_diff(add_rms_norm(x2, torch::Tensor(), w, 1e-6, torch::kFloat32),
                     x / torch::sqrt(x.pow(2).mean(-1, true) + 1e-6) * w), 1e-5);
  EXPECT_TRUE(torch::equal(x2, x)) << "without an addend the residual is left alone";
}

TEST(DecodeOps, RopeQkvToCacheRotatesQAndKAndWritesKAndVToTheirRows) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const int64_t b = 3, h = 4, kvh = 2, d = 8, rows = 10;
  auto qkv = torch::randn({b, (h + 2 * kvh) * d}, gen, torch::kFloat32);
  auto angle = torch::rand({20, d / 2}, gen, torch::kFloat32) * 6;
  auto emb = torch::cat({angle, angle}, -1);
  auto cos = emb.cos(), sin = emb.sin();
  auto pos = torch::tensor({7, 0, 19}, torch::kLong), write_row = torch::tensor({4, 9, 1}, torch::kLong);
  auto kc = torch::zeros({rows / 2, 2, kvh, d}), vc = torch::zeros({rows / 2, 2, kvh, d});
  auto q = rope_qkv_to_cache(qkv, cos, sin, pos, write_row, kc, vc, h, kvh, d);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t p = pos[i].item<int64_t>(), r = write_row[i].item<int64_t>();
    auto heads = qkv[i].view({h + 2 * kvh, d});
    auto rot = [&](const torch::Tensor& x) {  // (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) per pair
      auto x1 = x.narrow(-1, 0, d / 2), x2 = x.narrow(-1, d / 2, d / 2);
      auto c = angle[p].cos(), s = angle[p].sin();
      return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
    };
    EXPECT_LT(max_diff(q[i], rot(heads.narrow(0, 0, h))), 1e-5);
    EXPECT_LT(max_diff(kc.view({-1, kvh, d})[r], rot(heads.narrow(0, h, kvh))), 1e-5);
    EXPECT_TRUE(torch::equal(vc.view({-1, kvh, d})[r], heads.narrow(0, h + kvh, kvh)));
  }
  EXPECT_EQ(kc.view({-1, kvh, d})[0].abs().sum().item<float>(), 0.f) << "no other row is written";
}

TEST(DecodeOps, SiluAndMulIsSwiGlusProduct) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto gu = torch::randn({4, 2 * 6}, gen, torch::kFloat32);
  auto g = gu.narrow(1, 0, 6), u = gu.narrow(1, 6, 6);
  EXPECT_LT(max_diff(silu_and_mul(gu), g / (1 + torch::exp(-g)) * u), 1e-6);
}

// On CUDA: each kernel against the torch form computed on the CPU from the same inputs.
TEST(DecodeOps, TheCudaKernelsEqualTheTorchForms) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device dev(torch::kCUDA, 0);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
  for (auto dt : {torch::kBFloat16, torch::kFloat16}) {
    ASSERT_TRUE(decode_kernels_for(dev, dt));
    // add_rms_norm at the 0.5B hidden size and an odd one
    for (int64_t n : {896, 1000}) {
      auto x = torch::randn({37, n}, gen, torch::kFloat32), add = torch::randn({37, n}, gen, torch::kFloat32).to(dt);
      auto w = torch::rand({n}, gen, torch::kFloat32) + 0.5;
      auto xc = x.clone(), xg = x.to(dev);
      auto want = add_rms_norm(xc, add, w, 1e-6, dt);
      auto got = add_rms_norm(xg, add.to(dev), w.to(dev), 1e-6, dt);
      EXPECT_EQ(got.scalar_type(), dt);
      EXPECT_LT(max_diff(got, want), 3e-2) << "add_rms_norm n " << n;
      EXPECT_LT(max_diff(xg, xc), 1e-5) << "add_rms_norm's residual n " << n;
      auto xg2 = x.to(dev), xc2 = x.clone();
      EXPECT_LT(max_diff(add_rms_norm(xg2, torch::Tensor(), w.to(dev), 1e-6, dt),
                         add_rms_norm(xc2, torch::Tensor(), w, 1e-6, dt)), 3e-2);
    }
    // rope_qkv_to_cache at the 0.5B shape (14/2 heads of 64) and a 128-wide one
    for (auto [h, kvh, d] : {std::tuple<int64_t, int64_t, int64_t>{14, 2, 64}, {16, 8, 128}}) {
      const int64_t b = 19, blocks = 40;
      auto qkv = torch::randn({b, (h + 2 * kvh) * d}, gen, torch::kFloat32).to(dt);
      auto angle = torch::rand({300, d / 2}, gen, torch::kFloat32) * 6;
      auto emb = torch::cat({angle, angle}, -1);
      auto cos = emb.cos(), sin = emb.sin();
      auto pos = torch::randint(300, {b}, gen, torch::kLong);
      auto write_row = torch::randperm(blocks * 16, gen, torch::kLong).narrow(0, 0, b);
      auto kc = torch::zeros({blocks, 16, kvh, d}, torch::kFloat32).to(dt), vc = kc.clone();
      auto kg = kc.to(dev), vg = vc.to(dev);
      auto want = rope_qkv_to_cache(qkv, cos, sin, pos, write_row, kc, vc, h, kvh, d);
      auto got = rope_qkv_to_cache(qkv.to(dev), cos.to(dev), sin.to(dev), pos.to(dev), write_row.to(dev), kg, vg, h, kvh, d);
      EXPECT_LT(max_diff(got, want), 3e-2) << "rope q, d " << d;
      EXPECT_LT(max_diff(kg, kc), 3e-2) << "rope k, d " << d;
      EXPECT_TRUE(torch::equal(vg.cpu(), vc)) << "v, d " << d;
    }
    // silu_and_mul at the 0.5B intermediate size
    auto gu = torch::randn({23, 2 * 4864}, gen, torch::kFloat32).to(dt);
    // One rounding (the kernel's) against two (silu, then the product): relative to the values.
    const auto want = silu_and_mul(gu);
    EXPECT_LT(max_diff(silu_and_mul(gu.to(dev)), want), 1e-2 * want.abs().max().item<double>());
  }
}

}  // namespace
}  // namespace verl::trainer
