// PromptDataset holds tokenized prompts with their reward metadata, from the built-in task or
// from data files (parquet, JSON lines or a JSON array: data/rows.h) in verl's row shape:
//   {"prompt": "..." | [{"role": "user", "content": "..."}], "data_source": "openai/gsm8k",
//    "reward_model": {"style": "rule", "ground_truth": "42"}, "extra_info": {"answer": "..."}}
// (the prompt key is data.prompt_key; extra_info.answer, when present, is the SFT target).
// Every error names the row (file:line, file: row N). A prompt over data.max_prompt_length is
// dropped (data.filter_overlong_prompts, one log line per file says how many) or truncated as
// data.truncation says (error | left | right | middle, verl's values).
// DataSampler walks a dataset in epochs of shuffled (seeded) order; its state (epoch, cursor) is
// what a checkpoint saves to resume exactly.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainer/job_config.h"
#include "trainer/tasks.h"
#include "text/tokenizer.h"

namespace verl::trainer {

struct PromptRow {
  Example example;
  std::vector<int64_t> prompt_ids;  // the prompt's tokens, at most max_prompt_length
  std::vector<int64_t> sft_ids;     // sft_target's tokens + EOS
};

class PromptDataset {
 public:
  PromptDataset() = default;
  PromptDataset(std::vector<Example> examples, const DataConfig& config,
                const text::Tokenizer& tokenizer);
  static PromptDataset from_files(const std::vector<std::string>& files, const DataConfig& config,
                                  const text::Tokenizer& tokenizer);

  size_t size() const { return rows_.size(); }
  const PromptRow& operator[](size_t i) const { return rows_[i]; }

 private:
  std::vector<PromptRow> rows_;
};

// Train and validation sets as data.* asks: data files when given, else the built-in task
// (which provides both splits; a val_files list overrides its held-out split).
std::pair<PromptDataset, PromptDataset> load_datasets(const DataConfig& config,
                                                      const text::Tokenizer& tokenizer);

struct SamplerState {
  int64_t epoch = 0;
  int64_t cursor = 0;  // batches already taken in this epoch
};

class DataSampler {
 public:
  // Drops the last incomplete batch of an epoch (verl's drop_last=True).
  DataSampler(int64_t dataset_size, int64_t batch_size, bool shuffle, int64_t seed);

  // The next batch of dataset indices; rolls over into the next epoch.
  std::vector<int64_t> next_batch();
  int64_t batches_per_epoch() const { return dataset_size_ / batch_size_; }
  const SamplerState& state() const { return state_; }
  void set_state(const SamplerState& state);

 private:
  void build_order();
  int64_t dataset_size_, batch_size_;
  bool shuffle_;
  int64_t seed_;
  SamplerState state_;
  std::vector<int64_t> order_;
};

}  // namespace verl::trainer
