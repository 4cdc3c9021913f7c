#include "trainer/tokenizer.h"

#include <gtest/gtest.h>

namespace verl::trainer {
namespace {

TEST(Tokenizer, RoundTripsTaskText) {
  Tokenizer tok;
  for (const std::string s : {"12+34=46", "3,7,25>46:3*7+25", "#### 42", "user: What is 2+2?\nassistant: 4"}) {
    const auto ids = tok.encode(s);
    EXPECT_EQ(ids.size(), s.size());
    EXPECT_EQ(tok.decode(ids), s);
    for (auto id : ids) {
      EXPECT_GE(id, 4);
      EXPECT_LT(id, tok.vocab_size());
    }
  }
  EXPECT_LT(tok.vocab_size(), 128);
}

TEST(Tokenizer, SpecialTokensAreDistinctAndSkippable) {
  Tokenizer tok;
  std::vector<int64_t> ids = {Tokenizer::kBos};
  auto body = tok.encode("7");
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(Tokenizer::kEos);
  ids.push_back(Tokenizer::kPad);
  EXPECT_EQ(tok.decode(ids), "7");
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/false), "<s>7</s><pad>");
}

TEST(Tokenizer, UnknownCharactersBecomeUnk) {
  Tokenizer tok;
  const auto ids = tok.encode("a\xc3\xa9");  // "aé": two bytes outside the alphabet
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], Tokenizer::kUnk);
  EXPECT_EQ(tok.decode(ids), "a??");
}

TEST(Tokenizer, ChatTemplateRendersRolesAndOpensTheReply) {
  const auto chat = nlohmann::json::parse(R"([{"role":"system","content":"be brief"},{"role":"user","content":"1+1"}])");
  EXPECT_EQ(Tokenizer::apply_chat_template(chat), "system: be brief\nuser: 1+1\nassistant: ");
  EXPECT_EQ(Tokenizer::apply_chat_template(nlohmann::json("plain")), "plain");
  EXPECT_THROW(Tokenizer::apply_chat_template(nlohmann::json::parse(R"([{"role":"user"}])")), std::exception);
}

}  // namespace
}  // namespace verl::trainer
