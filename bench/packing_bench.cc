// What use_remove_padding and enable_gradient_checkpointing buy, on the CPU, one mode per
// process (bench/packing_bench.sh runs them side by side and checks that they agree):
//   bench_packing forward padded|packed [B] [T]    -> time of a no-grad forward and of a
//       forward + backward of the backbone over B rows of T slots whose real lengths are spread
//       evenly over (0, T] (about half of the slots padding), median of 5 after a warm-up;
//   bench_packing memory plain|checkpoint [B] [T]  -> peak RSS growth of one forward + backward
//       of full-length rows (getrusage's high-water mark before and after; the process does
//       nothing else, so the growth is the activations the backward keeps plus the gradients).
// Prints one JSON line: mode, B, T, real_tokens, seconds / peak MiB, checksum.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/model.h"

namespace {

using namespace verl::trainer;

ModelConfig bench_config() {
  ModelConfig c;
  c.vocab_size = 1024;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.max_position_embeddings = 4096;
  return c;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

template <typename F>
double median_seconds(F f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "forward";
  const std::string mode = argc > 2 ? argv[2] : "packed";
  const int64_t b = argc > 3 ? std::stoll(argv[3]) : 16;
  const int64_t t = argc > 4 ? std::stoll(argv[4]) : 256;
  torch::manual_seed(0);  // the token ids
  auto model = make_causal_lm(bench_config(), /*seed=*/1);
  auto& backbone = model->model;
  // Left padding: row i holds its real tokens at the end of its T slots.
  auto mask = torch::zeros({b, t}, torch::kLong);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t len = what == "memory" ? t : std::max<int64_t>(1, t * (i + 1) / b);
    mask[i].narrow(0, t - len, len).fill_(1);
  }
  const auto ids = torch::randint(4, 1024, {b, t}, torch::kLong) * mask;
  const auto pos = position_ids_from_mask(mask);
  const auto layout = mode == "packed" ? SequenceLayout::kRemovePadding : SequenceLayout::kPadded;
  const double real = mask.sum().item<double>();
  auto run = [&] { return backbone_hidden(backbone, ids, mask, pos, layout); };
  auto masked_sum = [&](const torch::Tensor& h) { return (h * mask.unsqueeze(-1)).sum(); };

  if (what == "forward") {
    double checksum = 0;
    const double fwd = median_seconds([&] {
      torch::NoGradGuard no_grad;
      checksum = masked_sum(run()).item<double>();
    });
    const double fwd_bwd = median_seconds([&] {
      model->zero_grad();
      masked_sum(run()).backward();
    });
    std::printf("{\"bench\":\"forward\",\"mode\":\"%s\",\"B\":%lld,\"T\":%lld,\"real_tokens\":%.0f,"
                "\"padding\":%.2f,\"forward_s\":%.4f,\"forward_backward_s\":%.4f,\"checksum\":%.6f}\n",
                mode.c_str(), static_cast<long long>(b), static_cast<long long>(t), real,
                1.0 - real / static_cast<double>(b * t), fwd, fwd_bwd, checksum);
    return 0;
  }
  // memory: one forward + backward, nothing before it but building the inputs.
  backbone->set_gradient_checkpointing(mode == "checkpoint");
  const double before = peak_rss_mib();
  const auto t0 = std::chrono::steady_clock::now();
  auto loss = masked_sum(backbone->forward(ids, mask, pos));
  loss.backward();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double grad_sum = 0;
  for (const auto& p : model->parameters()) grad_sum += p.grad().abs().sum().item<double>();
  std::printf("{\"bench\":\"memory\",\"mode\":\"%s\",\"B\":%lld,\"T\":%lld,\"peak_growth_mib\":%.1f,"
              "\"seconds\":%.3f,\"checksum\":%.6f}\n",
              mode.c_str(), static_cast<long long>(b), static_cast<long long>(t), peak_rss_mib() - before, secs,
              grad_sum);
  return 0;
}
