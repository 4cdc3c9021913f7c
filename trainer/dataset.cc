#include "trainer/dataset.h"

#include <algorithm>
#include <fstream>
#include <random>

#include "common/error.h"

namespace verl::trainer {
namespace {

std::string sft_target_for(const nlohmann::json& row, const std::string& data_source,
                           const nlohmann::json& gt) {
  if (row.contains("extra_info") && row["extra_info"].is_object() &&
      row["extra_info"].contains("answer") && row["extra_info"]["answer"].is_string()) {
    return row["extra_info"]["answer"].get<std::string>();
  }
  const std::string g = gt.is_string() ? gt.get<std::string>() : gt.dump();
  if (data_source == "openai/gsm8k" || data_source == "gsm8k") return "#### " + g;
  return g;
}

}  // namespace

PromptDataset::PromptDataset(std::vector<Example> examples, const DataConfig& config,
                             const text::Tokenizer& tokenizer) {
  rows_.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    PromptRow row;
    row.prompt_ids = examples[i].from_chat_template ? tokenizer.encode(examples[i].prompt)
                                                    : tokenizer.encode_prompt(examples[i].prompt);
    const auto bos = tokenizer.bos_id();
    const long keep_head = bos && !row.prompt_ids.empty() && row.prompt_ids[0] == *bos ? 1 : 0;
    const auto max_len = static_cast<size_t>(config.max_prompt_length);
    if (row.prompt_ids.size() > max_len) {
      if (config.truncation == "error") {
        throw Error{ExitCode::kInvalidConfig,
                    "prompt " + std::to_string(i) + " has " +
                        std::to_string(row.prompt_ids.size()) + " tokens, over data.max_prompt_length=" +
                        std::to_string(max_len) + ": \"" + examples[i].prompt.substr(0, 60) + "\"",
                    "raise data.max_prompt_length or set data.truncation=left|right"};
      }
      if (config.truncation == "left") {  // keep the end, where the question is
        row.prompt_ids.erase(row.prompt_ids.begin() + keep_head,
                             row.prompt_ids.begin() + keep_head + static_cast<long>(row.prompt_ids.size() - max_len));
      } else {
        row.prompt_ids.resize(max_len);
      }
    }
    row.sft_ids = tokenizer.encode(examples[i].sft_target);
    if (static_cast<int64_t>(row.sft_ids.size()) >= config.max_response_length) {
      row.sft_ids.resize(static_cast<size_t>(config.max_response_length - 1));
    }
    row.sft_ids.push_back(tokenizer.eos_id());
    row.example = std::move(examples[i]);
    rows_.push_back(std::move(row));
  }
}

PromptDataset PromptDataset::from_jsonl(const std::vector<std::string>& files,
                                        const DataConfig& config, const text::Tokenizer& tokenizer) {
  std::vector<Example> examples;
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) {
      throw Error{ExitCode::kInvalidConfig, "cannot open data file " + file,
                  "check data.train_files / data.val_files (JSONL, one row per line)"};
    }
    std::string line;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = file + ":" + std::to_string(lineno);
      nlohmann::json row;
      try {
        row = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw Error{ExitCode::kInvalidConfig, where + ": not valid JSON: " + e.what(),
                    "each line must be one JSON object"};
      }
      if (!row.is_object() || !row.contains(config.prompt_key)) {
        throw Error{ExitCode::kInvalidConfig,
                    where + ": row has no '" + config.prompt_key + "' key",
                    "set data.prompt_key to the prompt's key"};
      }
      if (!row.contains("reward_model") || !row["reward_model"].is_object() ||
          !row["reward_model"].contains("ground_truth")) {
        throw Error{ExitCode::kInvalidConfig, where + ": row has no reward_model.ground_truth",
                    "verl's row shape: {\"reward_model\": {\"ground_truth\": ...}}"};
      }
      Example ex;
      try {
        const auto& p = row[config.prompt_key];
        ex.from_chat_template = p.is_array();
        ex.prompt = tokenizer.apply_chat_template(p, /*add_generation_prompt=*/true);
      } catch (const Error& e) {
        throw Error{ExitCode::kInvalidConfig, where + ": " + e.what(), e.hint()};
      }
      ex.data_source = row.contains("data_source") && row["data_source"].is_string()
                           ? row["data_source"].get<std::string>()
                           : "unknown";
      ex.ground_truth = row["reward_model"]["ground_truth"];
      ex.sft_target = sft_target_for(row, ex.data_source, ex.ground_truth);
      examples.push_back(std::move(ex));
    }
    if (examples.empty()) {
      throw Error{ExitCode::kInvalidConfig, file + ": no rows", "a JSONL file with one row per line"};
    }
  }
  try {
    return PromptDataset(std::move(examples), config, tokenizer);
  } catch (const Error& e) {
    throw Error{e.code(), std::string("in ") + files.front() + ": " + e.what(), e.hint()};
  }
}

std::pair<PromptDataset, PromptDataset> load_datasets(const DataConfig& config,
                                                      const text::Tokenizer& tokenizer) {
  PromptDataset train, val;
  if (config.train_files) {
    train = PromptDataset::from_jsonl(*config.train_files, config, tokenizer);
  }
  if (config.val_files) {
    val = PromptDataset::from_jsonl(*config.val_files, config, tokenizer);
  }
  if (!config.train_files || !config.val_files) {
    auto split = generate_builtin_task(config.builtin, config.seed);
    if (!config.train_files) train = PromptDataset(std::move(split.train), config, tokenizer);
    if (!config.val_files) val = PromptDataset(std::move(split.val), config, tokenizer);
  }
  return {std::move(train), std::move(val)};
}

DataSampler::DataSampler(int64_t dataset_size, int64_t batch_size, bool shuffle, int64_t seed)
    : dataset_size_(dataset_size), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  if (batch_size_ <= 0 || dataset_size_ < batch_size_) {
    throw Error{ExitCode::kInvalidConfig,
                "the training set has " + std::to_string(dataset_size_) +
                    " prompts, fewer than data.train_batch_size=" + std::to_string(batch_size_),
                "lower data.train_batch_size or add data"};
  }
  build_order();
}

void DataSampler::build_order() {
  order_.resize(static_cast<size_t>(dataset_size_));
  for (int64_t i = 0; i < dataset_size_; ++i) order_[static_cast<size_t>(i)] = i;
  if (shuffle_) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed_) * 1000003ULL + static_cast<uint64_t>(state_.epoch));
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);
  }
}

std::vector<int64_t> DataSampler::next_batch() {
  if (state_.cursor >= batches_per_epoch()) {
    ++state_.epoch;
    state_.cursor = 0;
    build_order();
  }
  const auto begin = order_.begin() + state_.cursor * batch_size_;
  ++state_.cursor;
  return std::vector<int64_t>(begin, begin + batch_size_);
}

void DataSampler::set_state(const SamplerState& state) {
  state_ = state;
  build_order();
}

}  // namespace verl::trainer
