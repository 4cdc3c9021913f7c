#include "text/bpe.h"

#include <cstdio>
#include <mutex>
#include <queue>

#include "text/hf_components.h"
#include "text/unicode.h"

namespace verl::text::hf {
namespace {

using nlohmann::json;

std::string optional_string(const json& model, const char* key, const std::string& path) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return {};
  if (!it->is_string()) invalid(path + "." + key, "must be a string");
  return it->get<std::string>();
}

bool optional_bool(const json& model, const char* key, const std::string& path) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return false;
  if (!it->is_boolean()) invalid(path + "." + key, "must be true or false");
  return it->get<bool>();
}

constexpr uint32_t kNone = UINT32_MAX;

}  // namespace

namespace {

// A token id: a non-negative integer that fits 32 bits (a JSON tree built in C++ holds signed ones).
bool is_id(const json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
}

// One merges entry, "a b" or ["a", "b"], as a pair.
std::pair<std::string, std::string> merge_pair(const json& m, size_t i, const std::string& path) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t sp = s.find(' ');  // a token with a space in it needs the pair form
    if (sp == std::string::npos) invalid(path + ".merges[" + std::to_string(i) + "]", "must be \"a b\"");
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  invalid(path + ".merges[" + std::to_string(i) + "]", "must be \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

BpeTables bpe_tables_from_json(const json& model, const std::string& path) {
  BpeTables t;
  auto vit = model.find("vocab");
  if (vit == model.end() || !vit->is_object()) invalid(path + ".vocab", "must be an object {token: id}");
  t.vocab.reserve(vit->size());
  for (auto it = vit->begin(); it != vit->end(); ++it) {
    if (!is_id(it.value())) invalid(path + ".vocab[\"" + it.key() + "\"]", "must be a non-negative id");
    t.vocab.emplace_back(it.key(), it.value().get<uint32_t>());
  }
  auto mit = model.find("merges");
  if (mit == model.end() || mit->is_null()) return t;
  if (!mit->is_array()) invalid(path + ".merges", "must be a list");
  t.merges.reserve(mit->size());
  for (size_t i = 0; i < mit->size(); ++i) t.merges.push_back(merge_pair((*mit)[i], i, path));
  return t;
}

json parse_tokenizer_json(const std::string& text, BpeTables& tables) {
  // Keys of the enclosing objects at depths 1 and 2 (tokenizer.json's top level, then model's).
  std::string key1, key2, vocab_key;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (event == json::parse_event_t::key) {
      if (depth == 1) key1 = parsed.get<std::string>();
      else if (depth == 2) key2 = parsed.get<std::string>();
      else if (depth == 3 && key1 == "model" && key2 == "vocab") {
        vocab_key = parsed.get<std::string>();
        return false;  // no slot in the tree for it (its value event still comes)
      }
      return true;
    }
    if (depth != 3 || key1 != "model") return true;
    if (key2 == "vocab" && event == json::parse_event_t::value) {
      if (!is_id(parsed)) invalid("model.vocab[\"" + vocab_key + "\"]", "must be a non-negative id");
      tables.vocab.emplace_back(std::move(vocab_key), parsed.get<uint32_t>());
      return false;
    }
    if (key2 == "merges" && (event == json::parse_event_t::array_end || event == json::parse_event_t::value ||
                             event == json::parse_event_t::object_end)) {
      tables.merges.push_back(merge_pair(parsed, tables.merges.size(), "model"));
      return false;
    }
    return true;
  };
  return json::parse(text, callback);
}

BpeModel::BpeModel(const json& model, BpeTables tables, const std::string& path) {
  vocab_.reserve(tables.vocab.size());
  uint32_t max_id = 0;
  for (auto& [token, id] : tables.vocab) {
    max_id = std::max(max_id, id);
    vocab_.emplace(std::move(token), id);
  }
  tables.vocab = {};
  id_to_token_.assign(vocab_.empty() ? 0 : max_id + 1, std::string());
  has_id_.assign(id_to_token_.size(), false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[id] = token;
    has_id_[id] = true;
  }

  continuing_subword_prefix_ = optional_string(model, "continuing_subword_prefix", path);
  end_of_word_suffix_ = optional_string(model, "end_of_word_suffix", path);
  fuse_unk_ = optional_bool(model, "fuse_unk", path);
  byte_fallback_ = optional_bool(model, "byte_fallback", path);
  ignore_merges_ = optional_bool(model, "ignore_merges", path);
  std::string unk = optional_string(model, "unk_token", path);
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    if (it == vocab_.end()) invalid(path + ".unk_token", "\"" + unk + "\" is not in the vocabulary");
    unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = vocab_.find(name);
    byte_ids_[b] = it == vocab_.end() ? kNone : it->second;
  }

  merges_.reserve(tables.merges.size());
  size_t prefix_len = continuing_subword_prefix_.size();
  std::string merged;
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const auto& [a, b] = tables.merges[i];
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    merged = a;
    merged.append(b, prefix_len && b.compare(0, prefix_len, continuing_subword_prefix_) == 0 ? prefix_len : 0);
    auto im = vocab_.find(merged);
    auto where = [&] { return path + ".merges[" + std::to_string(i) + "]"; };
    if (ia == vocab_.end()) invalid(where(), "\"" + a + "\" is not in the vocabulary");
    if (ib == vocab_.end()) invalid(where(), "\"" + b + "\" is not in the vocabulary");
    if (im == vocab_.end()) invalid(where(), "\"" + merged + "\" is not in the vocabulary");
    uint64_t key = (static_cast<uint64_t>(ia->second) << 32) | ib->second;
    merges_.emplace(key, Merge{static_cast<uint32_t>(i), im->second});  // the first (best) rank wins
  }
}

std::optional<int64_t> BpeModel::token_to_id(const std::string& token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int64_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(const std::string& word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(word, std::move(ids));
  }
}

// HF's Word::merge_all: symbols in a linked list; repeatedly merge the pair of lowest rank
// (leftmost on ties) until no pair has a merge.
void BpeModel::merge_word(const std::string& word, std::vector<int64_t>& out) const {
  struct Symbol {
    uint32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  auto add = [&](uint32_t id) {
    int n = static_cast<int>(sym.size());
    sym.push_back({id, n - 1, -1, true});
    if (n > 0) sym[static_cast<size_t>(n - 1)].next = n;
  };
  std::optional<uint32_t> pending_unk;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    unicode::next_code_point(word, i);
    std::string piece = word.substr(start, i - start);
    if (start > 0 && !continuing_subword_prefix_.empty()) piece.insert(0, continuing_subword_prefix_);
    if (i == word.size() && !end_of_word_suffix_.empty()) piece += end_of_word_suffix_;
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pending_unk) add(*pending_unk), pending_unk.reset();
      add(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_ids_[static_cast<uint8_t>(word[k])] != kNone;
      if (all) {
        if (pending_unk) add(*pending_unk), pending_unk.reset();
        for (size_t k = start; k < i; ++k) add(byte_ids_[static_cast<uint8_t>(word[k])]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) add(*pending_unk);
      pending_unk = *unk_id_;
    }
    // No unk_token: HF drops the character.
  }
  if (pending_unk) add(*pending_unk);

  struct Candidate {
    uint32_t rank;
    int pos;
    uint32_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto lookup = [&](int left) -> const Merge* {
    int right = sym[static_cast<size_t>(left)].next;
    if (right < 0) return nullptr;
    uint64_t key = (static_cast<uint64_t>(sym[static_cast<size_t>(left)].id) << 32) | sym[static_cast<size_t>(right)].id;
    auto it = merges_.find(key);
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) {
    if (const Merge* m = lookup(i)) queue.push({m->rank, i, m->new_id});
  }
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    const Merge* m = lookup(top.pos);
    if (!m || m->new_id != top.new_id || m->rank != top.rank) continue;  // stale
    Symbol& right = sym[static_cast<size_t>(left.next)];
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* pm = lookup(left.prev)) queue.push({pm->rank, left.prev, pm->new_id});
    }
    if (const Merge* nm = lookup(top.pos)) queue.push({nm->rank, top.pos, nm->new_id});
  }
  for (const auto& s : sym) {
    if (s.alive) out.push_back(s.id);
  }
}

}  // namespace verl::text::hf
