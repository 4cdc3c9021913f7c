// HfTokenizer is a Hugging Face tokenizer read from a model directory: tokenizer.json's
// pipeline (added tokens, normalizer, pre-tokenizer, BPE model, decoder) and
// tokenizer_config.json's special tokens and chat template, plus generation_config.json's
// eos_token_id for the stop ids when the file is there.
//
// encode is HF's encode(text, add_special_tokens=False): added tokens (special or not) written
// in the text are matched first, longest match leftmost, on the raw text for normalized=false
// tokens and on the normalized text for the others; the rest goes through normalizer,
// pre-tokenizer and model. The post_processor (BOS/EOS templates) is never applied.
// decode is HF's decode(ids, skip_special_tokens): unknown ids are dropped, special added
// tokens are dropped when asked, then the decoder chain (the ByteLevel decoder gives added
// tokens through as their text) and, when tokenizer_config.json says
// clean_up_tokenization_spaces (default false), HF's clean-up of " ." " ," " 's" etc.
//
// Supported: model BPE; normalizers NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip,
// Sequence; pre-tokenizers Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit,
// Sequence; decoders ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence. Anything
// else is an error naming the file and JSON path (exit 3). Invalid UTF-8 in the input text is
// read with U+FFFD for each bad sequence.
//
// Immutable after construction (the BPE word cache has its own lock): thread-safe.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace verl::text {

namespace hf {
class BpeModel;
struct BpeTables;
class Normalizer;
class PreTokenizer;
class Decoder;
}  // namespace hf

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched on the normalized text (else on the raw text)
  bool single_word = false;
};

class HfTokenizer final : public Tokenizer {
 public:
  // The parsed files; generation_config is null when the model has none. Throws verl::Error
  // (invalid config) naming the file and JSON path of what it cannot use.
  HfTokenizer(const nlohmann::json& tokenizer_json, const nlohmann::json& tokenizer_config,
              const nlohmann::json& generation_config);
  // The same with the model's vocabulary and merges already apart from tokenizer_json
  // (hf::parse_tokenizer_json, what load_hf_tokenizer uses).
  HfTokenizer(const nlohmann::json& tokenizer_json, hf::BpeTables&& tables, const nlohmann::json& tokenizer_config,
              const nlohmann::json& generation_config);
  ~HfTokenizer() override;

  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> bos_id() const override { return bos_id_; }
  int64_t eos_id() const override { return eos_id_; }
  int64_t pad_id() const override { return pad_id_; }
  std::vector<int64_t> stop_ids() const override { return stop_ids_; }

  std::vector<int64_t> encode(const std::string& text) const override;
  // BOS first when add_bos_token() and the tokenizer has one.
  std::vector<int64_t> encode_prompt(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override;
  // Renders tokenizer_config.json's chat_template (a string, or the "default" of a list of
  // {name, template}) with bos_token, eos_token, pad_token, unk_token and the other *_token
  // entries of tokenizer_config.json as variables.
  std::string apply_chat_template(const nlohmann::json& messages, bool add_generation_prompt) const override;

  // tokenizer_config.json's add_bos_token, or when it is absent whether tokenizer.json's
  // post_processor template puts bos_token first: whether callers that want HF's
  // add_special_tokens=True should put bos_id() first.
  bool add_bos_token() const { return add_bos_token_; }
  std::optional<int64_t> token_to_id(const std::string& token) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }

 private:
  struct Trie;
  // Appends the ids of `text` found by `trie` (added tokens), calling `rest` for the parts
  // between them with (part, starts_at_offset_0).
  template <typename Rest>
  void split_added(const std::string& text, const Trie& trie, std::vector<int64_t>& ids, Rest&& rest) const;
  void encode_section(const std::string& section, bool at_text_start, std::vector<int64_t>& ids) const;

  std::vector<AddedToken> added_;
  std::unordered_map<int64_t, size_t> added_by_id_;  // id -> index in added_
  std::unique_ptr<Trie> raw_trie_;
  std::unique_ptr<Trie> normalized_trie_;
  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::BpeModel> model_;
  std::unique_ptr<hf::Decoder> decoder_;
  bool clean_up_tokenization_spaces_ = false;
  bool add_bos_token_ = false;
  int64_t vocab_size_ = 0;
  std::optional<int64_t> bos_id_;
  int64_t eos_id_ = 0;
  int64_t pad_id_ = 0;
  std::vector<int64_t> stop_ids_;
  std::string chat_template_;  // empty when the files have none
  nlohmann::json template_context_;  // bos_token, eos_token, ... as strings
};

// Reads DIR/tokenizer.json, DIR/tokenizer_config.json and, when present,
// DIR/generation_config.json. Throws verl::Error (invalid config) for a missing directory or
// file, malformed JSON (file and position) or an unsupported component (file and JSON path).
std::unique_ptr<HfTokenizer> load_hf_tokenizer(const std::string& dir);

}  // namespace verl::text
