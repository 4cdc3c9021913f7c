// bench_trainer: runs the embedded PPO trainer (PpoTrainer::fit, one rank, CPU unless told
// otherwise) for the job given as dotted overrides, and prints one JSON line on stdout:
//   {"steps": N, "timed_steps": N-1, "seconds": s, "steps_per_s": x, "tokens_per_s": y,
//    "vocab_size": V, "prompt_length_mean": p, "response_length_mean": r, "threads": t}
// Step 1 is warm-up (allocator, first-touch) and left out of the rates, as in the peer.
// Timing is the trainer's own timing_s/step (generate + log-probs + values + advantages +
// critic and actor updates); tokens are perf/total_num_tokens (prompt + response tokens).
// Usage: bench_trainer [--threads T] [key=value ...]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "trainer/ppo_trainer.h"
#include "text/tokenizer.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace verl;
  int threads = 2;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      overrides.push_back(a);
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("verl_bench_trainer_" + std::to_string(::getpid()));
  // What the benchmark measures is the RL step: no validation, SFT, checkpoints or console.
  for (const std::string& o :
       {std::string("trainer.val_before_train=false"), std::string("trainer.test_freq=-1"),
        std::string("trainer.save_freq=-1"), std::string("trainer.sft_warmup_steps=0"),
        std::string("trainer.resume_mode=disable"), std::string("trainer.logger=[file]"),
        "trainer.default_local_dir=" + dir.string()}) {
    overrides.insert(overrides.begin(), o);  // the user's overrides come later and win
  }
  try {
    log::set_level(log::Level::kWarn);
    at::set_num_threads(threads);
    at::set_num_interop_threads(1);
    const auto job = trainer::JobConfig::from_json(
        nlohmann::json::parse(config::load_job("", overrides).dump()));
    trainer::PpoTrainer t(job, nullptr);
    const auto res = t.fit();
    std::ifstream in(dir / "metrics.jsonl");
    std::string line;
    double seconds = 0, tokens = 0, plen = 0, rlen = 0;
    int64_t timed = 0, steps = 0;
    nlohmann::json phases = nlohmann::json::object();
    while (std::getline(in, line)) {
      const auto js = nlohmann::json::parse(line);
      if (js.value("step", 0) < 1) continue;
      ++steps;
      plen += js.value("prompt_length/mean", 0.0);
      rlen += js.value("response_length/mean", 0.0);
      if (js.value("step", 0) == 1) continue;
      ++timed;
      seconds += js.value("timing_s/step", 0.0);
      for (const auto& [k, v] : js.items()) {
        if (k.rfind("timing_s/", 0) == 0 && k != "timing_s/step" && v.is_number()) {
          const std::string name = k.substr(9);
          phases[name] = phases.value(name, 0.0) + v.get<double>();
        }
      }
      tokens += js.value("perf/total_num_tokens", 0.0);
    }
    fs::remove_all(dir);
    if (timed == 0) throw Error{ExitCode::kFailure, "bench_trainer: need at least 2 steps"};
    for (auto& [k, v] : phases.items()) v = v.get<double>() / static_cast<double>(timed);
    nlohmann::json out = {{"steps", res.steps},
                          {"timed_steps", timed},
                          {"seconds", seconds},
                          {"steps_per_s", timed / seconds},
                          {"tokens_per_s", tokens / seconds},
                          {"vocab_size", t.tokenizer().vocab_size()},
                          {"prompt_length_mean", plen / steps},
                          {"response_length_mean", rlen / steps},
                          {"threads", threads},
                          {"timing_s", phases}};
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_trainer: error: %s\nhint: %s\n", e.what(), e.hint().c_str());
    fs::remove_all(dir);
    return static_cast<int>(e.code());
  }
}
