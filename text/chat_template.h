// render_chat_template is Hugging Face's apply_chat_template(messages, tokenize=False) in C++: it
// renders a model's chat template (the Jinja text of tokenizer_config.json's chat_template) with
// the globals transformers gives it: messages, add_generation_prompt, raise_exception(msg),
// strftime_now(fmt), and whatever the caller adds (bos_token, eos_token, tools, enable_thinking,
// date_string, ...). Jinja semantics are text/jinja.h's: trim_blocks and lstrip_blocks on.
//
// Parsed templates are cached by their text (a few at most), so rendering the same template for
// every sample parses it once. Thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace verl::text {

// Renders a HF chat template (Jinja) for messages; throws verl::Error naming the template line on error.
// extra_context is an object merged into the template's globals (bos_token, eos_token, pad_token,
// unk_token as strings; optionally tools, enable_thinking, date_string, ...); a name it shares with
// messages or add_generation_prompt is overridden by those. `tools` stays undefined unless given.
// A raise_exception() in the template throws verl::Error (invalid config) with its message.
std::string render_chat_template(const std::string& source, const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_context);

// The same, with messages and context as nlohmann::ordered_json: dicts keep the order they were
// given in (Python's), so `tojson` prints a tool's schema or a call's arguments in its file's key
// order, as transformers does; nlohmann::json's objects are sorted by key.
std::string render_chat_template_ordered(const std::string& source, const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt, const nlohmann::ordered_json& extra_context);

}  // namespace verl::text
