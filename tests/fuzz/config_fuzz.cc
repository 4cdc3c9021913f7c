// libFuzzer target for common/config: YAML text <- dotted overrides -> interpolation ->
// validation, as `config validate` and the head's submit run it. Input: the YAML, then up to 8
// overrides, NUL-separated; YAML starting with "# cluster" is resolved as a cluster spec.
// resolve_text() promises to report problems as issues, never to throw (verl::Error only when a
// file cannot be read): any other exception, crash or sanitizer report is a finding.
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = verl::fuzz::split_input(data, size, 9);
  const std::string yaml = parts[0];
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  const auto kind = yaml.rfind("# cluster", 0) == 0 ? verl::config::Kind::kCluster : verl::config::Kind::kJob;
  const auto doc = verl::config::resolve_text(kind, yaml, "fuzz.yaml", overrides);
  (void)verl::config::format_issues(doc.issues);
  if (doc.ok()) {
    // What the head stores and ships to the ranks: it must render and read back.
    const std::string text = verl::config::to_yaml(doc.value);
    (void)doc.value.dump(-1, ' ', false, verl::config::Json::error_handler_t::strict);
    const auto again = verl::config::resolve_text(kind, text, "again.yaml", {});
    (void)again;
  }
  return 0;
}
