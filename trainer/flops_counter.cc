#include "trainer/flops_counter.h"

#if VERL_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <utility>

namespace verl::trainer {

double estimate_flops(const ModelConfig& c, const std::vector<int64_t>& seqlens) {
  const double hidden = static_cast<double>(c.hidden_size);
  const double head_dim = static_cast<double>(c.head_dim());
  const double q = static_cast<double>(c.num_attention_heads) * head_dim;
  const double kv = static_cast<double>(c.num_key_value_heads) * head_dim;
  const double layers = static_cast<double>(c.num_hidden_layers);
  const double mlp_n = hidden * static_cast<double>(c.intermediate_size) * 3.0;
  const double attn_linear_n = hidden * (q + kv + kv + q);
  const double emb_and_lm_head_n = static_cast<double>(c.vocab_size) * hidden * 2.0;
  const double dense_n = (mlp_n + attn_linear_n) * layers + emb_and_lm_head_n;
  double tokens = 0, square_sum = 0;
  for (const int64_t s : seqlens) {
    tokens += static_cast<double>(s);
    square_sum += static_cast<double>(s) * static_cast<double>(s);
  }
  return 6.0 * dense_n * tokens + 6.0 * square_sum * head_dim * static_cast<double>(c.num_attention_heads) * layers;
}

double promised_flops_for_name(const std::string& name) {
  // verl's table (flops_counter.py _DEVICE_FLOPS). verl tries the keys in reverse alphabetical
  // order and takes the first contained in the name; the longest match is the same choice for
  // every name that table can tell apart ("H200" before "H20", "L40S" before "L40").
  static const std::pair<const char*, double> kTable[] = {
      {"CPU", 448e9},         {"GB200", 2.5e15},   {"B200", 2.25e15},    {"MI300X", 1336e12}, {"H100", 989e12},
      {"H800", 989e12},       {"H200", 989e12},    {"A100", 312e12},     {"A800", 312e12},    {"L40S", 362.05e12},
      {"L40", 181.05e12},     {"A40", 149.7e12},   {"L20", 119.5e12},    {"H20", 148e12},     {"910B", 354e12},
      {"Ascend910", 354e12},  {"RTX 3070 Ti", 21.75e12}};
  double best = 0;
  size_t best_len = 0;
  for (const auto& [key, flops] : kTable) {
    const std::string k = key;
    if (k.size() > best_len && name.find(k) != std::string::npos) {
      best = flops;
      best_len = k.size();
    }
  }
  return best;
}

double promised_flops(const torch::Device& device) {
#if VERL_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : at::cuda::current_device();
    return promised_flops_for_name(at::cuda::getDeviceProperties(index)->name);
  }
#endif
  return device.is_cpu() ? promised_flops_for_name("CPU") : 0.0;
}

double model_flops_utilization(const ModelConfig& config, const torch::Tensor& attention_mask, int64_t epochs,
                               double seconds, const torch::Device& device) {
  const double promised = promised_flops(device);
  if (seconds <= 0 || promised <= 0) return 0.0;
  const auto lengths = attention_mask.sum(1).to(torch::kCPU).to(torch::kInt64).contiguous();
  const std::vector<int64_t> seqlens(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel());
  return estimate_flops(config, seqlens) * static_cast<double>(epochs) / seconds / promised;
}

}  // namespace verl::trainer
