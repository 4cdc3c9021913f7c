// libFuzzer target for launcher/head_requests: the head's request bodies, per endpoint, through
// the same functions the handlers call (no HTTP server). Input: the endpoint (first byte), then
// the body. What the head answers with a 400 is std::invalid_argument (or nlohmann's exception
// from parse_body); any other exception, crash or sanitizer report (a 1e300 converted to int) is a finding.
#include <stdexcept>
#include <string>

#include "launcher/head_requests.h"
#include "tests/fuzz/fuzz_input.h"

namespace rq = verl::launcher::requests;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  rq::Json j;
  try {
    j = rq::parse_body(body);
  } catch (const std::invalid_argument&) {
    return 0;
  } catch (const nlohmann::json::exception&) {
    // parse_error, or out_of_range for a number past a double (found by this target: 1e555...;
    // the head's handler answers every nlohmann exception with a 400).
    return 0;
  }
  // The typed parsers throw std::invalid_argument only: a nlohmann type_error here would be a
  // check they lack.
  try {
    switch (data[0] % 8) {
      case 0: {
        const auto r = rq::parse_register(j);
        VERL_FUZZ_CHECK(!r.name.empty() && r.pid >= 0 && r.resources.cpus >= 0 && r.resources.gpus >= 0);
        break;
      }
      case 1: {
        const auto h = rq::parse_heartbeat(j);
        (void)rq::to_json(h.tasks).dump();
        break;
      }
      case 2: (void)rq::parse_leave_reason(j); break;
      case 3: {
        const double g = rq::parse_stop_grace(j);
        VERL_FUZZ_CHECK(g >= 0 && g <= 3600);
        break;
      }
      case 4: {
        const auto l = rq::parse_logs(j);
        VERL_FUZZ_CHECK(l.rank >= 0 && l.attempt >= 0);
        for (const auto& c : l.chunks) VERL_FUZZ_CHECK(c.offset >= 0);
        break;
      }
      case 5: (void)rq::parse_result(j).result.dump(); break;
      case 6: (void)rq::parse_metrics_rows(j).dump(); break;
      case 7: {  // POST /api/jobs, kind command
        const auto c = rq::parse_submit_command(j);
        VERL_FUZZ_CHECK(!c.spec.argv.empty() && c.spec.ranks_per_node >= 0 &&
                        static_cast<int64_t>(c.working_dir_tar.size()) <= verl::launcher::kMaxWorkingDirBytes);
        (void)rq::Json(c.spec).dump();
        break;
      }
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
