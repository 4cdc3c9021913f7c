// The built-in verifiable tasks, generated deterministically from data.seed, and the Example
// row that every data source (built-in or JSONL) becomes:
//   arithmetic  "12+34=" -> "46"            (data.builtin.digits per number, num_operands terms)
//   countdown   "3,7,25>46:" -> "3*7+25"     (reach the target with each number used once;
//                                            data_source "verlctl/countdown": the bare
//                                            expression, not TinyZero's <answer> tags)
// The held-out split is drawn first and the training split never repeats one of its prompts,
// so validation measures generalisation, not memorisation. Same config -> same examples on
// every platform (own RNG arithmetic, no std::uniform_*_distribution).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/job_config.h"

namespace verl::trainer {

struct Example {
  std::string prompt;           // the text the policy sees (chat template already applied)
  std::string data_source;      // picks the reward function (rewards.h)
  nlohmann::json ground_truth;  // verl's reward_model.ground_truth
  std::string sft_target;       // the response the supervised warm start teaches
  // The prompt came as a chat list and `prompt` is the template's rendering, which carries its
  // own special tokens (verl encodes it with add_special_tokens=False); a plain-text prompt is
  // encoded with the tokenizer's BOS, as HF's encode(text) does.
  bool from_chat_template = false;
};

struct TaskSplit {
  std::vector<Example> train;
  std::vector<Example> val;
};

// Throws verl::Error (invalid config) for an unknown task or a problem space too small for
// train_size + val_size distinct prompts.
TaskSplit generate_builtin_task(const BuiltinDataConfig& config, int64_t seed);

}  // namespace verl::trainer
