// BpeModel is the "model" stage of a tokenizer.json whose model.type is "BPE": the vocabulary,
// the merges by rank, and HF's rules for a pre-token (a word) to ids — byte_fallback to
// <0xNN> tokens, unk_token with fuse_unk, ignore_merges (a word found whole in the vocabulary
// is one token), continuing_subword_prefix and end_of_word_suffix. dropout is ignored (it is
// a training-time option; encoding here is deterministic).
//
// Immutable after construction but for a bounded cache of word -> ids, guarded by a
// shared_mutex: tokenize is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::text::hf {

// The model's vocabulary and merges, apart from the JSON tree: a 33 MB tokenizer.json parses
// three times faster when they never become tree nodes.
struct BpeTables {
  std::vector<std::pair<std::string, uint32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
};

// From a parsed "model" object (`path` its JSON path for messages).
BpeTables bpe_tables_from_json(const nlohmann::json& model, const std::string& path);
// Parses tokenizer.json text, moving model.vocab and model.merges into `tables` as they are
// read; in the tree they are left empty. Throws nlohmann's parse errors, and verl::Error for an
// entry that is not an id or a merge.
nlohmann::json parse_tokenizer_json(const std::string& text, BpeTables& tables);

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object for the options, `tables` its vocabulary and
  // merges; `path` its JSON path for messages.
  BpeModel(const nlohmann::json& model, BpeTables tables, const std::string& path);

  // Appends the ids of one pre-token.
  void tokenize(const std::string& word, std::vector<int64_t>& out) const;

  std::optional<int64_t> token_to_id(const std::string& token) const;
  // nullptr when the vocabulary has no such id.
  const std::string* id_to_token(int64_t id) const;
  int64_t max_id() const { return static_cast<int64_t>(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  void merge_word(const std::string& word, std::vector<int64_t>& out) const;

  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, merged id
  std::optional<uint32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  uint32_t byte_ids_[256];  // <0xNN> ids when byte_fallback (UINT32_MAX when absent)

  static constexpr size_t kCacheCapacity = 100000;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace verl::text::hf
