// HfTokenizer and its pipeline pieces on small hand-written tokenizer.json files: each
// normalizer, pre-tokenizer, model option and decoder, added tokens, the special ids, and the
// errors that name the file and JSON path. The real files (Qwen3, Llama 3, Gemma 3) are checked
// against HF's JS tokenizers in tests/integration/tokenizer_peer_test.sh.
#include "text/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "text/hf_components.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace verl::text {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kMeta = "\xE2\x96\x81";  // U+2581, sentencepiece's space

class HfTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hf_tokenizer_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const json& j) { std::ofstream(dir_ / name) << j.dump(); }
  std::unique_ptr<HfTokenizer> load(const json& tokenizer, const json& config = {{"eos_token", "<eos>"}}) {
    write("tokenizer.json", tokenizer);
    write("tokenizer_config.json", config);
    return load_hf_tokenizer(dir_.string());
  }
  // The verl::Error load throws (fails the test when none).
  Error load_error(const json& tokenizer, const json& config = {{"eos_token", "<eos>"}}) {
    try {
      load(tokenizer, config);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error{ExitCode::kOk, ""};
  }

  fs::path dir_;
};

// GPT-2 style: the 256 byte characters are ids 0..255, then `extra` tokens from 256 on.
json byte_level_vocab(const std::vector<std::string>& extra) {
  json v = json::object();
  for (int b = 0; b < 256; ++b) v[unicode::byte_to_unicode(static_cast<uint8_t>(b))] = b;
  int id = 256;
  for (const auto& t : extra) v[t] = id++;
  v["<eos>"] = id;
  return v;
}

int64_t byte_id(char c) { return static_cast<unsigned char>(c); }

json byte_level(const json& vocab, const json& merges, const json& pre = nullptr) {
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
          {"pre_tokenizer", pre.is_null() ? json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}} : pre},
          {"decoder", {{"type", "ByteLevel"}}},
          {"normalizer", nullptr},
          {"added_tokens", json::array()}};
}

// 256 he, 257 ll, 258 hell, 259 hello, 260 Ġw
const std::vector<std::string> kHello = {"he", "ll", "hell", "hello", "\xC4\xA0w"};
const json kHelloMerges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w"};

TEST_F(HfTokenizerTest, ByteLevelBpeMergesByRank) {
  auto tok = load(byte_level(byte_level_vocab(kHello), kHelloMerges));
  EXPECT_EQ(tok->encode("hello"), (std::vector<int64_t>{259}));
  EXPECT_EQ(tok->encode("hello world"),
            (std::vector<int64_t>{259, 260, byte_id('o'), byte_id('r'), byte_id('l'), byte_id('d')}));
  EXPECT_EQ(tok->encode("hel"), (std::vector<int64_t>{256, byte_id('l')}));
  EXPECT_EQ(tok->decode(tok->encode("hello world\n\t\xC3\xA9!"), false), "hello world\n\t\xC3\xA9!");
}

TEST_F(HfTokenizerTest, BuiltFromParsedJsonLikeFromFiles) {
  json t = byte_level(byte_level_vocab(kHello), kHelloMerges);
  HfTokenizer from_json(t, json{{"eos_token", "<eos>"}}, json());
  EXPECT_EQ(from_json.encode("hello world"), load(t)->encode("hello world"));
  t["model"]["vocab"]["bad"] = "x";
  try {
    HfTokenizer bad(t, json{{"eos_token", "<eos>"}}, json());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tokenizer.json: model.vocab[\"bad\"] must be a non-negative id");
  }
  EXPECT_STREQ(load_error(t).what(), "tokenizer.json: model.vocab[\"bad\"] must be a non-negative id");
}

TEST_F(HfTokenizerTest, MergesAsPairsReadLikeStrings) {
  json pairs = json::array();
  for (const auto& m : kHelloMerges) {
    std::string s = m.get<std::string>();
    size_t sp = s.find(' ');
    pairs.push_back({s.substr(0, sp), s.substr(sp + 1)});
  }
  auto tok = load(byte_level(byte_level_vocab(kHello), pairs));
  EXPECT_EQ(tok->encode("hello world")[0], 259);
  EXPECT_EQ(tok->encode("hello world")[1], 260);
}

TEST_F(HfTokenizerTest, ByteLevelAddPrefixSpace) {
  auto tok = load(byte_level(byte_level_vocab(kHello), kHelloMerges,
                             {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}));
  EXPECT_EQ(tok->encode("w"), (std::vector<int64_t>{260}));
}

TEST_F(HfTokenizerTest, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  json t = byte_level(byte_level_vocab({"xyz"}), json::array());
  EXPECT_EQ(load(t)->encode("xyz"), (std::vector<int64_t>{byte_id('x'), byte_id('y'), byte_id('z')}));
  t["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(t)->encode("xyz"), (std::vector<int64_t>{256}));
}

TEST_F(HfTokenizerTest, AddedTokensAreMatchedFirstLongestLeftmost) {
  json t = byte_level(byte_level_vocab(kHello), kHelloMerges);
  t["added_tokens"] = {{{"id", 300}, {"content", "<|im_start|>"}, {"special", true}, {"normalized", false}},
                       {{"id", 301}, {"content", "<|im"}, {"special", false}, {"normalized", false}}};
  auto tok = load(t);
  EXPECT_EQ(tok->encode("<|im_start|>hello"), (std::vector<int64_t>{300, 259}));
  EXPECT_EQ(tok->encode("hello<|imhello"), (std::vector<int64_t>{259, 301, 259}));
  EXPECT_EQ(tok->vocab_size(), 302);
  EXPECT_EQ(tok->decode({300, 259}, false), "<|im_start|>hello");
  EXPECT_EQ(tok->decode({300, 259, 301}, true), "hello<|im");  // only special tokens are skipped
}

TEST_F(HfTokenizerTest, AddedTokenStripsAndSingleWord) {
  json t = byte_level(byte_level_vocab(kHello), kHelloMerges);
  t["added_tokens"] = {
      {{"id", 300}, {"content", "<mask>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}, {"normalized", false}},
      {{"id", 301}, {"content", "he"}, {"special", false}, {"single_word", true}, {"normalized", false}}};
  auto tok = load(t);
  EXPECT_EQ(tok->encode("hello  <mask>  hello"), (std::vector<int64_t>{259, 300, 259}));
  EXPECT_EQ(tok->encode("he"), (std::vector<int64_t>{301}));
  EXPECT_EQ(tok->encode("hello"), (std::vector<int64_t>{259}));  // "he" inside a word is not the token
}

TEST_F(HfTokenizerTest, NormalizedAddedTokenMatchesTheNormalizedText) {
  json t = byte_level(byte_level_vocab(kHello), kHelloMerges);
  t["normalizer"] = {{"type", "Lowercase"}};
  t["added_tokens"] = {{{"id", 300}, {"content", "wow"}, {"special", false}, {"normalized", true}}};
  auto tok = load(t);
  EXPECT_EQ(tok->encode("HELLO WOW"), (std::vector<int64_t>{259, byte_id(' '), 300}));
}

TEST_F(HfTokenizerTest, NfcComposesDecomposedInput) {
  // é is C3 A9, the byte characters Ã and ©.
  json t = byte_level(byte_level_vocab({"\xC3\x83\xC2\xA9"}), {"\xC3\x83 \xC2\xA9"});
  EXPECT_EQ(load(t)->encode("e\xCC\x81"), (std::vector<int64_t>{byte_id('e'), 0xCC, 0x81}));
  t["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(load(t)->encode("e\xCC\x81"), (std::vector<int64_t>{256}));
}

TEST_F(HfTokenizerTest, UnicodeNormalForms) {
  EXPECT_EQ(unicode::normalize("e\xCC\x81", unicode::Form::kNfc), "\xC3\xA9");
  EXPECT_EQ(unicode::normalize("\xC3\xA9", unicode::Form::kNfd), "e\xCC\x81");
  EXPECT_EQ(unicode::normalize("\xEF\xAC\x81", unicode::Form::kNfkc), "fi");          // ligature ﬁ
  EXPECT_EQ(unicode::normalize("\xEF\xAC\x81", unicode::Form::kNfc), "\xEF\xAC\x81");
  EXPECT_EQ(unicode::normalize("\xE1\x84\x80\xE1\x85\xA1", unicode::Form::kNfc), "\xEA\xB0\x80");  // Hangul L+V = 가
  // Canonical order: dot below (220) before acute (230).
  EXPECT_EQ(unicode::normalize("q\xCC\x81\xCC\xA3", unicode::Form::kNfd), "q\xCC\xA3\xCC\x81");
  EXPECT_EQ(unicode::to_lower("\xC3\x84" "Bc\xCE\xA3"), "\xC3\xA4" "bc\xCF\x83");
}

TEST_F(HfTokenizerTest, SentencepieceStyleReplaceByteFallbackAndDecoders) {
  json vocab = {{"<unk>", 0}, {"<eos>", 1}, {kMeta, 2}, {"a", 3}, {"b", 4}, {kMeta + "a", 5}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 6 + b;
  }
  // kMeta is U+2581 in the raw strings.
  json t = json::parse(R"({
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "model": {"type": "BPE", "merges": ["▁ a"], "byte_fallback": true, "unk_token": "<unk>"},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
  })");
  t["model"]["vocab"] = vocab;
  auto tok = load(t);
  EXPECT_EQ(tok->encode("a b"), (std::vector<int64_t>{5, 2, 4}));
  EXPECT_EQ(tok->encode("\xC3\xB1"), (std::vector<int64_t>{2, 6 + 0xC3, 6 + 0xB1}));  // ñ as its bytes
  EXPECT_EQ(tok->decode({5, 2, 4, 2, 6 + 0xC3, 6 + 0xB1}, false), "a b \xC3\xB1");
  EXPECT_EQ(tok->decode({3, 6 + 0xC3, 4}, false), "a\xEF\xBF\xBD" "b");  // a lone byte is U+FFFD
}

TEST_F(HfTokenizerTest, UnknownCharactersAreOneUnkWhenFused) {
  json t = {{"model", {{"type", "BPE"}, {"vocab", {{"<unk>", 0}, {"<eos>", 1}, {"a", 2}}}, {"merges", json::array()}, {"unk_token", "<unk>"}}}};
  EXPECT_EQ(load(t)->encode("axyza"), (std::vector<int64_t>{2, 0, 0, 0, 2}));
  t["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(t)->encode("axyza"), (std::vector<int64_t>{2, 0, 2}));
}

TEST_F(HfTokenizerTest, MetaspacePreTokenizerAndDecoder) {
  json t = {{"model", {{"type", "BPE"}, {"vocab", {{"<eos>", 0}, {kMeta + "Hi", 1}, {kMeta + "yo", 2}}}, {"merges", json::array()}, {"ignore_merges", true}}},
            {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "always"}, {"split", true}}},
            {"decoder", {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "always"}}}};
  auto tok = load(t);
  EXPECT_EQ(tok->encode("Hi yo"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(tok->decode({1, 2}, false), "Hi yo");
}

TEST_F(HfTokenizerTest, SplitBehaviors) {
  auto dash = hf::make_string_pattern("-");
  using V = std::vector<std::string>;
  EXPECT_EQ(hf::split("a-b--c", *dash, hf::SplitBehavior::kRemoved, false), (V{"a", "b", "c"}));
  EXPECT_EQ(hf::split("a-b--c", *dash, hf::SplitBehavior::kIsolated, false), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(hf::split("a-b--c", *dash, hf::SplitBehavior::kMergedWithPrevious, false), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(hf::split("a-b--c", *dash, hf::SplitBehavior::kMergedWithNext, false), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(hf::split("a-b--c", *dash, hf::SplitBehavior::kContiguous, false), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(hf::split("a-b--c", *dash, hf::SplitBehavior::kRemoved, true), (V{"-", "-", "-"}));
}

TEST_F(HfTokenizerTest, QwenAndLlamaRegexSplitLikeOniguruma) {
  const std::string qwen =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  auto p = hf::make_pattern({{"Regex", qwen}}, "pattern");
  using V = std::vector<std::string>;
  EXPECT_EQ(hf::split("He'LL  go\n", *p, hf::SplitBehavior::kIsolated, false), (V{"He", "'LL", " ", " go", "\n"}));
  EXPECT_EQ(hf::split("x 123", *p, hf::SplitBehavior::kIsolated, false), (V{"x", " ", "1", "2", "3"}));
  // U+0085 is White_Space for Oniguruma (and HF), not \s for PCRE2 as is.
  Regex ws("\\s+");
  EXPECT_EQ(ws.find_all("a\xC2\x85" "b").size(), 1u);
}

TEST_F(HfTokenizerTest, DigitsPreTokenizer) {
  json t = byte_level(byte_level_vocab({}), json::array(),
                      {{"type", "Sequence"},
                       {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}},
                                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}});
  EXPECT_EQ(load(t)->encode("a12"), (std::vector<int64_t>{byte_id('a'), byte_id('1'), byte_id('2')}));
}

TEST_F(HfTokenizerTest, DecodeCleansUpSpacesWhenTheConfigSaysSo) {
  json t = byte_level(byte_level_vocab({}), json::array());
  auto ids = load(t)->encode("a , b .");
  EXPECT_EQ(load(t)->decode(ids, false), "a , b .");
  EXPECT_EQ(load(t, {{"eos_token", "<eos>"}, {"clean_up_tokenization_spaces", true}})->decode(ids, false), "a, b.");
}

TEST_F(HfTokenizerTest, InvalidUtf8InputIsReadAsReplacementCharacters) {
  auto tok = load(byte_level(byte_level_vocab({}), json::array()));
  EXPECT_EQ(tok->decode(tok->encode("a\xFF" "b"), false), "a\xEF\xBF\xBD" "b");
}

TEST_F(HfTokenizerTest, EncodesTheSameFromManyThreads) {
  auto tok = load(byte_level(byte_level_vocab(kHello), kHelloMerges));
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("hello world " + std::to_string(i) + std::string(static_cast<size_t>(i % 7), ' ') + "hel");
  std::vector<std::vector<int64_t>> want;
  for (const auto& t : texts) want.push_back(tok->encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (size_t i = 0; i < texts.size(); ++i) {
        if (tok->encode(texts[i]) != want[i]) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(HfTokenizerTest, SpecialIdsFromTheConfigAndGenerationConfig) {
  json t = byte_level(byte_level_vocab(kHello), kHelloMerges);
  t["added_tokens"] = {{{"id", 300}, {"content", "<s>"}, {"special", true}},
                       {{"id", 301}, {"content", "<|im_end|>"}, {"special", true}},
                       {{"id", 302}, {"content", "<pad>"}, {"special", true}}};
  write("generation_config.json", {{"eos_token_id", {261, 7}}});
  auto tok = load(t, {{"bos_token", {{"content", "<s>"}, {"__type", "AddedToken"}}}, {"eos_token", "<eos>"}, {"pad_token", "<pad>"}, {"add_bos_token", true}});
  EXPECT_EQ(tok->bos_id(), 300);
  EXPECT_EQ(tok->eos_id(), 261);
  EXPECT_EQ(tok->pad_id(), 302);
  EXPECT_TRUE(tok->add_bos_token());
  EXPECT_EQ(tok->stop_ids(), (std::vector<int64_t>{261, 7, 301}));
  t["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [{"type": "ByteLevel"},
    {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]}]})");
  EXPECT_TRUE(load(t, {{"bos_token", "<s>"}, {"eos_token", "<eos>"}})->add_bos_token());  // from the template
  EXPECT_FALSE(load(t, {{"bos_token", "<s>"}, {"eos_token", "<eos>"}, {"add_bos_token", false}})->add_bos_token());
  auto plain = load(t, {{"eos_token", "<eos>"}});
  EXPECT_FALSE(plain->bos_id().has_value());
  EXPECT_EQ(plain->pad_id(), 261);  // no pad_token: eos
}

TEST_F(HfTokenizerTest, ChatTemplateNeedsOneAndPassesStringsThrough) {
  auto tok = load(byte_level(byte_level_vocab({}), json::array()));
  EXPECT_EQ(tok->apply_chat_template("just text", true), "just text");
  try {
    tok->apply_chat_template(json::array({{{"role", "user"}, {"content", "hi"}}}), true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("no chat_template"), std::string::npos) << e.what();
  }
  Error e = load_error(byte_level(byte_level_vocab({}), json::array()), {{"eos_token", "<eos>"}, {"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}}})}});
  EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: chat_template"), std::string::npos) << e.what();
}

TEST_F(HfTokenizerTest, UnsupportedComponentNamesFileAndJsonPath) {
  json t = byte_level(byte_level_vocab({}), json::array(),
                      {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, {{"type", "Foo"}}}}});
  Error e = load_error(t);
  EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
  EXPECT_STREQ(e.what(), "tokenizer.json: pre_tokenizer.pretokenizers[1].type \"Foo\" is not supported");

  t = byte_level(byte_level_vocab({}), json::array());
  t["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "WordPiece"}}}}};
  EXPECT_STREQ(load_error(t).what(), "tokenizer.json: decoder.decoders[0].type \"WordPiece\" is not supported");

  t = byte_level(byte_level_vocab({}), json::array());
  t["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_STREQ(load_error(t).what(), "tokenizer.json: normalizer.type \"Precompiled\" is not supported");

  t["normalizer"] = nullptr;
  t["model"]["type"] = "Unigram";
  EXPECT_STREQ(load_error(t).what(), "tokenizer.json: model.type \"Unigram\" is not supported (only BPE is)");

  t = byte_level(byte_level_vocab({}), json::array(), {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}});
  EXPECT_NE(std::string(load_error(t).what()).find("tokenizer.json: pre_tokenizer.pattern.Regex invalid regex"), std::string::npos);

  t = byte_level(byte_level_vocab({}), {"a zz"});
  EXPECT_STREQ(load_error(t).what(), "tokenizer.json: model.merges[0] \"zz\" is not in the vocabulary");
}

TEST_F(HfTokenizerTest, MissingDirectoryOrFileOrBadJsonIsAnInvalidConfig) {
  try {
    load_hf_tokenizer((dir_ / "nowhere").string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("nowhere does not exist"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("tokenizer.json"), std::string::npos);
  }
  write("tokenizer.json", byte_level(byte_level_vocab({}), json::array()));
  try {
    load_hf_tokenizer(dir_.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no tokenizer_config.json"), std::string::npos) << e.what();
  }
  std::ofstream(dir_ / "tokenizer_config.json") << "{\"eos_token\": ";
  try {
    load_hf_tokenizer(dir_.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: not valid JSON"), std::string::npos) << e.what();
  }
  Error e = load_error(byte_level(byte_level_vocab({}), json::array()), {{"eos_token", "<nope>"}});
  EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: eos_token \"<nope>\""), std::string::npos) << e.what();
}

}  // namespace
}  // namespace verl::text
