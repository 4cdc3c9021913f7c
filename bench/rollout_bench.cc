// bench_rollout: rollout throughput of verlctl's engines on a model of config.json's shape
// (random weights from a seed: throughput with ignore_eos does not depend on the weights), the
// C++ side of bench/gpu_vs_hf.sh (the peer is bench/hf_generate.py, transformers' generate).
//   bench_rollout --config DIR/config.json [--engine slot|native] [--prompts 64] [--n 4]
//                 [--prompt-len 128] [--new-tokens 256] [--device cuda] [--dtype bfloat16]
//                 [--eager] [--max-num-seqs 256] [--runs 3] [--breakdown] [--kv-blocks N] [--unfused]
// Prompts are random token ids (seeded); sampling at temperature 1 over the full vocabulary;
// every response runs to --new-tokens (ignore_eos). Run 1 includes the engine's set-up (CUDA
// graph capture); runs 2.. are timed as the steady state and their median is reported. Prints
// one JSON line. --breakdown adds the time of the decode step's two vocabulary-wide parts alone
// at the slot count (the LM head matmul; the sampling chain: temperature, softmax, cumsum, the
// inverse-CDF pick), each the mean of 50 synchronised repetitions.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/error.h"
#include "trainer/hf_model.h"
#include "trainer/native_rollout.h"
#include "trainer/slot_rollout.h"

namespace {

namespace vt = verl::trainer;
using nlohmann::json;

struct Args {
  std::string config, engine = "slot", device = "cuda", dtype = "bfloat16";
  int64_t prompts = 64, n = 4, prompt_len = 128, new_tokens = 256, max_num_seqs = 256, runs = 3, kv_blocks = 0;
  bool eager = false, breakdown = false, unfused = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto v = [&]() -> std::string {
      if (i + 1 >= argc) throw verl::Error{verl::ExitCode::kInvalidConfig, k + " needs a value", ""};
      return argv[++i];
    };
    if (k == "--config") a.config = v();
    else if (k == "--engine") a.engine = v();
    else if (k == "--device") a.device = v();
    else if (k == "--dtype") a.dtype = v();
    else if (k == "--prompts") a.prompts = std::stoll(v());
    else if (k == "--n") a.n = std::stoll(v());
    else if (k == "--prompt-len") a.prompt_len = std::stoll(v());
    else if (k == "--new-tokens") a.new_tokens = std::stoll(v());
    else if (k == "--max-num-seqs") a.max_num_seqs = std::stoll(v());
    else if (k == "--runs") a.runs = std::stoll(v());
    else if (k == "--kv-blocks") a.kv_blocks = std::stoll(v());
    else if (k == "--eager") a.eager = true;
    else if (k == "--breakdown") a.breakdown = true;
    else if (k == "--unfused") a.unfused = true;
    else throw verl::Error{verl::ExitCode::kInvalidConfig, "unknown argument " + k, "see the comment at the top of bench/rollout_bench.cc"};
  }
  if (a.config.empty()) throw verl::Error{verl::ExitCode::kInvalidConfig, "--config is required", ""};
  return a;
}

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  const torch::Device device = vt::parse_device(a.device, "--device");
  const auto dtype = a.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  const auto dir = a.config.substr(0, a.config.rfind('/'));
  auto config = vt::read_hf_config(dir.empty() ? "." : dir);
  config.compute_dtype = dtype;
  auto policy = vt::make_causal_lm(config, 1, device, dtype);
  vt::NamedTensors weights;
  for (const auto& p : policy->named_parameters()) weights.emplace_back(p.key(), p.value());

  std::unique_ptr<vt::RolloutEngine> engine;
  vt::SlotRollout* slot = nullptr;
  if (a.engine == "slot") {
    vt::SlotRolloutOptions o;
    o.max_num_seqs = a.max_num_seqs;
    o.enforce_eager = a.eager;
    o.free_cache_engine = false;  // steady state: the cache and graphs stay between runs
    o.gpu_memory_utilization = 0.9;
    o.kv_blocks_override = a.kv_blocks;
    o.fused_decode = !a.unfused;
    auto s = std::make_unique<vt::SlotRollout>(config, device, o);
    slot = s.get();
    engine = std::move(s);
  } else {
    engine = std::make_unique<vt::NativeRollout>(config, device);
  }
  engine->load_weights(weights);

  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const int64_t vocab = std::min<int64_t>(config.vocab_size, 151643);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<uint64_t> seeds;
  for (int64_t i = 0; i < a.prompts; ++i) {
    auto t = torch::randint(1, vocab, {a.prompt_len}, gen, torch::kLong);
    std::vector<int64_t> p(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + a.prompt_len);
    for (int64_t j = 0; j < a.n; ++j) {
      prompts.push_back(p);
      seeds.push_back(vt::row_seed(7, 0, static_cast<uint64_t>(i * a.n + j)));
    }
  }
  vt::GenerateOptions opt;
  opt.sampling.do_sample = true;
  opt.sampling.temperature = 1.0;
  opt.max_response_length = a.new_tokens;
  opt.ignore_eos = true;

  std::vector<double> times;
  json runs = json::array();
  int64_t tokens = 0;
  for (int64_t r = 0; r < a.runs; ++r) {
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    auto out = engine->generate(prompts, opt, seeds);
    sync(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tokens = 0;
    for (auto len : out.response_lengths) tokens += len;
    json run = {{"s", s}, {"tokens_per_s", static_cast<double>(tokens) / s}};
    if (slot) {
      const auto& st = slot->last_stats();
      run["slots"] = st.slots;
      run["graph_captures"] = st.graph_captures;
      run["capture_s"] = st.capture_s;
      run["decode_steps"] = st.decode_steps;
      run["host_checks"] = st.host_checks;
      run["prefill_tokens"] = st.prefill_tokens;
      run["kv_cache_gb"] = st.kv_cache_gb;
      run["kv_blocks"] = st.kv_blocks;
      run["peak_kv_blocks"] = st.peak_kv_blocks;
      run["shared_kv_blocks"] = st.shared_kv_blocks;
      run["preemptions"] = st.preemptions;
    }
    runs.push_back(run);
    if (r > 0 || a.runs == 1) times.push_back(s);
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  json line = {{"engine", a.engine + (a.eager ? "-eager" : "") + (a.unfused ? "-unfused" : "") + (a.kv_blocks > 0 ? "-blocks" + std::to_string(a.kv_blocks) : "")},
               {"sequences", static_cast<int64_t>(prompts.size())},
               {"prompt_len", a.prompt_len},
               {"new_tokens", a.new_tokens},
               {"tokens", tokens},
               {"median_s", med},
               {"tokens_per_s", static_cast<double>(tokens) / med},
               {"runs", runs}};
  if (device.is_cuda()) line["note"] = "steady state: median of runs 2..N";
  if (a.breakdown) {
    torch::NoGradGuard no_grad;
    const int64_t b = std::min<int64_t>(a.max_num_seqs, static_cast<int64_t>(prompts.size()));
    auto opts = torch::TensorOptions().device(device);
    auto hidden = torch::randn({b, config.hidden_size}, opts.dtype(dtype));
    auto w = policy->output_embedding().to(dtype);
    auto u = torch::rand({b, 1}, opts.dtype(torch::kFloat32));
    auto time_ms = [&](const std::function<void()>& f) {
      f();
      sync(device);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) f();
      sync(device);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 50;
    };
    torch::Tensor logits;
    line["lm_head_ms"] = time_ms([&] { logits = torch::linear(hidden, w).to(torch::kFloat32); });
    line["sampling_ms"] = time_ms([&] {
      auto cdf = (logits / 1.0).softmax(-1).cumsum(-1);
      (void)(cdf < u * cdf.narrow(1, cdf.size(1) - 1, 1)).sum(-1);
    });
    line["step_ms"] = 1000.0 * med / static_cast<double>(a.new_tokens);
  }
  std::cout << line.dump() << std::endl;
  return 0;
} catch (const verl::Error& e) {
  std::cerr << "bench_rollout: " << e.what() << "\n";
  return static_cast<int>(e.code());
} catch (const std::exception& e) {
  std::cerr << "bench_rollout: " << e.what() << "\n";
  return 1;
}
