// The slot engine against the native loop (the reference): the same tokens, lengths and stop
// flags for greedy and sampled decoding, whatever the slot count, prefill chunking or bucket
// sizes; rollout.n samples share one prefill; log-probs are the model's; ignore_eos. On a CUDA
// machine the last test also checks CUDA-graph replay against eager decoding.
#include "trainer/slot_rollout.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "tests/testing/tiny_model.h"
#include "trainer/native_rollout.h"

namespace verl::trainer {
namespace {

constexpr int64_t kPad = 0;

ModelConfig tiny(torch::Dtype dtype = torch::kFloat32) {
  ModelConfig c = testing::tiny_model_config(97);
  c.attention_bias = true;
  c.compute_dtype = dtype;
  return c;
}

CausalLm policy(const ModelConfig& c, double std = 0.5) {
  CausalLm m(c);
  init_weights(*m, std, 11);
  return m;
}

NamedTensors weights_of(CausalLm& m) {
  NamedTensors w;
  for (const auto& p : m->named_parameters()) w.emplace_back(p.key(), p.value());
  return w;
}

std::vector<std::vector<int64_t>> prompts(size_t n, uint64_t seed = 5) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < n; ++i) {
    const int64_t len = 2 + static_cast<int64_t>(i % 7);
    auto t = torch::randint(1, 97, {len}, gen, torch::kLong);
    out.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + len);
  }
  return out;
}

std::vector<uint64_t> seeds(size_t n) {
  std::vector<uint64_t> s;
  for (size_t i = 0; i < n; ++i) s.push_back(row_seed(9, 1, i));
  return s;
}

GenerateOptions options(bool sample, std::vector<int64_t> stops, int64_t max_len = 12) {
  GenerateOptions o;
  o.sampling.do_sample = sample;
  o.sampling.temperature = sample ? 0.9 : 0.0;
  if (sample) {
    o.sampling.top_k = 40;
    o.sampling.top_p = 0.95;
  }
  o.max_response_length = max_len;
  o.stop_token_ids = std::move(stops);
  o.pad_token_id = kPad;
  return o;
}

SlotRolloutOptions slots(int64_t max_num_seqs, int64_t max_batched = 8192) {
  SlotRolloutOptions o;
  o.max_num_seqs = max_num_seqs;
  o.max_num_batched_tokens = max_batched;
  o.steps_per_check = 3;  // checks fall mid-response, so slots are refilled and compacted
  return o;
}

void expect_same(const RolloutBatch& a, const RolloutBatch& b, const std::string& what) {
  EXPECT_TRUE(torch::equal(a.responses.cpu(), b.responses.cpu())) << what;
  EXPECT_TRUE(torch::equal(a.response_mask.cpu(), b.response_mask.cpu())) << what;
  EXPECT_TRUE(torch::equal(a.input_ids.cpu(), b.input_ids.cpu())) << what;
  EXPECT_TRUE(torch::equal(a.attention_mask.cpu(), b.attention_mask.cpu())) << what;
  EXPECT_TRUE(torch::equal(a.position_ids.cpu(), b.position_ids.cpu())) << what;
  EXPECT_EQ(a.response_lengths, b.response_lengths) << what;
  EXPECT_EQ(a.finished, b.finished) << what;
  EXPECT_EQ(a.prompt_lengths, b.prompt_lengths) << what;
}

// Stop ids that end some rows early: tokens the reference emits mid-response.
std::vector<int64_t> stops_from(const RolloutBatch& free_run) {
  auto r = free_run.responses.cpu();
  return {r[0][3].item<int64_t>(), r[2][6].item<int64_t>()};
}

TEST(SlotRollout, GreedyTokensEqualTheNativeLoopsWithFewerSlotsThanSequences) {
  const auto c = tiny();
  auto m = policy(c);
  const auto ps = prompts(11);
  const auto stops = stops_from(generate(m, ps, options(false, {}), {}, torch::kCPU));
  const auto ref = generate(m, ps, options(false, stops), {}, torch::kCPU);
  int64_t early = 0;
  for (auto len : ref.response_lengths) early += len < 12;
  ASSERT_GE(early, 2) << "the stop ids must end some rows early for this test to mean anything";
  for (int64_t s : {1, 3, 4, 11}) {
    SlotRollout engine(c, torch::kCPU, slots(s));
    engine.load_weights(weights_of(m));
    expect_same(ref, engine.generate(ps, options(false, stops), {}), "max_num_seqs " + std::to_string(s));
    EXPECT_EQ(engine.last_stats().slots, s);
  }
}

TEST(SlotRollout, SampledTokensEqualTheNativeLoopsWhateverTheSlotsAndChunks) {
  const auto c = tiny();
  auto m = policy(c);
  const auto ps = prompts(9);
  const auto free_run = generate(m, ps, options(true, {}), seeds(9), torch::kCPU);
  const auto stops = stops_from(free_run);
  const auto ref = generate(m, ps, options(true, stops), seeds(9), torch::kCPU);
  for (auto [s, chunk] : {std::pair<int64_t, int64_t>{2, 8192}, {5, 12}, {9, 1}}) {
    SlotRollout engine(c, torch::kCPU, slots(s, chunk));
    engine.load_weights(weights_of(m));
    expect_same(ref, engine.generate(ps, options(true, stops), seeds(9)),
                "max_num_seqs " + std::to_string(s) + ", max_num_batched_tokens " + std::to_string(chunk));
  }
}

TEST(SlotRollout, TheSamplesOfAPromptShareOnePrefill) {
  const auto c = tiny();
  auto m = policy(c);
  const auto base = prompts(3);
  std::vector<std::vector<int64_t>> ps;
  for (const auto& p : base)
    for (int j = 0; j < 4; ++j) ps.push_back(p);  // rollout.n = 4, repeated as the trainer does
  SlotRollout engine(c, torch::kCPU, slots(12));
  engine.load_weights(weights_of(m));
  const auto out = engine.generate(ps, options(true, {}), seeds(12));
  const auto& st = engine.last_stats();
  EXPECT_EQ(st.prefill_forwards, 1);
  EXPECT_EQ(st.prefill_tokens, 3 * 4);  // 3 distinct prompts, the longest of 4 tokens
  // The four samples of a prompt differ (their own seeds), as they must.
  auto r = out.responses.cpu();
  EXPECT_FALSE(torch::equal(r[0], r[1]));
}

// The blocks the samples of a prompt share: the ones their prompt fills. Blocks of 2 positions
// and prompts of 2..8 tokens: every prompt fills at least one.
TEST(SlotRollout, TheSamplesOfAPromptShareTheBlocksTheirPromptFills) {
  const auto c = tiny();
  auto m = policy(c);
  const auto base = prompts(5);
  std::vector<std::vector<int64_t>> ps;
  std::vector<uint64_t> ss;
  int64_t full_blocks = 0;
  for (const auto& p : base) {
    for (int j = 0; j < 3; ++j) ps.push_back(p);
    full_blocks += 2 * static_cast<int64_t>(p.size() / 2);  // the second and third sample's
  }
  const auto opt = options(true, {});
  const auto ref = generate(m, ps, opt, seeds(ps.size()), torch::kCPU);
  auto o = slots(15);
  o.block_size = 2;
  SlotRollout engine(c, torch::kCPU, o);
  engine.load_weights(weights_of(m));
  expect_same(ref, engine.generate(ps, opt, seeds(ps.size())), "shared blocks");
  EXPECT_EQ(engine.last_stats().shared_kv_blocks, full_blocks);
  EXPECT_EQ(engine.last_stats().preemptions, 0);
}

// A pool too small for every slot at once: sequences wait for blocks, the youngest are
// preempted when the live ones grow past the pool, and the tokens are still the native loop's
// (a preempted sequence starts again and draws the same uniforms).
TEST(SlotRollout, ASmallBlockPoolPreemptsAndStillSamplesTheNativeLoopsTokens) {
  const auto c = tiny();
  auto m = policy(c);
  const auto ps = prompts(10);  // 2..8 tokens, 12 new: at most 20 positions = 5 blocks of 4
  for (bool sample : {false, true}) {
    const auto opt = options(sample, {});
    const auto ref = generate(m, ps, opt, seeds(10), torch::kCPU);
    auto o = slots(10);
    o.block_size = 4;
    o.kv_blocks_override = 1 + 12;  // room for 2.4 whole sequences
    SlotRollout engine(c, torch::kCPU, o);
    engine.load_weights(weights_of(m));
    expect_same(ref, engine.generate(ps, opt, sample ? seeds(10) : std::vector<uint64_t>{}),
                sample ? "sampled" : "greedy");
    const auto& st = engine.last_stats();
    EXPECT_GT(st.preemptions, 0) << (sample ? "sampled" : "greedy");
    EXPECT_LE(st.peak_kv_blocks, 12);
    EXPECT_EQ(st.kv_blocks, 13);
  }
  // Fewer blocks than one sequence needs: a clear error, not a hang.
  auto o = slots(2);
  o.block_size = 4;
  o.kv_blocks_override = 4;
  SlotRollout engine(c, torch::kCPU, o);
  engine.load_weights(weights_of(m));
  try {
    engine.generate(ps, options(false, {}), {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold one sequence of 20 positions"), std::string::npos) << e.what();
  }
}

TEST(SlotRollout, MaxNumBatchedTokensSplitsThePrefill) {
  const auto c = tiny();
  auto m = policy(c);
  const auto ps = prompts(6);  // lengths 2..7
  SlotRollout whole(c, torch::kCPU, slots(6));
  SlotRollout chunked(c, torch::kCPU, slots(6, 8));
  whole.load_weights(weights_of(m));
  chunked.load_weights(weights_of(m));
  expect_same(whole.generate(ps, options(false, {}), {}), chunked.generate(ps, options(false, {}), {}), "chunked");
  EXPECT_EQ(whole.last_stats().prefill_forwards, 1);
  EXPECT_GE(chunked.last_stats().prefill_forwards, 3);
}

TEST(SlotRollout, LogProbsAreThePolicysAtTheSampledTokens) {
  const auto c = tiny();
  auto m = policy(c);
  const auto ps = prompts(5);
  auto opt = options(false, {});
  SlotRollout engine(c, torch::kCPU, slots(2));
  engine.load_weights(weights_of(m));
  const auto out = engine.generate(ps, opt, {});
  ASSERT_TRUE(out.rollout_log_probs.defined());
  torch::NoGradGuard no_grad;
  const int64_t p = out.prompts.size(1), r = out.response_width();
  auto logits = m->forward(out.input_ids, out.attention_mask, out.position_ids);
  auto lp = torch::log_softmax(logits.narrow(1, p - 1, r), -1).gather(2, out.responses.unsqueeze(2)).squeeze(2);
  EXPECT_TRUE(torch::allclose(out.rollout_log_probs, lp * out.response_mask, 1e-4, 1e-4));
  // The native loop reports the same numbers.
  const auto native = generate(m, ps, opt, {}, torch::kCPU);
  EXPECT_TRUE(torch::allclose(native.rollout_log_probs, out.rollout_log_probs, 1e-4, 1e-4));
}

TEST(SlotRollout, IgnoreEosRunsEveryResponseToTheEnd) {
  const auto c = tiny();
  auto m = policy(c);
  const auto ps = prompts(4);
  auto opt = options(false, stops_from(generate(m, ps, options(false, {}), {}, torch::kCPU)));
  opt.ignore_eos = true;
  SlotRollout engine(c, torch::kCPU, slots(4));
  engine.load_weights(weights_of(m));
  const auto out = engine.generate(ps, opt, {});
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(out.response_lengths[i], 12);
    EXPECT_FALSE(out.finished[i]);
  }
  expect_same(generate(m, ps, opt, {}, torch::kCPU), out, "native with ignore_eos");
}

TEST(SlotRollout, LoadWeightsNamesAnUnknownTensor) {
  SlotRollout engine(tiny(), torch::kCPU, slots(2));
  try {
    engine.load_weights({{"model.layers.9.mlp.up_proj.weight", torch::zeros({48, 32})}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.9.mlp.up_proj.weight"), std::string::npos);
  }
}

TEST(SlotRollout, TheBlockedInverseCdfPicksTheFlatOnesToken) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  // A vocabulary that is not a multiple of the block, some -inf (filtered) entries, peaked rows.
  auto z = torch::randn({64, 3000}, gen, torch::kFloat64) * 4;
  z.index_put_({torch::indexing::Slice(0, 8), torch::indexing::Slice(100, 2500)}, -std::numeric_limits<double>::infinity());
  auto u = torch::rand({64}, gen, torch::kFloat64);
  u[0] = 0.0;
  u[1] = 1.0 - 1e-12;
  auto [next, lp] = sample_inverse_cdf_blocked(z, u);
  auto cdf = z.softmax(-1).cumsum(-1);
  auto flat = (cdf < u.unsqueeze(1) * cdf.narrow(1, 2999, 1)).sum(-1).clamp_max(2999);
  EXPECT_TRUE(torch::equal(next, flat));
  auto want = torch::log_softmax(z, -1).gather(1, flat.unsqueeze(1)).squeeze(1).to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(lp, want, 1e-5, 1e-5));
}

// On a CUDA machine: the captured graphs replay exactly what the eager steps compute (bf16,
// sampled, with refills and bucket changes); on the CPU both run eagerly.
TEST(SlotRollout, GraphReplayEqualsEagerDecodingOnThisMachinesDevice) {
  const torch::Device dev = torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const auto c = tiny(dev.is_cuda() ? torch::kBFloat16 : torch::kFloat32);
  auto m = policy(tiny());
  const auto ps = prompts(21);
  auto opt = options(true, stops_from(generate(m, ps, options(true, {}), seeds(21), torch::kCPU)));
  auto run = [&](bool eager) {
    auto o = slots(8);
    o.enforce_eager = eager;
    SlotRollout engine(c, dev, o);
    engine.load_weights(weights_of(m));
    auto out = engine.generate(ps, opt, seeds(21));
    auto again = engine.generate(ps, opt, seeds(21));  // graphs (re)captured or reused: same tokens
    expect_same(out, again, eager ? "eager twice" : "graphs twice");
    if (dev.is_cuda() && !eager) EXPECT_GT(engine.last_stats().graph_captures, 0);
    return out;
  };
  const auto eager = run(true), graphs = run(false);
  expect_same(eager, graphs, "graphs vs eager");
  EXPECT_TRUE(torch::equal(eager.rollout_log_probs.cpu(), graphs.rollout_log_probs.cpu()));
}

}  // namespace
}  // namespace verl::trainer
