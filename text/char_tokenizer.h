// CharTokenizer is the character-level tokenizer of the built-in tasks: one token per character
// of a fixed alphabet (digits, arithmetic operators, punctuation, ASCII letters, space, newline)
// plus PAD, BOS, EOS and UNK. It is tiny on purpose: a from-scratch model on a CPU learns the
// built-in tasks within minutes only with a vocabulary of ~100. Characters outside the
// alphabet encode to UNK (and decode to '?'), so any text can be fed, lossily.
#pragma once

#include "text/tokenizer.h"

namespace verl::text {

class CharTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kBos = 1;
  static constexpr int64_t kEos = 2;
  static constexpr int64_t kUnk = 3;

  CharTokenizer();

  int64_t vocab_size() const override { return static_cast<int64_t>(kSpecials + alphabet_.size()); }
  std::optional<int64_t> bos_id() const override { return kBos; }
  int64_t eos_id() const override { return kEos; }
  int64_t pad_id() const override { return kPad; }
  std::vector<int64_t> stop_ids() const override { return {kEos}; }

  // Characters only; BOS/EOS are added by the callers that want them.
  std::vector<int64_t> encode(const std::string& text) const override;
  // BOS + characters.
  std::vector<int64_t> encode_prompt(const std::string& text) const override;
  // Special tokens are dropped when skip_special_tokens, else shown as <pad>/<s>/</s>/<unk>;
  // UNK decodes to '?' when skipped.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override;

  // Our own chat template: one "role: content\n" line per message, then "assistant: " to open
  // the reply when add_generation_prompt.
  std::string apply_chat_template(const nlohmann::json& messages, bool add_generation_prompt) const override;

 private:
  static constexpr int64_t kSpecials = 4;
  std::string alphabet_;
  int64_t char_to_id_[256];
};

}  // namespace verl::text
