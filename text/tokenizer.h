// Tokenizer is what the trainer, the dataset and `verlctl tokenize` see of a tokenizer: ids in,
// text out, the special ids, and the chat template. Two implementations: the built-in
// character tokenizer of the embedded tasks (text/char_tokenizer.h) and Hugging Face's
// tokenizer.json + tokenizer_config.json pipeline (text/hf_tokenizer.h).
//
// No torch here: `verlctl tokenize` links this library without loading the trainer module.
// Implementations are immutable after construction; every method is const and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Rows an embedding needs: the largest id this tokenizer can produce, plus one.
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
  // The pad id (tokenizer_config's pad_token, else eos: what verl does for pad-less models).
  virtual int64_t pad_id() const = 0;
  // Tokens that end a response: eos, plus any other the model's files name (e.g. Qwen's
  // <|im_end|> and <|endoftext|>, Llama 3's <|eot_id|>). Never empty.
  virtual std::vector<int64_t> stop_ids() const = 0;

  // The text's ids without any added BOS/EOS: HF's encode(text, add_special_tokens=False).
  // Special-token text written in `text` (e.g. "<|im_start|>") is matched as that token.
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  // A plain-text prompt's ids as HF's encode(text, add_special_tokens=True) starts them: BOS
  // first when the tokenizer adds one (the built-in tokenizer, Llama 3, Gemma; not Qwen), no EOS.
  virtual std::vector<int64_t> encode_prompt(const std::string& text) const = 0;
  // HF's decode(ids, skip_special_tokens).
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const = 0;

  // Renders a chat list [{"role": ..., "content": ...}, ...] to prompt text (HF's
  // apply_chat_template(messages, tokenize=False, add_generation_prompt)). A plain JSON
  // string is returned as is. Throws verl::Error (invalid config) for a malformed list.
  virtual std::string apply_chat_template(const nlohmann::json& messages,
                                          bool add_generation_prompt) const = 0;
};

}  // namespace verl::text
