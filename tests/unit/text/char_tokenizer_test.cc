#include "text/char_tokenizer.h"

#include <gtest/gtest.h>

namespace verl::text {
namespace {

TEST(CharTokenizer, RoundTripsTaskText) {
  CharTokenizer tok;
  for (const std::string s : {"12+34=46", "3,7,25>46:3*7+25", "#### 42", "user: What is 2+2?\nassistant: 4"}) {
    const auto ids = tok.encode(s);
    EXPECT_EQ(ids.size(), s.size());
    EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), s);
    for (auto id : ids) {
      EXPECT_GE(id, 4);
      EXPECT_LT(id, tok.vocab_size());
    }
  }
  EXPECT_LT(tok.vocab_size(), 128);
}

TEST(CharTokenizer, SpecialTokensAreDistinctAndSkippable) {
  CharTokenizer tok;
  std::vector<int64_t> ids = {CharTokenizer::kBos};
  auto body = tok.encode("7");
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(CharTokenizer::kEos);
  ids.push_back(CharTokenizer::kPad);
  EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), "7");
  EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/false), "<s>7</s><pad>");
}

TEST(CharTokenizer, UnknownCharactersBecomeUnk) {
  CharTokenizer tok;
  const auto ids = tok.encode("a\xc3\xa9");  // "aé": two bytes outside the alphabet
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], CharTokenizer::kUnk);
  EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), "a??");
}

TEST(CharTokenizer, ChatTemplateRendersRolesAndOpensTheReply) {
  const auto chat = nlohmann::json::parse(R"([{"role":"system","content":"be brief"},{"role":"user","content":"1+1"}])");
  CharTokenizer tok;
  EXPECT_EQ(tok.apply_chat_template(chat, true), "system: be brief\nuser: 1+1\nassistant: ");
  EXPECT_EQ(tok.apply_chat_template(chat, false), "system: be brief\nuser: 1+1\n");
  EXPECT_EQ(tok.apply_chat_template(nlohmann::json("plain"), true), "plain");
  EXPECT_THROW(tok.apply_chat_template(nlohmann::json::parse(R"([{"role":"user"}])"), true), std::exception);
}

TEST(CharTokenizer, PromptsStartWithBos) {
  CharTokenizer tok;
  EXPECT_EQ(tok.encode_prompt("7"), (std::vector<int64_t>{CharTokenizer::kBos, tok.encode("7")[0]}));
  EXPECT_EQ(tok.stop_ids(), std::vector<int64_t>{CharTokenizer::kEos});
}

}  // namespace
}  // namespace verl::text
