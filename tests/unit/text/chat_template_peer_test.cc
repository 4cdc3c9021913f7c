// The peer check of render_chat_template: Hugging Face's JS Jinja (@huggingface/jinja) rendered real
// chat templates for a seeded set of conversations (tests/peers/render_chat.mjs); we render the
// same cases and must produce the same text, and refuse where it refused: once with the keys in the
// order the peer saw them (render_chat_template_ordered) and once through nlohmann::json, which
// sorts them (render_chat_template, against the peer's rendering of a sorted copy).
// tests/integration/chat_template_peer_test.sh produces the file and runs this with
// VERL_CHAT_PEER_JSONL=<file>; without it (a plain unit run) the test skips.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/chat_template.h"

namespace verl::text {
namespace {

// Where two texts part, with some context on both sides, escaped so that newlines show.
std::string show_difference(const std::string& want, const std::string& got) {
  size_t at = 0;
  while (at < want.size() && at < got.size() && want[at] == got[at]) ++at;
  auto window = [&](const std::string& s) {
    size_t from = at > 40 ? at - 40 : 0;
    return nlohmann::json(s.substr(from, 120)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::ostringstream out;
  out << "first difference at byte " << at << " (peer " << want.size() << " bytes, ours " << got.size() << ")\n"
      << "    peer: ..." << window(want) << "\n"
      << "    ours: ..." << window(got);
  return out.str();
}

struct Tally {
  int cases = 0;
  int mismatches = 0;
};

TEST(ChatTemplatePeer, RendersAsHuggingFaceJinjaDoes) {
  const char* path = std::getenv("VERL_CHAT_PEER_JSONL");
  if (!path || !*path)
    GTEST_SKIP() << "VERL_CHAT_PEER_JSONL is not set: tests/integration/chat_template_peer_test.sh runs this";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;

  std::map<std::string, std::string> sources;
  std::map<std::string, Tally> tally;
  int shown = 0;
  const char* show = std::getenv("VERL_CHAT_PEER_SHOW");  // how many mismatches to print (8)
  const int kShowAtMost = show && *show ? std::atoi(show) : 8;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line);
    if (row["kind"] == "template") {
      sources[row["name"]] = row["source"];
      continue;
    }
    const std::string name = row["template"];
    ASSERT_TRUE(sources.count(name)) << "case before its template: " << name;
    Tally& t = tally[name];
    ++t.cases;
    // Twice: with the keys in the order the peer saw them (render_chat_template_ordered), and
    // through nlohmann::json, which sorts them (render_chat_template; the peer rendered a sorted
    // copy as text_sorted).
    nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(line)["context"];
    const bool add_generation_prompt = ordered["add_generation_prompt"];
    nlohmann::ordered_json ordered_messages = ordered["messages"];
    ordered.erase("messages");
    ordered.erase("add_generation_prompt");
    nlohmann::json messages = row["context"]["messages"];
    nlohmann::json context = row["context"];
    context.erase("messages");
    context.erase("add_generation_prompt");

    const bool peer_failed = row.contains("error");
    std::string problem;
    for (bool sorted : {false, true}) {
      std::string ours, our_error;
      try {
        ours = sorted ? render_chat_template(sources[name], messages, add_generation_prompt, context)
                      : render_chat_template_ordered(sources[name], ordered_messages, add_generation_prompt, ordered);
      } catch (const Error& e) {
        our_error = e.what();
      }
      const char* key = sorted && row.contains("text_sorted") ? "text_sorted" : "text";
      const std::string how = sorted ? " (keys sorted)" : "";
      if (peer_failed && our_error.empty()) {
        problem = "the peer refused (" + row["error"].get<std::string>() + ") but we rendered" + how + ":\n    " +
                  nlohmann::json(ours).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } else if (!peer_failed && !our_error.empty()) {
        problem = "the peer rendered but we refused" + how + ": " + our_error;
      } else if (!peer_failed && ours != row[key].get<std::string>()) {
        problem = show_difference(row[key], ours) + how;
      }
      if (!problem.empty()) break;
    }
    if (problem.empty()) continue;
    ++t.mismatches;
    if (shown++ < kShowAtMost) {
      ADD_FAILURE() << name << " case " << t.cases << ": " << problem << "\n    add_generation_prompt="
                    << add_generation_prompt << " context=" << ordered.dump().substr(0, 400)
                    << "\n    messages=" << ordered_messages.dump().substr(0, 1500);
    }
  }
  int total = 0, mismatches = 0;
  for (const auto& [name, t] : tally) {
    // A corpus of many one-case templates (the snippets) reports only its failures.
    if (tally.size() <= 20 || t.mismatches)
      std::cout << "[ peer     ] " << name << ": " << t.cases << " cases, " << t.mismatches << " mismatches\n";
    total += t.cases;
    mismatches += t.mismatches;
  }
  std::cout << "[ peer     ] all: " << tally.size() << " templates, " << total << " cases, " << mismatches
            << " mismatches\n";
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(total, 0) << "no cases in " << path;
}

}  // namespace
}  // namespace verl::text
