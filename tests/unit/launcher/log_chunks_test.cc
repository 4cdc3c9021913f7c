// Log chunks keep their byte length and are valid UTF-8, so that offsets at the head never skip
// bytes: the path from a rank's file through chunk_end, sanitize_utf8, JSON and the job store.
#include "launcher/log_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/job_store.h"

namespace verl::launcher {
namespace {

// A rank's log as the agent ships it: the rank writes `grow` bytes between two ticks (and then
// ends); each tick the agent reads what is new, cuts it by chunk_end, sanitizes it, sends it
// as JSON (dumped the way HeadClient does) and the head appends it by offset.
std::vector<std::string> shipped_lines(const std::string& file, size_t grow) {
  JobStore store(":memory:");
  JobRecord j;
  j.kind = JobKind::kTrain;
  j.config = nlohmann::ordered_json::object();
  const auto job = store.create(j, 1).id;
  int64_t offset = 0;
  size_t written = 0;
  const auto size = static_cast<int64_t>(file.size());
  for (int tick = 0; tick < 1000; ++tick) {
    written = std::min(file.size(), written + grow);
    const bool ended = written == file.size();
    std::string data = file.substr(static_cast<size_t>(offset), written - static_cast<size_t>(offset));
    const bool final = ended && offset + static_cast<int64_t>(data.size()) >= size;
    data.resize(chunk_end(data, /*full=*/false, final));
    sanitize_utf8(data);
    const bool last = final && offset + static_cast<int64_t>(data.size()) >= size;
    const nlohmann::ordered_json body = {{"data", data}};
    const auto sent = nlohmann::ordered_json::parse(
        body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    store.append_log(job, 0, 0, "h", "stderr", offset, sent["data"].get<std::string>(), last);
    offset += static_cast<int64_t>(data.size());
    if (last) break;
  }
  std::vector<std::string> out;
  for (const auto& l : store.log_lines(job, -1, 0, 100)) out.push_back(l.text);
  return out;
}

TEST(LogChunks, AnInvalidByteCostsNoOtherByte) {
  const std::string file = "\xe9" "abc\nstep 2\n\xff\xfe tail\n";
  for (size_t grow : {1u, 2u, 3u, 5u, 64u})
    EXPECT_EQ(shipped_lines(file, grow), (std::vector<std::string>{"?abc", "step 2", "?? tail"})) << "growing by " << grow;
}

TEST(LogChunks, ACharacterSplitAcrossReadsArrivesWhole) {
  const std::string file = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\nok\n";  // café € 😀
  for (size_t grow : {1u, 2u, 3u, 4u, 7u})
    EXPECT_EQ(shipped_lines(file, grow), (std::vector<std::string>{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "ok"}))
        << "growing by " << grow;
}

TEST(LogChunks, ARankThatDiesInsideACharacterLosesOnlyThatCharacter) {
  EXPECT_EQ(shipped_lines("done\nhalf \xe2\x82", 4), (std::vector<std::string>{"done", "half ??"}));
}

}  // namespace
}  // namespace verl::launcher
