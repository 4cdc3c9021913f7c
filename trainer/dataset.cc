#include "trainer/dataset.h"

#include <algorithm>
#include <optional>
#include <random>

#include "common/error.h"
#include "common/log.h"
#include "data/rows.h"
#include "trainer/rewards.h"

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

// The prompt's tokens, truncated as data.truncation says (verl's postprocess_data), or nullopt
// when data.filter_overlong_prompts drops it. `where` names the row for the error.
std::optional<std::vector<int64_t>> prompt_tokens(const Example& ex, const DataConfig& config,
                                                  const text::Tokenizer& tokenizer, const std::string& where) {
  auto ids = ex.from_chat_template ? tokenizer.encode(ex.prompt) : tokenizer.encode_prompt(ex.prompt);
  const auto max_len = static_cast<size_t>(config.max_prompt_length);
  if (ids.size() <= max_len) return ids;
  if (config.filter_overlong_prompts) return std::nullopt;
  if (config.truncation == "error") {
    throw Error{ExitCode::kInvalidConfig,
                where + ": the prompt has " + std::to_string(ids.size()) + " tokens, over data.max_prompt_length=" +
                    std::to_string(max_len) + ": \"" + ex.prompt.substr(0, 60) + "\"",
                "raise data.max_prompt_length, set data.filter_overlong_prompts=true to drop such rows, or "
                "data.truncation=left|right|middle"};
  }
  // A BOS the tokenizer put first stays first: the model never saw a prompt without one.
  const auto bos = tokenizer.bos_id();
  const size_t head = bos && ids[0] == *bos ? 1 : 0;
  const auto cut = static_cast<long>(ids.size() - max_len);  // tokens to drop
  if (config.truncation == "left") {  // keep the end, where the question is
    ids.erase(ids.begin() + static_cast<long>(head), ids.begin() + static_cast<long>(head) + cut);
  } else if (config.truncation == "middle") {  // keep max/2 from the start and the rest from the end
    const auto left = static_cast<long>(max_len / 2);
    ids.erase(ids.begin() + left, ids.begin() + left + cut);
  } else {
    ids.resize(max_len);
  }
  return ids;
}

PromptRow make_row(Example ex, std::vector<int64_t> prompt_ids, const DataConfig& config,
                   const text::Tokenizer& tokenizer) {
  PromptRow row;
  row.prompt_ids = std::move(prompt_ids);
  row.sft_ids = tokenizer.encode(ex.sft_target);
  if (static_cast<int64_t>(row.sft_ids.size()) >= config.max_response_length) {
    row.sft_ids.resize(static_cast<size_t>(config.max_response_length - 1));
  }
  row.sft_ids.push_back(tokenizer.eos_id());
  row.example = std::move(ex);
  return row;
}

// One row of a data file in verl's shape -> an Example; errors name the row.
Example example_of(const nlohmann::json& row, const std::string& where, const DataConfig& config,
                   const text::Tokenizer& tokenizer) {
  if (!row.contains(config.prompt_key) || row[config.prompt_key].is_null()) {
    throw Error{ExitCode::kInvalidConfig, where + ": row has no '" + config.prompt_key + "'",
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
  if (!row.contains("data_source") || !row["data_source"].is_string())
    throw Error{ExitCode::kInvalidConfig, where + ": row has no data_source",
                "verl picks each row's reward function by its data_source column (e.g. \"openai/gsm8k\")"};
  ex.data_source = row["data_source"].get<std::string>();
  rewards::check_data_source(ex.data_source, where);  // an unknown source fails here, not at step 37
  ex.ground_truth = row["reward_model"]["ground_truth"];
  ex.sft_target = sft_target_for(row, ex.data_source, ex.ground_truth);
  return ex;
}

}  // namespace

PromptDataset::PromptDataset(std::vector<Example> examples, const DataConfig& config,
                             const text::Tokenizer& tokenizer) {
  rows_.reserve(examples.size());
  size_t dropped = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    auto ids = prompt_tokens(examples[i], config, tokenizer, "prompt " + std::to_string(i));
    if (!ids) { ++dropped; continue; }
    rows_.push_back(make_row(std::move(examples[i]), std::move(*ids), config, tokenizer));
  }
  if (dropped) {
    log::Info() << "data: dropped " << dropped << " of " << examples.size() << " built-in prompts longer than "
                << "data.max_prompt_length=" << config.max_prompt_length << " (data.filter_overlong_prompts)";
  }
}

PromptDataset PromptDataset::from_files(const std::vector<std::string>& files, const DataConfig& config,
                                        const text::Tokenizer& tokenizer) {
  PromptDataset ds;
  for (const auto& file : files) {
    data::RowFile rows = data::RowFile::read(file);
    if (rows.size() == 0) {
      throw Error{ExitCode::kInvalidConfig, file + ": no rows", "a data file in verl's row shape, one row or more"};
    }
    size_t dropped = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string where = rows.location(i);
      Example ex = example_of(rows[i], where, config, tokenizer);
      auto ids = prompt_tokens(ex, config, tokenizer, where);
      if (!ids) { ++dropped; continue; }
      ds.rows_.push_back(make_row(std::move(ex), std::move(*ids), config, tokenizer));
      rows[i] = nullptr;  // the JSON is no longer needed
    }
    if (dropped) {
      log::Info() << "data: " << file << ": dropped " << dropped << " of " << rows.size()
                  << " rows whose prompt is longer than data.max_prompt_length=" << config.max_prompt_length
                  << " tokens (data.filter_overlong_prompts)";
    }
  }
  if (ds.rows_.empty()) {
    throw Error{ExitCode::kInvalidConfig,
                "no rows left in " + files.front() + (files.size() > 1 ? " and the other files" : "") +
                    ": every prompt is longer than data.max_prompt_length=" + std::to_string(config.max_prompt_length),
                "raise data.max_prompt_length or set data.filter_overlong_prompts=false with a data.truncation"};
  }
  return ds;
}

std::pair<PromptDataset, PromptDataset> load_datasets(const DataConfig& config,
                                                      const text::Tokenizer& tokenizer) {
  PromptDataset train, val;
  if (config.train_files) {
    train = PromptDataset::from_files(*config.train_files, config, tokenizer);
  }
  if (config.val_files) {
    val = PromptDataset::from_files(*config.val_files, config, tokenizer);
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
