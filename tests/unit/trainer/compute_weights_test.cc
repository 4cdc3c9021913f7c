// ComputeWeights (trainer/model.h): with a bf16 compute dtype over fp32 parameters, a forward
// casts each weight once — outside the checkpointed segments, once for all LM head chunks, once
// per FSDP gather — and the gradients reach the fp32 parameters through that one cast. Checked
// three ways on the CPU (libtorch's bf16 matmuls run there): the losses and gradients are those
// of the cast at every use (WeightCast::kPerUse, the code before issue #14) to bf16 rounding;
// the autograd graph from the loss reaches every cast parameter through exactly one cast node;
// and counting the casts that actually run (RecordFunction on aten::_to_copy) over a forward and
// its backward, checkpoint recompute and FSDP gathers included. fp32 compute copies nothing.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/tiny_model.h"
#include "trainer/batch.h"
#include "trainer/fsdp.h"
#include "trainer/log_probs.h"
#include "trainer/model.h"
#include "trainer/module_engine.h"

namespace verl::trainer {
namespace {

constexpr int64_t kVocab = 97;
constexpr int64_t kRows = 3, kLen = 10, kResponse = 6;
constexpr int64_t kChunk = 5;  // does not divide kRows * kResponse: several head chunks

enum class Head { kChunked, kWhole };  // head_log_probs (the actor's update) or the whole logits

struct Case {
  bool checkpointing = false;
  bool tied = false;
  bool lora = false;
  SequenceLayout layout = SequenceLayout::kPadded;
  Head head = Head::kChunked;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const auto& c = i.param;
  return std::string(c.checkpointing ? "ckpt" : "plain") + (c.tied ? "_tied" : "_untied") + (c.lora ? "_lora" : "") +
         (c.layout == SequenceLayout::kPadded ? "_padded" : "_packed") +
         (c.head == Head::kChunked ? "_chunkedhead" : "_wholehead");
}

ModelConfig config(const Case& c, torch::Dtype compute, WeightCast cast) {
  ModelConfig m = testing::tiny_model_config(kVocab);
  m.tie_word_embeddings = c.tied;
  m.attention_bias = true;  // q/k/v biases are cast too
  m.compute_dtype = compute;
  m.weight_cast = cast;
  return m;
}

CausalLm make_model(const Case& c, torch::Dtype compute, WeightCast cast) {
  auto m = make_causal_lm(config(c, compute, cast), /*seed=*/5);
  if (c.lora) {
    LoraSpec spec;
    spec.rank = 4;
    spec.alpha = 8;
    add_lora(*m, spec, /*seed=*/6);
    // B starts at zero, which would leave A without a gradient: give it values.
    torch::NoGradGuard no_grad;
    auto gen = at::detail::createCPUGenerator(/*seed_in=*/7);
    for (const auto& p : m->named_parameters())
      if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0.0, 0.1, gen);
  }
  m->model->set_gradient_checkpointing(c.checkpointing);
  m->train();
  return m;
}

struct Batch {
  torch::Tensor ids, mask, pos, labels, w_lp, w_ent;
};

Batch batch() {
  auto gen = at::detail::createCPUGenerator(/*seed_in=*/11);
  Batch b;
  b.ids = torch::randint(1, kVocab, {kRows, kLen}, gen, torch::kLong);
  b.mask = torch::ones({kRows, kLen}, torch::kLong);
  b.mask[1].narrow(0, 0, 3).zero_();  // a left-padded prompt
  b.pos = position_ids_from_mask(b.mask);
  b.labels = b.ids.narrow(1, kLen - kResponse, kResponse);
  b.w_lp = torch::rand({kRows, kResponse}, gen);
  b.w_ent = torch::rand({kRows, kResponse}, gen);
  return b;
}

// The actor's loss shape: weighted log-probs and entropies of the response tokens.
torch::Tensor loss_of(CausalLm& m, const Case& c, const Batch& b) {
  torch::Tensor lp, ent;
  if (c.head == Head::kChunked) {
    auto hidden = response_hidden(m, b.ids, b.mask, b.pos, kResponse, c.layout);
    auto res = head_log_probs(m, hidden, b.labels, /*temperature=*/1.0, /*with_entropy=*/true, /*with_argmax=*/false, kChunk);
    lp = res.log_probs;
    ent = res.entropy;
  } else {
    auto logits = response_logits(m, b.ids, b.mask, b.pos, kResponse, c.layout);
    lp = log_probs_from_logits(logits, b.labels);
    ent = entropy_from_logits_chunked(logits);
  }
  return (lp * b.w_lp).sum() + (ent * b.w_ent).sum();
}

struct Outcome {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
};

Outcome train_step(const Case& c, WeightCast cast) {
  auto m = make_model(c, torch::kBFloat16, cast);
  auto loss = loss_of(m, c, batch());
  loss.backward();
  Outcome o;
  o.loss = loss.item<double>();
  for (const auto& p : m->named_parameters())
    if (p.value().grad().defined()) o.grads[p.key()] = p.value().grad().clone();
  return o;
}

// The parameters a forward computes with in the compute dtype: every projection's weight and
// bias, enabled LoRA adapters, and the LM head's weight (the embedding when tied).
bool cast_by_forward(const std::string& name, const Case& c) {
  if (name.find("norm") != std::string::npos) return false;  // fp32 norms
  if (name == "model.embed_tokens.weight") return c.tied;   // the lookup is fp32; the tied head casts
  return true;
}

// For each parameter (by TensorImpl): how many cast nodes (ToCopyBackward*) and how many other
// nodes of the graph from `loss` have an edge into its AccumulateGrad.
struct Edges {
  int casts = 0;
  int direct = 0;
};
std::map<const c10::TensorImpl*, Edges> edges_into_parameters(const torch::Tensor& loss) {
  std::map<const c10::TensorImpl*, Edges> out;
  std::vector<torch::autograd::Node*> todo{loss.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    auto* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    const bool cast = node->name().rfind("ToCopyBackward", 0) == 0;
    for (const auto& edge : node->next_edges()) {
      if (!edge.function) continue;
      if (const auto* acc = dynamic_cast<const torch::autograd::AccumulateGrad*>(edge.function.get())) {
        auto& e = out[acc->variable.unsafeGetTensorImpl()];
        ++(cast ? e.casts : e.direct);
      }
      todo.push_back(edge.function.get());
    }
  }
  return out;
}

// Counts the casts that run with a watched tensor as their source (aten::_to_copy's self),
// forward and backward alike, while it lives. RecordFunction callbacks are plain function
// pointers, hence the static state; one counter at a time.
class CastCounter {
 public:
  explicit CastCounter(const torch::nn::Module& m) {
    std::lock_guard<std::mutex> lock(mu());
    watched().clear();
    counts().clear();
    for (const auto& p : m.named_parameters()) watched()[p.value().unsafeGetTensorImpl()] = p.key();
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
  ~CastCounter() { at::removeCallback(handle_); }
  CastCounter(const CastCounter&) = delete;
  CastCounter& operator=(const CastCounter&) = delete;

  // Casts per parameter name (absent: none).
  std::map<std::string, int> counts_by_name() const {
    std::lock_guard<std::mutex> lock(mu());
    return counts();
  }

 private:
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    if (std::strcmp(fn.name(), "aten::_to_copy") != 0) return nullptr;
    const auto inputs = fn.inputs();
    if (inputs.empty() || !inputs[0].isTensor()) return nullptr;
    std::lock_guard<std::mutex> lock(mu());
    const auto it = watched().find(inputs[0].toTensor().unsafeGetTensorImpl());
    if (it != watched().end()) ++counts()[it->second];
    return nullptr;
  }
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<const c10::TensorImpl*, std::string>& watched() {
    static std::map<const c10::TensorImpl*, std::string> w;
    return w;
  }
  static std::map<std::string, int>& counts() {
    static std::map<std::string, int> c;
    return c;
  }
  at::CallbackHandle handle_;
};

// ---- fp32 compute: nothing to cast

TEST(ComputeWeights, Fp32ComputeCopiesNothing) {
  const Case c;
  auto m = make_model(c, torch::kFloat32, WeightCast::kOncePerForward);
  auto& layer = m->model->layers->at<DecoderLayerImpl>(0);
  EXPECT_TRUE(layer.cast_weights().copies().empty());
  EXPECT_TRUE(m->head_weight().is_same(m->output_embedding()));
  const auto& w = layer.self_attn->q_proj->weight;
  EXPECT_TRUE(layer.cast_weights()[w].is_same(w));
  // bf16 parameters computing in bf16 (an inference copy): nothing to cast either.
  auto bf = make_causal_lm(config(c, torch::kBFloat16, WeightCast::kOncePerForward), /*seed=*/5, torch::kCPU,
                           torch::kBFloat16);
  EXPECT_TRUE(bf->model->layers->at<DecoderLayerImpl>(0).cast_weights().copies().empty());
  EXPECT_TRUE(bf->head_weight().is_same(bf->output_embedding()));
}

TEST(ComputeWeights, Bf16ComputeCastsEachProjectionWeightOnce) {
  Case c;
  c.lora = true;
  auto m = make_model(c, torch::kBFloat16, WeightCast::kOncePerForward);
  auto& layer = m->model->layers->at<DecoderLayerImpl>(0);
  const auto w = layer.cast_weights();
  // 7 projections x (weight + 2 adapters) + q/k/v biases.
  EXPECT_EQ(w.copies().size(), 7u * 3 + 3);
  const auto& q = layer.self_attn->q_proj->weight;
  EXPECT_EQ(w[q].scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(w[q], q.to(torch::kBFloat16)));
  // A norm is not a projection: used as it is.
  EXPECT_TRUE(w[layer.input_layernorm->weight].is_same(layer.input_layernorm->weight));
  // Adapters off (the reference under LoRA): they are not cast.
  set_lora_enabled(*m, false);
  EXPECT_EQ(layer.cast_weights().copies().size(), 7u + 3);
  // The recompute's binding must see the same parameters.
  EXPECT_THROW(layer.bind_weights(w.copies()), c10::Error);
}

// ---- bf16 compute over fp32 parameters

class OneCastPerForward : public ::testing::TestWithParam<Case> {};

// The same numbers as casting at every use: the copies hold the same bf16 values and a layer
// uses each weight once, so the loss and every gradient are bitwise equal, except the chunked
// LM head's weight: its chunks' gradients are summed in fp32 and rounded to bf16 once (as one
// unchunked matmul's would be) instead of each chunk's being rounded, so it agrees to one bf16
// epsilon (2^-7) of its largest magnitude.
// LoRA under checkpointing is compared with the per-use run without checkpointing: casting per
// use, its adapters got no gradient at all there (the checkpoint's one input, the frozen
// embedding's output, needs none, so backward had nothing to run); the copies, inputs of the
// checkpoint, give it one.
TEST_P(OneCastPerForward, SameLossAndGradientsAsACastAtEveryUse) {
  const auto c = GetParam();
  const auto once = train_step(c, WeightCast::kOncePerForward);
  Case reference = c;
  if (c.lora) reference.checkpointing = false;
  const auto per_use = train_step(reference, WeightCast::kPerUse);
  EXPECT_EQ(once.loss, per_use.loss);
  ASSERT_EQ(once.grads.size(), per_use.grads.size());
  ASSERT_FALSE(once.grads.empty());
  const std::string head = c.tied ? "model.embed_tokens.weight" : "lm_head.weight";
  constexpr double kBf16Epsilon = 1.0 / 128;
  for (const auto& [name, g] : per_use.grads) {
    ASSERT_TRUE(once.grads.count(name)) << name;
    const double scale = g.abs().max().item<double>();
    EXPECT_GT(scale, 0.0) << name;
    const double diff = (once.grads.at(name) - g).abs().max().item<double>();
    const double tol = name == head && c.head == Head::kChunked ? kBf16Epsilon * scale : 0.0;
    EXPECT_LE(diff, tol) << name << ": max difference " << diff << " of " << scale;
  }
}

// The graph from the loss reaches each parameter the forward computes with in bf16 through
// exactly one cast node and no other way (the tied embedding also through its fp32 lookup),
// the checkpointed layers' parameters included: their copies are the checkpoint's inputs.
TEST_P(OneCastPerForward, EveryCastParameterIsReachedThroughOneCastNode) {
  const auto c = GetParam();
  auto m = make_model(c, torch::kBFloat16, WeightCast::kOncePerForward);
  const auto edges = edges_into_parameters(loss_of(m, c, batch()));
  int checked = 0;
  for (const auto& p : m->named_parameters()) {
    if (!p.value().requires_grad()) continue;  // LoRA's frozen base: no gradient, no node
    const auto it = edges.find(p.value().unsafeGetTensorImpl());
    const Edges e = it != edges.end() ? it->second : Edges{};
    if (cast_by_forward(p.key(), c)) {
      EXPECT_EQ(e.casts, 1) << p.key();
      const bool tied_lookup = c.tied && p.key() == "model.embed_tokens.weight";
      EXPECT_EQ(e.direct, tied_lookup ? 1 : 0) << p.key();
      ++checked;
    } else {
      EXPECT_EQ(e.casts, 0) << p.key();
    }
  }
  EXPECT_GE(checked, 2 * 7);
  // Casting per use (before #14), the checkpointed layers' casts ran in the backward, outside
  // this graph, and the chunked head's (trainable unless LoRA) weight was an input of the head
  // itself: the walk sees the difference. (LoRA under checkpointing had no graph at all.)
  const bool differs = c.checkpointing || (c.head == Head::kChunked && !c.lora);
  if (!differs || (c.lora && c.checkpointing)) return;
  auto old = make_model(c, torch::kBFloat16, WeightCast::kPerUse);
  const auto old_edges = edges_into_parameters(loss_of(old, c, batch()));
  int uncast = 0;
  for (const auto& p : old->named_parameters()) {
    const auto it = old_edges.find(p.value().unsafeGetTensorImpl());
    uncast += p.value().requires_grad() && cast_by_forward(p.key(), c) && (it == old_edges.end() || it->second.casts == 0);
  }
  EXPECT_GT(uncast, 0);
}

// What runs: over a forward and its backward (checkpoint recompute and head chunks included),
// each cast parameter is the source of exactly one cast. Casting at every use runs more (the
// counter sees casts: this test can fail).
TEST_P(OneCastPerForward, EachParameterIsCastOnceOverForwardAndBackward) {
  const auto c = GetParam();
  for (const auto cast : {WeightCast::kOncePerForward, WeightCast::kPerUse}) {
    if (cast == WeightCast::kPerUse && c.lora && c.checkpointing) continue;  // no backward to run (above)
    auto m = make_model(c, torch::kBFloat16, cast);
    const auto b = batch();
    std::map<std::string, int> counts;
    {
      CastCounter counter(*m);
      loss_of(m, c, b).backward();
      counts = counter.counts_by_name();
    }
    int more = 0;
    for (const auto& p : m->named_parameters()) {
      const bool used = cast_by_forward(p.key(), c);  // LoRA's frozen base too, without autograd
      const int n = counts.count(p.key()) ? counts.at(p.key()) : 0;
      if (cast == WeightCast::kOncePerForward) {
        EXPECT_EQ(n, used ? 1 : 0) << p.key();
      } else {
        more += n > 1;
      }
    }
    if (cast == WeightCast::kPerUse && (c.checkpointing || c.head == Head::kChunked)) EXPECT_GT(more, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, OneCastPerForward,
                         ::testing::Values(Case{}, Case{/*checkpointing=*/true},
                                           Case{/*checkpointing=*/false, /*tied=*/true},
                                           Case{/*checkpointing=*/true, /*tied=*/true},
                                           Case{/*checkpointing=*/false, /*tied=*/false, /*lora=*/true},
                                           Case{/*checkpointing=*/true, /*tied=*/false, /*lora=*/true},
                                           Case{/*checkpointing=*/true, /*tied=*/true, /*lora=*/false,
                                                SequenceLayout::kRemovePadding},
                                           Case{/*checkpointing=*/false, /*tied=*/false, /*lora=*/false,
                                                SequenceLayout::kPadded, Head::kWhole}),
                         case_name);

// The no-grad log-prob pass (the old and reference log-probs): each micro-batch's forward casts
// a layer's weights once, and the LM head's weight is cast once for all micro-batches and chunks
// (per chunk before).
TEST(ComputeWeights, TheLogProbPassCastsTheHeadOnceForAllChunks) {
  const Case c;
  auto m = make_model(c, torch::kBFloat16, WeightCast::kOncePerForward);
  const auto batch = make_batch({{5, 6}, {7}, {8, 9, 10}, {11}}, {{12, 13, 14}, {15, 16}, {17}, {18, 19, 20}},
                                /*response_width=*/3, /*pad_token_id=*/0, torch::kCPU);
  constexpr int64_t kMicroBatch = 2;  // two forwards
  std::map<std::string, int> counts;
  {
    CastCounter counter(*m);
    compute_log_probs(m, batch, kMicroBatch, /*temperature=*/1.0, /*with_entropy=*/true, /*chunk_tokens=*/2);
    counts = counter.counts_by_name();
  }
  for (const auto& p : m->named_parameters()) {
    const int want = !cast_by_forward(p.key(), c) ? 0 : p.key() == "lm_head.weight" ? 1 : 2;
    EXPECT_EQ(counts.count(p.key()) ? counts.at(p.key()) : 0, want) << p.key();
  }
}

// FSDP's layers run through its LayerRunner: each gather is cast once. With checkpointing the
// backward gathers again, so a layer's weights are cast twice per update (as torch FSDP casts
// at each all-gather); without, once. The root (the LM head) once either way.
TEST(ComputeWeights, ShardedLayersCastOncePerGather) {
  for (const bool ckpt : {false, true}) {
    Case c;
    c.checkpointing = ckpt;
    auto m = make_model(c, torch::kBFloat16, WeightCast::kOncePerForward);
    auto engine = make_sharded_engine(*m, /*dist=*/nullptr, torch::kCPU, EngineSpec{"test.actor", true, {}});
    std::map<std::string, int> counts;
    {
      ComputeScope scope(*engine);
      CastCounter counter(*m);
      loss_of(m, c, batch()).backward();
      counts = counter.counts_by_name();
    }
    for (const auto& p : m->named_parameters()) {
      const bool layer = p.key().rfind("model.layers.", 0) == 0;
      const int want = !cast_by_forward(p.key(), c) ? 0 : layer && ckpt ? 2 : 1;
      EXPECT_EQ(counts.count(p.key()) ? counts.at(p.key()) : 0, want) << p.key() << (ckpt ? " (checkpointing)" : "");
    }
  }
}

}  // namespace
}  // namespace verl::trainer
