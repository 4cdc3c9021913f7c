// bench_hf_forward: the C++ side of bench/hf_parity.py. Loads a Hugging Face model directory with
// trainer/hf_model.h, runs one batch of token ids through it, and writes what the script compares
// against transformers:
//   --logits FILE   the full logits [B,T,V] (float32) of the batch, as a safetensors file
//                   (tensor "logits"; our writer)
//   --tokens FILE   JSON {"tokens": [[...], ...]}: --new-tokens greedy tokens per row, decoded with
//                   the model's KV cache (a minimal loop over CausalLm::forward, not the rollout
//                   engine); no EOS stop, as generate(do_sample=False) with eos disabled
//   --export DIR    the model saved back with save_hf (in --dtype), for from_pretrained to load
// The batch (--ids FILE) is JSON {"input_ids": [[...]], "attention_mask": [[...]]} (the mask is
// optional: all ones); rows are left-padded, positions count real tokens, as verl's rollout does.
// --random-init SEED builds the model of DIR/config.json from a seed instead of loading weights
// (the CPU self-test of this driver, where no HF checkpoint exists).
// Exit codes: verl's table (3: invalid model directory or arguments).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/error.h"
#include "trainer/hf_model.h"
#include "trainer/model.h"
#include "trainer/safetensors.h"

namespace {

using nlohmann::json;
using verl::Error;
using verl::ExitCode;
namespace vt = verl::trainer;

struct Args {
  std::string model, ids, logits, tokens, export_dir;
  std::string dtype = "float32";
  std::string device = "auto";
  int64_t new_tokens = 32;
  int64_t random_init = -1;
};

constexpr const char* kUsage =
    "usage: bench_hf_forward --model DIR --ids FILE.json [--dtype float32|bfloat16] [--device auto|cpu|cuda[:N]]\n"
    "                        [--logits OUT.safetensors] [--tokens OUT.json] [--new-tokens N] [--export DIR]\n"
    "                        [--random-init SEED]\n";

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) throw Error{ExitCode::kUsage, "option " + k + " needs a value", kUsage};
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--ids") a.ids = v;
    else if (k == "--logits") a.logits = v;
    else if (k == "--tokens") a.tokens = v;
    else if (k == "--export") a.export_dir = v;
    else if (k == "--dtype") a.dtype = v;
    else if (k == "--device") a.device = v;
    else if (k == "--new-tokens") a.new_tokens = std::stoll(v);
    else if (k == "--random-init") a.random_init = std::stoll(v);
    else throw Error{ExitCode::kUsage, "unknown option " + k, kUsage};
  }
  if (a.model.empty() || a.ids.empty()) throw Error{ExitCode::kUsage, "--model and --ids are required", kUsage};
  if (a.dtype != "float32" && a.dtype != "bfloat16") {
    throw Error{ExitCode::kUsage, "--dtype is '" + a.dtype + "'", "float32 or bfloat16"};
  }
  return a;
}

// [B,T] long tensors from {"input_ids": [[...]], "attention_mask": [[...]]}.
std::pair<torch::Tensor, torch::Tensor> read_batch(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error{ExitCode::kInvalidConfig, "cannot read " + path, ""};
  const json j = json::parse(in);
  const auto to_tensor = [&](const json& rows, const char* key) {
    if (!rows.is_array() || rows.empty()) throw Error{ExitCode::kInvalidConfig, path + ": " + key + " is not a list of rows", ""};
    const int64_t b = static_cast<int64_t>(rows.size()), t = static_cast<int64_t>(rows[0].size());
    auto out = torch::empty({b, t}, torch::kLong);
    for (int64_t r = 0; r < b; ++r) {
      if (static_cast<int64_t>(rows[r].size()) != t) {
        throw Error{ExitCode::kInvalidConfig, path + ": " + key + " rows differ in length (left-pad them)", ""};
      }
      for (int64_t c = 0; c < t; ++c) out[r][c] = rows[r][c].get<int64_t>();
    }
    return out;
  };
  auto ids = to_tensor(j.at("input_ids"), "input_ids");
  auto mask = j.contains("attention_mask") ? to_tensor(j["attention_mask"], "attention_mask") : torch::ones_like(ids);
  return {ids, mask};
}

// Greedy decoding with the KV cache: one prefill over the prompt, then one token per step.
torch::Tensor greedy(vt::CausalLm& model, torch::Tensor ids, torch::Tensor mask, int64_t steps) {
  torch::NoGradGuard no_grad;
  vt::KvCache cache;
  auto logits = model->forward(ids, mask, vt::position_ids_from_mask(mask), &cache);
  auto next = logits.select(1, logits.size(1) - 1).argmax(-1);  // [B]
  std::vector<torch::Tensor> out{next};
  auto pos = mask.sum(1, /*keepdim=*/true);  // the next token's position = real tokens so far
  for (int64_t s = 1; s < steps; ++s) {
    mask = torch::cat({mask, torch::ones({mask.size(0), 1}, mask.options())}, 1);
    logits = model->forward(next.unsqueeze(1), mask, pos, &cache);
    next = logits.select(1, 0).argmax(-1);
    out.push_back(next);
    pos = pos + 1;
  }
  return torch::stack(out, 1);  // [B, steps]
}

int run(const Args& a) {
  const auto device = vt::parse_device(a.device, "--device");
  const auto dtype = a.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  const auto start = std::chrono::steady_clock::now();
  vt::CausalLm model{nullptr};
  if (a.random_init >= 0) {
    auto config = vt::read_hf_config(a.model);
    config.compute_dtype = dtype;
    model = vt::make_causal_lm(config, static_cast<uint64_t>(a.random_init), device, dtype);
  } else {
    model = vt::load_causal_lm(a.model, device, dtype);
  }
  model->eval();
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  auto [ids, mask] = read_batch(a.ids);
  ids = ids.to(device);
  mask = mask.to(device);
  if (!a.logits.empty()) {
    torch::NoGradGuard no_grad;
    auto logits = model->forward(ids, mask, vt::position_ids_from_mask(mask)).to(torch::kFloat32).cpu();
    vt::safetensors::write_file(a.logits, {{"logits", logits}});
  }
  if (!a.tokens.empty()) {
    auto tokens = greedy(model, ids, mask, a.new_tokens).cpu();
    json rows = json::array();
    for (int64_t r = 0; r < tokens.size(0); ++r) {
      json row = json::array();
      for (int64_t c = 0; c < tokens.size(1); ++c) row.push_back(tokens[r][c].item<int64_t>());
      rows.push_back(row);
    }
    std::ofstream(a.tokens) << json{{"tokens", rows}}.dump() << "\n";
  }
  if (!a.export_dir.empty()) {
    vt::SaveHfOptions o;
    o.dtype = dtype;
    vt::save_hf(model, a.export_dir, a.model, o);
  }
  std::cout << json{{"model", a.model}, {"device", device.str()}, {"dtype", a.dtype}, {"load_s", load_s},
                    {"parameters", vt::count_parameters(*model)}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const Error& e) {
    std::cerr << "bench_hf_forward: error: " << e.what() << "\n";
    if (!e.hint().empty()) std::cerr << "hint: " << e.hint() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "bench_hf_forward: error: " << e.what() << "\n";
    return 1;
  }
}
