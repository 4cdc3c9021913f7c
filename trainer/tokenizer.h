// Tokenizer is the character-level tokenizer of the built-in tasks: one token per character of
// a fixed alphabet (digits, arithmetic operators, punctuation, ASCII letters, space, newline)
// plus PAD, BOS, EOS and UNK. It is tiny on purpose: a from-scratch model on a CPU learns the
// built-in tasks within minutes only with a vocabulary of ~100. Characters outside the
// alphabet encode to UNK (and decode to '?'), so any JSONL text can be fed, lossily.
// Immutable after construction; all methods are const and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::trainer {

class Tokenizer {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kBos = 1;
  static constexpr int64_t kEos = 2;
  static constexpr int64_t kUnk = 3;

  Tokenizer();

  int64_t vocab_size() const { return static_cast<int64_t>(kSpecials + alphabet_.size()); }
  int64_t pad_id() const { return kPad; }
  int64_t bos_id() const { return kBos; }
  int64_t eos_id() const { return kEos; }

  // Characters only; BOS/EOS are added by the callers that want them.
  std::vector<int64_t> encode(const std::string& text) const;
  // Stops at nothing; special tokens are dropped when skip_special is true, else shown as
  // <pad>/<s>/</s>/<unk>.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = true) const;

  // verl's prompts may be chat lists [{role, content}]; this is our chat template: one
  // "role: content\n" line per message, then "assistant: " to open the reply. A plain string
  // is returned as is.
  static std::string apply_chat_template(const nlohmann::json& prompt);

 private:
  static constexpr int64_t kSpecials = 4;
  std::string alphabet_;
  int64_t char_to_id_[256];
};

}  // namespace verl::trainer
