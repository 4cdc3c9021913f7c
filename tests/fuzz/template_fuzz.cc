// libFuzzer target for common/template: the sbatch script and container run lines are rendered
// from templates users may override (VERLCTL_TEMPLATE_DIR). Input: the template text, then (after
// a NUL) the variables as JSON; a fixed set of variables when that part is not a JSON object.
// render() and render_argv() throw verl::Error for a bad template, nothing else.
#include <string>

#include "common/error.h"
#include "common/template.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = verl::fuzz::split_input(data, size, 2);
  const verl::tmpl::Template t{"fuzz.tmpl", parts[0]};
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(parts.size() > 1 ? parts[1] : "", nullptr, false);
  if (!vars.is_object()) {
    vars = {{"name", "relt"},   {"nodes", 2},       {"gpus", 8},  {"exclusive", true}, {"empty", ""},
            {"list", {"a", "b c"}}, {"mounts", {{{"src", "/data"}, {"dst", "/mnt"}}, {{"src", "/x"}, {"dst", "/y"}}}},
            {"nested", {{"a", {{"b", "deep"}}}}}, {"none", nullptr}, {"pi", 3.5}};
  }
  try {
    (void)verl::tmpl::render(t, vars);
  } catch (const verl::Error&) {
  }
  try {
    const auto argv = verl::tmpl::render_argv(t, vars);
    for (const auto& a : argv) VERL_FUZZ_CHECK(a.find('\n') == std::string::npos);
  } catch (const verl::Error&) {
  }
  return 0;
}
