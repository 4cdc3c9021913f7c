// Peak memory of per-token log-probs at a real vocabulary (V = 151,936, Qwen's): our chunked
// compute_log_probs (the LM head, log-softmax and gather over 512 positions at a time) against
// the straightforward way (logits of every response position [B, R, V], then log_softmax over
// all of it, then gather), both on the same model and batch. One mode per process, so that the
// peak RSS (getrusage) belongs to that mode alone; bench/logprob_memory.sh runs both and checks
// that they agree. The train_ modes do the same with a graph, forward and backward of the
// log-probs' sum (the actor update's path): head_log_probs (chunks recomputed in the backward)
// against the [B, R, V] logits that autograd keeps; their checksum is the LM head's gradient's.
//   bench_logprob_memory chunked|full|train_chunked|train_full [B] [R]
//     -> one JSON line: mode, peak_rss_mib, seconds, checksum
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "trainer/batch.h"
#include "trainer/log_probs.h"
#include "trainer/model.h"

int main(int argc, char** argv) {
  using namespace verl::trainer;
  const std::string mode = argc > 1 ? argv[1] : "chunked";
  const int64_t b = argc > 2 ? std::stoll(argv[2]) : 16;
  const int64_t r = argc > 3 ? std::stoll(argv[3]) : 128;
  ModelConfig c;
  c.vocab_size = 151936;
  c.hidden_size = 64;
  c.intermediate_size = 176;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 512;
  auto model = make_causal_lm(c, /*seed=*/1);
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(b), std::vector<int64_t>(16, 5));
  std::vector<std::vector<int64_t>> responses(static_cast<size_t>(b), std::vector<int64_t>(static_cast<size_t>(r), 7));
  auto batch = make_batch(prompts, responses, r, /*pad_token_id=*/0, torch::kCPU);
  const auto t0 = std::chrono::steady_clock::now();
  torch::Tensor lp;
  if (mode == "chunked") {
    lp = compute_log_probs(model, batch, /*micro_batch=*/b, /*temperature=*/1.0).log_probs;
  } else if (mode == "train_chunked" || mode == "train_full") {
    auto hidden = response_hidden(model, batch.input_ids, batch.attention_mask, batch.position_ids, r);
    torch::Tensor train_lp =
        mode == "train_chunked"
            ? head_log_probs(model, hidden, batch.responses, /*temperature=*/1.0, /*with_entropy=*/false).log_probs
            : log_probs_from_logits(model->logits(hidden), batch.responses);
    train_lp.sum().backward();
    lp = model->output_embedding().grad().abs();  // its plain sum is ~0 (each row of softmax - onehot sums to 0)
  } else if (mode == "full") {
    torch::NoGradGuard no_grad;
    auto logits = response_logits(model, batch.input_ids, batch.attention_mask, batch.position_ids, r);
    lp = logits.log_softmax(-1).gather(-1, batch.responses.unsqueeze(-1)).squeeze(-1);
  } else {
    std::fprintf(stderr, "unknown mode %s: chunked, full, train_chunked or train_full\n", mode.c_str());
    return 2;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"mode\":\"%s\",\"B\":%lld,\"R\":%lld,\"V\":%lld,\"peak_rss_mib\":%.1f,\"seconds\":%.3f,\"checksum\":%.6f}\n",
              mode.c_str(), static_cast<long long>(b), static_cast<long long>(r), static_cast<long long>(c.vocab_size),
              static_cast<double>(ru.ru_maxrss) / 1024.0, secs, lp.sum().item<double>());
  return 0;
}
