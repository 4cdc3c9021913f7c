// libFuzzer target for launcher/log_chunks: the agent's cutter of a rank's log into chunks.
// Checks the promises of log_chunks.h on any bytes: a chunk ends within the data, a full chunk
// ends after a newline when it has one, a non-final chunk never ends inside a UTF-8 sequence, and
// sanitize_utf8 keeps the length and leaves valid UTF-8.
#include <string>

#include "common/strings.h"
#include "launcher/log_chunks.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool full = data[0] & 1, final = data[0] & 2;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t end = verl::launcher::chunk_end(text, full, final);
  VERL_FUZZ_CHECK(end <= text.size());
  if (!final && !text.empty()) {
    // The chunk's own bytes sanitized must be the same bytes the whole stream sanitized would
    // give there: the cut never splits a sequence that the rest completes.
    std::string head = text.substr(0, end), whole = text;
    verl::launcher::sanitize_utf8(head);
    verl::launcher::sanitize_utf8(whole);
    VERL_FUZZ_CHECK(whole.compare(0, end, head) == 0);
  }
  if (full && !final) {
    const size_t nl = text.rfind('\n');
    if (nl != std::string::npos) VERL_FUZZ_CHECK(end == nl + 1);
  }
  const size_t n = text.size();
  verl::launcher::sanitize_utf8(text);
  VERL_FUZZ_CHECK(text.size() == n);
  VERL_FUZZ_CHECK(verl::invalid_utf8_at(text) == std::string::npos);
  return 0;
}
