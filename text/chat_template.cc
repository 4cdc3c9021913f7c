// TEMPORARY stub on the `tok` branch, to be replaced by the chat-template branch's implementation.
#include "text/chat_template.h"

#include "common/error.h"

namespace verl::text {

std::string render_chat_template(const std::string&, const nlohmann::json&, bool, const nlohmann::json&) {
  throw Error{ExitCode::kFailure, "chat templates: not merged yet", ""};
}

}  // namespace verl::text
