// libFuzzer target for launcher/wire.h: the head's request bodies, per endpoint, through the
// same typed messages the handlers read (no HTTP server). Input: the endpoint (first byte), then
// the body. What the head answers with a 400 is wire::BadMessage (or nlohmann's exception from
// parse_body); any other exception, crash or sanitizer report (a 1e300 converted to int) is a finding.
#include <stdexcept>
#include <string>

#include "launcher/wire.h"
#include "tests/fuzz/fuzz_input.h"

namespace wire = verl::launcher::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  wire::Json j;
  try {
    j = wire::parse_body(body);
  } catch (const std::invalid_argument&) {
    return 0;
  } catch (const nlohmann::json::exception&) {
    // parse_error, or out_of_range for a number past a double (found by this target: 1e555...;
    // the head's handler answers every nlohmann exception with a 400).
    return 0;
  }
  // The messages throw BadMessage only: a nlohmann type_error here would be a check they lack
  // (j.get<T>(), not wire::parse<T>, which would turn it into a BadMessage).
  try {
    switch (data[0] % 10) {
      case 0: {
        const auto r = j.get<wire::Register>();
        VERL_FUZZ_CHECK(!r.name.empty() && r.pid >= 0 && r.resources.cpus >= 0 && r.resources.gpus >= 0);
        break;
      }
      case 1: {
        const auto h = j.get<wire::Heartbeat>();
        (void)wire::Json(h).dump();
        break;
      }
      case 2: (void)j.get<wire::Leave>(); break;
      case 3: {
        const double g = j.get<wire::Stop>().grace_s;
        VERL_FUZZ_CHECK(g >= 0 && g <= 3600);
        break;
      }
      case 4: {
        const auto l = j.get<wire::Logs>();
        VERL_FUZZ_CHECK(l.rank >= 0 && l.attempt >= 0);
        for (const auto& c : l.chunks) VERL_FUZZ_CHECK(c.offset >= 0);
        break;
      }
      case 5: (void)j.get<wire::Result>().result.dump(); break;
      case 6: (void)j.get<wire::Metrics>().rows.dump(); break;
      case 7: {  // POST /api/jobs
        const auto s = j.get<wire::Submit>();
        if (s.command) {
          const auto& c = *s.command;
          VERL_FUZZ_CHECK(!c.spec.argv.empty() && c.spec.ranks_per_node >= 0 &&
                          static_cast<int64_t>(c.working_dir_tar.size()) <= verl::launcher::kMaxWorkingDirBytes);
          (void)wire::Json(c.spec).dump();
        }
        (void)wire::Json(s).dump();
        break;
      }
      case 8: {  // what an agent reads back
        const auto a = j.get<wire::HeartbeatReply>();
        for (const auto& o : a.tasks) VERL_FUZZ_CHECK(o.rank >= 0 && o.attempt >= 0 && o.grace_s >= 0);
        (void)wire::Json(a).dump();
        break;
      }
      case 9: (void)wire::Json(j.get<wire::JobSummary>()).dump(); break;
    }
  } catch (const wire::BadMessage&) {
  }
  return 0;
}
