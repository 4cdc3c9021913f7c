#include "text/char_tokenizer.h"

#include "common/error.h"

namespace verl::text {

CharTokenizer::CharTokenizer()
    : alphabet_(
          "0123456789+-*/=()<>.,:;?!#%$&'\"_ \n"
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ[]{}|^~@\\`") {
  for (auto& id : char_to_id_) id = kUnk;
  for (size_t i = 0; i < alphabet_.size(); ++i) {
    char_to_id_[static_cast<unsigned char>(alphabet_[i])] = kSpecials + static_cast<int64_t>(i);
  }
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (unsigned char ch : text) ids.push_back(char_to_id_[ch]);
  return ids;
}

std::vector<int64_t> CharTokenizer::encode_prompt(const std::string& text) const {
  std::vector<int64_t> ids = {kBos};
  for (unsigned char ch : text) ids.push_back(char_to_id_[ch]);
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  static const char* kNames[kSpecials] = {"<pad>", "<s>", "</s>", "<unk>"};
  std::string out;
  for (int64_t id : ids) {
    if (id >= kSpecials && id < vocab_size()) {
      out.push_back(alphabet_[static_cast<size_t>(id - kSpecials)]);
    } else if (id == kUnk) {
      out += skip_special ? "?" : kNames[kUnk];
    } else if (!skip_special && id >= 0 && id < kSpecials) {
      out += kNames[id];
    }
  }
  return out;
}

std::string CharTokenizer::apply_chat_template(const nlohmann::json& prompt, bool add_generation_prompt) const {
  if (prompt.is_string()) return prompt.get<std::string>();
  if (!prompt.is_array()) {
    throw Error{ExitCode::kInvalidConfig, "prompt must be a string or a chat list",
                "use \"prompt\": \"...\" or [{\"role\": \"user\", \"content\": \"...\"}]"};
  }
  std::string out;
  for (const auto& m : prompt) {
    if (!m.is_object() || !m.contains("role") || !m.contains("content") ||
        !m["role"].is_string() || !m["content"].is_string()) {
      throw Error{ExitCode::kInvalidConfig, "chat message must be {role: str, content: str}", ""};
    }
    out += m["role"].get<std::string>() + ": " + m["content"].get<std::string>() + "\n";
  }
  if (add_generation_prompt) out += "assistant: ";
  return out;
}

}  // namespace verl::text
