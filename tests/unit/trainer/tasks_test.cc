// Built-in tasks, JSONL datasets and the sampler.
#include "trainer/tasks.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "common/error.h"
#include "trainer/dataset.h"
#include "trainer/rewards.h"
#include "text/char_tokenizer.h"

namespace verl::trainer {
namespace {

BuiltinDataConfig builtin(const std::string& task, int64_t train, int64_t val, int64_t digits = 2) {
  BuiltinDataConfig c;
  c.task = task;
  c.train_size = train;
  c.val_size = val;
  c.digits = digits;
  c.num_operands = task == "countdown" ? 3 : 2;
  return c;
}

TEST(Tasks, SameSeedSameProblemsOtherSeedOthers) {
  auto a = generate_builtin_task(builtin("arithmetic", 100, 20), 1);
  auto b = generate_builtin_task(builtin("arithmetic", 100, 20), 1);
  auto c = generate_builtin_task(builtin("arithmetic", 100, 20), 2);
  ASSERT_EQ(a.train.size(), 100u);
  ASSERT_EQ(a.val.size(), 20u);
  for (size_t i = 0; i < a.train.size(); ++i) EXPECT_EQ(a.train[i].prompt, b.train[i].prompt);
  int same = 0;
  for (size_t i = 0; i < a.train.size(); ++i) same += a.train[i].prompt == c.train[i].prompt;
  EXPECT_LT(same, 10);
}

TEST(Tasks, TrainAndValidationNeverOverlap) {
  for (const std::string task : {"arithmetic", "countdown"}) {
    auto s = generate_builtin_task(builtin(task, 2000, 300), 5);
    std::set<std::string> val;
    for (const auto& e : s.val) val.insert(e.prompt);
    EXPECT_EQ(val.size(), s.val.size()) << task;
    std::set<std::string> train;
    for (const auto& e : s.train) {
      EXPECT_EQ(val.count(e.prompt), 0u) << task << ": " << e.prompt;
      train.insert(e.prompt);
    }
    EXPECT_EQ(train.size(), s.train.size()) << task;
  }
}

TEST(Tasks, ArithmeticAnswersAreSums) {
  auto s = generate_builtin_task(builtin("arithmetic", 50, 0, 3), 9);
  for (const auto& e : s.train) {
    const auto plus = e.prompt.find('+');
    const int a = std::stoi(e.prompt.substr(0, plus));
    const int b = std::stoi(e.prompt.substr(plus + 1));
    EXPECT_EQ(e.ground_truth.get<std::string>(), std::to_string(a + b)) << e.prompt;
    EXPECT_EQ(e.sft_target, e.ground_truth.get<std::string>());
    EXPECT_EQ(e.data_source, "arithmetic");
    EXPECT_EQ(rewards::compute_score(e.data_source, e.sft_target, e.ground_truth), 1.0);
  }
}

TEST(Tasks, CountdownTargetsAreReachable) {
  auto s = generate_builtin_task(builtin("countdown", 200, 0, 1), 3);
  for (const auto& e : s.train) {
    EXPECT_EQ(rewards::compute_score(e.data_source, e.sft_target, e.ground_truth), 1.0)
        << e.prompt << " " << e.sft_target;
    EXPECT_GT(e.ground_truth["target"].get<int64_t>(), 0);
  }
}

TEST(Tasks, TooSmallProblemSpaceIsAConfigError) {
  try {
    generate_builtin_task(builtin("arithmetic", 200, 10, 1), 1);  // 1 digit: only 100 problems
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
  }
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

DataConfig data_config() {
  DataConfig d;
  d.max_prompt_length = 64;
  d.max_response_length = 16;
  return d;
}

TEST(Dataset, ReadsVerlRowsWithStringAndChatPrompts) {
  const auto path = write_file("rows.jsonl",
                               R"({"prompt": "2+2=", "data_source": "arithmetic", "reward_model": {"style": "rule", "ground_truth": "4"}})"
                               "\n\n"
                               R"({"prompt": [{"role": "user", "content": "6*7?"}], "data_source": "openai/gsm8k", "reward_model": {"ground_truth": "42"}})"
                               "\n");
  text::CharTokenizer tok;
  auto ds = PromptDataset::from_files({path}, data_config(), tok);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].example.prompt, "2+2=");
  EXPECT_EQ(ds[0].prompt_ids.front(), *tok.bos_id());
  EXPECT_EQ(tok.decode(ds[0].prompt_ids, true), "2+2=");
  EXPECT_EQ(ds[0].sft_ids.back(), tok.eos_id());
  EXPECT_EQ(ds[1].example.prompt, "user: 6*7?\nassistant: ");
  EXPECT_NE(ds[1].prompt_ids.front(), *tok.bos_id());  // a rendered chat template brings its own specials
  EXPECT_EQ(ds[1].example.sft_target, "#### 42");
  EXPECT_EQ(ds[1].example.ground_truth, "42");
}

TEST(Dataset, ErrorsNameFileAndLine) {
  const auto path = write_file("bad.jsonl",
                               R"({"prompt": "1+1=", "data_source": "arithmetic", "reward_model": {"ground_truth": "2"}})"
                               "\n"
                               R"({"prompt": "1+2=", "data_source": "arithmetic", "reward_model": {}})"
                               "\n");
  text::CharTokenizer tok;
  try {
    PromptDataset::from_files({path}, data_config(), tok);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find(path + ":2"), std::string::npos) << e.what();
  }
  const auto broken = write_file("broken.jsonl", "{not json\n");
  try {
    PromptDataset::from_files({broken}, data_config(), tok);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(broken + ":1"), std::string::npos) << e.what();
  }
}

TEST(Dataset, OverlongPromptsFollowTruncation) {
  const auto path = write_file("long.jsonl", R"({"prompt": "0123456789", "data_source": "arithmetic", "reward_model": {"ground_truth": "x"}})"
                                             "\n");
  text::CharTokenizer tok;
  auto d = data_config();
  d.max_prompt_length = 5;
  EXPECT_THROW(PromptDataset::from_files({path}, d, tok), Error);
  d.truncation = "left";
  auto ds = PromptDataset::from_files({path}, d, tok);
  EXPECT_EQ(tok.decode(ds[0].prompt_ids, true), "6789");  // BOS kept, the end of the prompt kept
  EXPECT_EQ(ds[0].prompt_ids.front(), *tok.bos_id());
}

TEST(Dataset, TruncationMiddleKeepsBothEndsAsVerl) {
  const auto path = write_file("mid.jsonl", R"({"prompt": "0123456789", "data_source": "arithmetic", "reward_model": {"ground_truth": "x"}})"
                                            "\n");
  text::CharTokenizer tok;
  auto d = data_config();
  d.max_prompt_length = 6;  // BOS + 10 characters -> 3 from the start (BOS, 0, 1) and 3 from the end
  d.truncation = "middle";
  auto ds = PromptDataset::from_files({path}, d, tok);
  ASSERT_EQ(ds[0].prompt_ids.size(), 6u);
  EXPECT_EQ(ds[0].prompt_ids.front(), *tok.bos_id());
  EXPECT_EQ(tok.decode(ds[0].prompt_ids, true), "01789");
  d.truncation = "right";
  EXPECT_EQ(tok.decode(PromptDataset::from_files({path}, d, tok)[0].prompt_ids, true), "01234");
}

TEST(Dataset, FilterOverlongPromptsDropsRowsBeforeTruncation) {
  const auto path = write_file("mixed.jsonl", R"({"prompt": "0123456789", "data_source": "arithmetic", "reward_model": {"ground_truth": "x"}})"
                                              "\n"
                                              R"({"prompt": "1+1=", "data_source": "arithmetic", "reward_model": {"ground_truth": "2"}})"
                                              "\n");
  text::CharTokenizer tok;
  auto d = data_config();
  d.max_prompt_length = 5;
  d.filter_overlong_prompts = true;  // truncation stays "error": never reached for a dropped row
  auto ds = PromptDataset::from_files({path}, d, tok);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].example.prompt, "1+1=");
  d.max_prompt_length = 3;  // every row dropped: an error, not an empty dataset
  EXPECT_THROW(PromptDataset::from_files({path}, d, tok), Error);
}

TEST(Dataset, ReadsVerlParquetRows) {
  const std::string pq = std::string(VERL_SOURCE_DIR) + "/tests/data/parquet/gsm8k_snappy_dict_v2_rgN.parquet";
  text::CharTokenizer tok;
  auto d = data_config();
  d.max_prompt_length = 400;
  auto ds = PromptDataset::from_files({pq, pq}, d, tok);  // a list of files
  ASSERT_EQ(ds.size(), 40u);
  EXPECT_EQ(ds[0].example.data_source, "openai/gsm8k");
  EXPECT_EQ(ds[0].example.prompt.rfind("user: ", 0), 0u);  // the chat list through the template
  EXPECT_NE(ds[0].example.sft_target.find("#### "), std::string::npos);  // extra_info.answer
  d.max_prompt_length = 100;
  try {
    PromptDataset::from_files({pq}, d, tok);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(pq + ": row 0: the prompt has"), std::string::npos) << e.what();
  }
}

TEST(DataSampler, EpochsCoverTheDataOnceAndResumeExactly) {
  DataSampler s(10, 3, /*shuffle=*/true, 4);
  EXPECT_EQ(s.batches_per_epoch(), 3);
  std::set<int64_t> seen;
  for (int i = 0; i < 3; ++i)
    for (auto idx : s.next_batch()) EXPECT_TRUE(seen.insert(idx).second);
  EXPECT_EQ(seen.size(), 9u);
  const auto state = s.state();
  const auto next = s.next_batch();  // first batch of epoch 1
  EXPECT_EQ(s.state().epoch, 1);
  DataSampler resumed(10, 3, true, 4);
  resumed.set_state(state);
  EXPECT_EQ(resumed.next_batch(), next);
  DataSampler other_seed(10, 3, true, 5);
  DataSampler same_seed(10, 3, true, 4);
  EXPECT_NE(other_seed.next_batch(), same_seed.next_batch());
}

}  // namespace
}  // namespace verl::trainer
