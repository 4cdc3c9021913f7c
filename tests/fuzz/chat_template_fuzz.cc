// libFuzzer target for text/jinja + text/chat_template: a model's chat template (the Jinja text
// of tokenizer_config.json) rendered as apply_chat_template does. Input: the template, then
// (after a NUL) the messages as JSON; fixed messages when that part is not a JSON array. A bad
// template or a raise_exception() is a verl::Error; anything else is a finding.
#include <string>

#include "common/error.h"
#include "tests/fuzz/fuzz_input.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = verl::fuzz::split_input(data, size, 2);
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::parse(parts.size() > 1 ? parts[1] : "", nullptr, false);
  if (!messages.is_array()) {
    messages = nlohmann::ordered_json::array(
        {{{"role", "system"}, {"content", "You are helpful."}},
         {{"role", "user"}, {"content", "What is 2+2? ünïcödé 漢字"}},
         {{"role", "assistant"},
          {"content", "4"},
          {"tool_calls", {{{"type", "function"}, {"function", {{"name", "add"}, {"arguments", {{"a", 2}, {"b", 2}}}}}}}}},
         {{"role", "tool"}, {"content", "4"}},
         {{"role", "user"}, {"content", ""}}});
  }
  const nlohmann::ordered_json extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<pad>"},
                                        {"unk_token", "<unk>"}, {"enable_thinking", false},
                                        {"tools", {{{"type", "function"}, {"function", {{"name", "add"}}}}}}};
  try {
    (void)verl::text::render_chat_template_ordered(parts[0], messages, (size & 1) != 0, extra);
  } catch (const verl::Error&) {
  }
  return 0;
}
