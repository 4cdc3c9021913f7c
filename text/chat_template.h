// Chat templates: HF's Jinja chat templates rendered for a message list.
// TEMPORARY on the `tok` branch: the declaration the HF tokenizer calls; the real header and its
// implementation (text/jinja.*, text/chat_template.*) come from the chat-template branch, which
// replaces this file and text/chat_template.cc.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace verl::text {
// Renders a HF chat template (Jinja) for messages; throws verl::Error naming the template line on error.
std::string render_chat_template(const std::string& source, const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_context);
}  // namespace verl::text
