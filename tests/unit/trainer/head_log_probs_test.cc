// head_log_probs: the training path's log-probs and entropies a chunk of positions at a time,
// recomputed in the backward, against the whole-batch graph it replaces (response_logits +
// log_probs_from_logits + entropy_from_logits): the same values and the same gradients on
// every parameter, with a temperature, tied or separate LM head, the entropy in the loss or
// not, and a frozen head.
#include "trainer/log_probs.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/testing/tiny_model.h"
#include "trainer/core_algos.h"

namespace verl::trainer {
namespace {

ModelConfig tiny(bool tied) {
  ModelConfig c = testing::tiny_model_config(97);
  c.tie_word_embeddings = tied;
  return c;
}

struct Outcome {
  torch::Tensor log_probs, entropy, argmax;
  std::map<std::string, torch::Tensor> grads;
};

struct Case {
  bool tied = false;
  double temperature = 1.0;
  bool entropy_in_loss = true;
  bool frozen_head = false;
  int64_t chunk = 5;  // does not divide B * R = 4 * 6
};

Outcome run(const Case& c, bool chunked) {
  torch::manual_seed(3);
  CausalLm m(tiny(c.tied));
  init_weights(*m, 0.3, /*seed=*/11);
  if (c.frozen_head) m->output_embedding().set_requires_grad(false);
  const int64_t b = 4, t = 10, r = 6;
  const auto ids = torch::randint(0, 97, {b, t}, torch::kLong);
  auto mask = torch::ones({b, t}, torch::kLong);
  mask[1].narrow(0, 0, 3).zero_();  // a left-padded prompt
  const auto pos = (mask.cumsum(1) - 1).clamp_min(0);
  const auto labels = ids.narrow(1, t - r, r);
  const auto w_lp = torch::rand({b, r});
  const auto w_ent = torch::rand({b, r});
  Outcome o;
  torch::Tensor lp, ent;
  if (chunked) {
    auto hidden = response_hidden(m, ids, mask, pos, r);
    auto res = head_log_probs(m, hidden, labels, c.temperature, /*with_entropy=*/true, /*with_argmax=*/true, c.chunk);
    lp = res.log_probs;
    ent = res.entropy;
    o.argmax = res.argmax;
  } else {
    auto logits = response_logits(m, ids, mask, pos, r);
    if (c.temperature != 1.0) logits = logits / c.temperature;
    lp = log_probs_from_logits(logits, labels);
    ent = entropy_from_logits_chunked(logits);
    o.argmax = logits.argmax(-1);
  }
  auto loss = (lp * w_lp).sum();
  if (c.entropy_in_loss) loss = loss + (ent * w_ent).sum();
  loss.backward();
  o.log_probs = lp.detach();
  o.entropy = ent.detach();
  for (const auto& p : m->named_parameters())
    if (p.value().grad().defined()) o.grads[p.key()] = p.value().grad().clone();
  return o;
}

// Equal up to float summation order: within 1e-5 of the tensor's largest magnitude.
bool close(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() <= 1e-5 * a.abs().max().item<double>() + 1e-7;
}

void expect_same(const Case& c) {
  const auto whole = run(c, false);
  const auto chunked = run(c, true);
  EXPECT_TRUE(torch::allclose(whole.log_probs, chunked.log_probs, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(whole.entropy, chunked.entropy, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(whole.argmax, chunked.argmax));  // the SFT step's token accuracy
  ASSERT_EQ(whole.grads.size(), chunked.grads.size());
  for (const auto& [name, g] : whole.grads) {
    ASSERT_TRUE(chunked.grads.count(name)) << name;
    EXPECT_TRUE(close(g, chunked.grads.at(name)))
        << name << ": max difference " << (g - chunked.grads.at(name)).abs().max().item<double>();
  }
}

TEST(HeadLogProbs, SameValuesAndGradientsAsTheWholeLogits) { expect_same({}); }

TEST(HeadLogProbs, WithATemperatureAndATiedHead) {
  Case c;
  c.tied = true;
  c.temperature = 0.7;
  expect_same(c);
}

TEST(HeadLogProbs, AnEntropyOutsideTheLossAddsNoGradient) {
  Case c;
  c.entropy_in_loss = false;
  expect_same(c);
}

TEST(HeadLogProbs, AFrozenHeadGetsNoGradient) {
  Case c;
  c.frozen_head = true;
  const auto chunked = run(c, true);
  EXPECT_EQ(chunked.grads.count("lm_head.weight"), 0u);
  EXPECT_GT(chunked.grads.size(), 0u);  // the layers below still learn
  expect_same(c);
}

TEST(HeadLogProbs, OneChunkOrManyGiveTheSameNumbers) {
  Case one;
  one.chunk = 1000;
  Case many;
  many.chunk = 1;
  const auto a = run(one, true);
  const auto b = run(many, true);
  EXPECT_TRUE(close(a.log_probs, b.log_probs));
  for (const auto& [name, g] : a.grads) EXPECT_TRUE(close(g, b.grads.at(name))) << name;
}

}  // namespace
}  // namespace verl::trainer
