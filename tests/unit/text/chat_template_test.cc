#include "text/chat_template.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/error.h"

namespace verl::text {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(VERL_SOURCE_DIR) + "/tests/data/chat_templates/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const nlohmann::json kQwenTokens = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};

TEST(ChatTemplate, RendersQwen25WithItsDefaultSystemPrompt) {
  nlohmann::json messages = {{{"role", "user"}, {"content", "2+2?"}}};
  EXPECT_EQ(render_chat_template(read_template("qwen2_5.jinja"), messages, true, kQwenTokens),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat_template(read_template("qwen2_5.jinja"), messages, false, kQwenTokens),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n");
}

TEST(ChatTemplate, RendersQwen25ToolsAndToolCalls) {
  nlohmann::json tools = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", nlohmann::json::object()}}}}};
  nlohmann::json messages = {
      {{"role", "system"}, {"content", "S"}},
      {{"role", "user"}, {"content", "é?"}},
      {{"role", "assistant"}, {"content", ""}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", {{"x", "日本"}}}}}}}}},
      {{"role", "tool"}, {"content", "42"}}};
  nlohmann::json extra = kQwenTokens;
  extra["tools"] = tools;
  std::string text = render_chat_template(read_template("qwen2_5.jinja"), messages, false, extra);
  EXPECT_NE(text.find("<|im_start|>system\nS\n\n# Tools\n"), std::string::npos) << text;
  EXPECT_NE(text.find("<tools>\n{\"function\": {\"name\": \"f\", \"parameters\": {}}, \"type\": \"function\"}\n</tools>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"日本\"}}\n</tool_call><|im_end|>\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n"), std::string::npos) << text;
}

TEST(ChatTemplate, OrderedJsonKeepsTheKeyOrderTojsonPrints) {
  const std::string t = "{{ tools[0] | tojson }}|{{ messages[0].tool_calls[0].function.arguments | tojson }}";
  auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "description": "d"}}])");
  auto messages = nlohmann::ordered_json::parse(
      R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"z": 1, "a": 2}}}]}])");
  nlohmann::ordered_json extra = {{"tools", tools}};
  EXPECT_EQ(render_chat_template_ordered(t, messages, false, extra),
            R"({"type": "function", "function": {"name": "f", "description": "d"}}|{"z": 1, "a": 2})");
  // nlohmann::json has sorted them before we see them.
  EXPECT_EQ(render_chat_template(t, nlohmann::json::parse(messages.dump()), false, nlohmann::json::parse(extra.dump())),
            R"({"function": {"description": "d", "name": "f"}, "type": "function"}|{"a": 2, "z": 1})");
}

TEST(ChatTemplate, ToolsAreUndefinedUnlessGiven) {
  const std::string t = "{{ tools is defined }} {{ tools | length if tools is defined else 0 }}";
  EXPECT_EQ(render_chat_template(t, nlohmann::json::array(), false, nlohmann::json::object()), "False 0");
  EXPECT_EQ(render_chat_template(t, nlohmann::json::array(), false, {{"tools", {1, 2}}}), "True 2");
}

TEST(ChatTemplate, GivesMessagesAddGenerationPromptAndTheExtraContext) {
  const std::string t =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}{% if enable_thinking is defined and enable_thinking is false %}"
      "(no think){% endif %}";
  nlohmann::json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(render_chat_template(t, messages, true, {{"bos_token", "<s>"}, {"enable_thinking", false}}),
            "<s>[user:hi]>(no think)");
  // messages and add_generation_prompt are the arguments', whatever the extra context says.
  EXPECT_EQ(render_chat_template(t, messages, false, {{"messages", nlohmann::json::array()}, {"add_generation_prompt", true}}),
            "[user:hi]");
}

TEST(ChatTemplate, RaiseExceptionBecomesAnInvalidConfigErrorWithTheMessage) {
  const std::string t = "ok\n{% if messages[0].role != 'user' %}{{ raise_exception('Roles must alternate!') }}{% endif %}";
  try {
    render_chat_template(t, {{{"role", "assistant"}, {"content", "x"}}}, false, nlohmann::json::object());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_EQ(std::string(e.what()), "chat template raised an exception: Roles must alternate! (chat template line 2:39)");
  }
  EXPECT_EQ(render_chat_template(t, {{{"role", "user"}, {"content", "x"}}}, false, nlohmann::json::object()), "ok\n");
}

TEST(ChatTemplate, ErrorsNameTheTemplateLine) {
  try {
    render_chat_template("a\n{{ messages | nosuch }}", nlohmann::json::array(), false, nlohmann::json::object());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "chat template line 2:15: unknown filter 'nosuch'");
  }
  try {
    render_chat_template("{{ messages[0].content + 1 }}", {{{"content", "x"}}}, false, nlohmann::json::object());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "chat template line 1:24: unsupported operand type(s) for +: 'str' and 'int'");
  }
  EXPECT_THROW(render_chat_template("x", nlohmann::json::array(), false, nlohmann::json::array()), Error);
}

TEST(ChatTemplate, StrftimeNowIsTodayAndDateStringPinsLlama32) {
  char year[8];
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(year, sizeof year, "%Y", &local);
  EXPECT_EQ(render_chat_template("{{ strftime_now('%Y') }}", nlohmann::json::array(), false, nlohmann::json::object()), year);

  const std::string llama = read_template("llama3_2.jinja");
  nlohmann::json messages = {{{"role", "user"}, {"content", " hi \n"}}};
  nlohmann::json extra = {{"bos_token", "<|begin_of_text|>"}, {"date_string", "26 Jul 2024"}};
  EXPECT_EQ(render_chat_template(llama, messages, true, extra),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  extra.erase("date_string");
  char today[32];
  std::strftime(today, sizeof today, "Today Date: %d %b %Y\n", &local);
  EXPECT_NE(render_chat_template(llama, messages, true, extra).find(today), std::string::npos);
}

}  // namespace
}  // namespace verl::text
