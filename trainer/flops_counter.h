// verl's FlopsCounter (verl/utils/flops_counter.py), the figure behind perf/mfu/actor and
// perf/mfu/critic: the forward + backward FLOPs of a Qwen2/Llama-family decoder over a batch of
// sequences (verl's _estimate_qwen2_flops, which verl also uses for llama, qwen3 and mistral),
// and the device's promised FLOP/s from verl's table of device names.
//   dense:     6 * tokens * (layers * (3 * hidden * intermediate
//                                      + hidden * (q + k + v + o widths)) + 2 * vocab * hidden)
//   attention: 6 * sum(seqlen^2) * head_dim * heads * layers
// Like verl, the embedding and the LM head are both counted (even when tied) and the critic is
// counted as its backbone with an LM head. MFU = flops * ppo_epochs / seconds / promised, per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/model.h"

namespace verl::trainer {

// Forward + backward FLOPs of one pass over sequences of these real lengths (prompt + response).
double estimate_flops(const ModelConfig& config, const std::vector<int64_t>& seqlens);

// verl's _DEVICE_FLOPS for a device name ("NVIDIA H200" -> 989e12; "CPU" -> 448e9); the longest
// table key found in the name wins. 0 for a name the table lacks (verl reports inf, so MFU 0).
double promised_flops_for_name(const std::string& device_name);

// The promised FLOP/s of this device (its CUDA name, or "CPU").
double promised_flops(const torch::Device& device);

// perf/mfu/*: estimate_flops over the batch's sequence lengths (attention_mask row sums),
// times epochs, over seconds and the device's promised FLOP/s. 0 when either is unknown.
double model_flops_utilization(const ModelConfig& config, const torch::Tensor& attention_mask, int64_t epochs,
                               double seconds, const torch::Device& device);

}  // namespace verl::trainer
