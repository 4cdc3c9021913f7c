#include "cli/job_view.h"

#include <cmath>
#include <cstdio>
#include <thread>

#include "cli/output.h"
#include "common/error.h"
#include "common/job_config_view.h"
#include "common/role_placement.h"
#include "common/strings.h"
#include "launcher/wire.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string number(const Json& v) {
  if (!v.is_number()) return v.dump();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
  return buf;
}

}  // namespace

std::string log_prefix(const launcher::wire::LogLineView& l) { return "[rank " + std::to_string(l.rank) + " " + l.host + "] "; }

std::string sparkline(const Json& values) {
  static const char* kBars[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  if (!values.is_array() || values.empty()) return {};
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& v : values)
    if (v.is_number()) lo = std::min(lo, v.get<double>()), hi = std::max(hi, v.get<double>());
  std::string out;
  for (const auto& v : values) {
    if (!v.is_number()) continue;
    const int i = hi > lo ? static_cast<int>(std::lround((v.get<double>() - lo) / (hi - lo) * 7)) : 3;
    out += kBars[std::clamp(i, 0, 7)];
  }
  return out;
}

std::string format_failure(const Json& job) {
  if (!job.contains("failure") || !job["failure"].is_object()) return {};
  const Json& f = job["failure"];
  std::string out = f.value("reason", std::string("failed")) + "\n";
  // A failed job preflight (launcher/job_controller.h): every check that failed on that node.
  for (const auto& c : f.value("preflight", Json::array()))
    out += "  " + c.value("key", std::string()) + " " + c.value("path", std::string()) + ": " +
           c.value("detail", std::string()) + (c.contains("hint") ? "\n    hint: " + c.value("hint", std::string()) : "") + "\n";
  const Json lines = f.value("last_lines", Json::array());
  if (!lines.empty()) {
    out += "last lines of rank " + std::to_string(f.value("rank", 0)) + " (" + f.value("host", std::string("?")) + "):\n";
    for (const auto& l : lines) out += "  " + l.get<std::string>() + "\n";
  }
  return out;
}

std::string progress_line(const Json& job) {
  std::string out = job.value("id", std::string("?")) + " " + job.value("state", std::string("?"));
  const int64_t step = job.value("step", int64_t{0}), total = job.value("total_steps", int64_t{0});
  if (step > 0 || total > 0) out += " step " + std::to_string(step) + (total > 0 ? "/" + std::to_string(total) : "");
  const Json m = job.value("latest_metrics", Json::object());
  if (m.contains(metric_names::kScore)) out += " score " + number(m[metric_names::kScore]);
  if (job.contains("eta_s")) out += " ETA " + format_duration(job["eta_s"].get<double>());
  if (job.contains("pending_reason")) out += " (" + job["pending_reason"].get<std::string>() + ")";
  return out;
}

std::string closing_summary(const Json& job, const Json& rows) {
  std::string out;
  // The first and last rows that have the metric: "0.285 (step 0) -> 0.789 (step 300)".
  auto trend = [&](const char* key, bool first_too) {
    const Json* first = nullptr;
    const Json* last = nullptr;
    for (const auto& r : rows)
      if (r.contains(key) && r[key].is_number()) {
        if (!first) first = &r;
        last = &r;
      }
    if (!last) return std::string();
    auto at = [&](const Json* r) { return number((*r)[key]) + " (step " + std::to_string(r->value("step", int64_t{0})) + ")"; };
    return first_too && first != last ? at(first) + " -> " + at(last) : at(last);
  };
  const std::string val = trend(metric_names::kValScore, true), batch = trend(metric_names::kScore, false);
  if (!val.empty()) out += "  val/score:     " + val + "\n";
  if (!batch.empty()) out += "  last batch:    " + std::string(metric_names::kScore) + " " + batch + " (training rollouts)\n";

  const Json placement = job.value("placement", Json::array());
  if (placement.empty() || !placement[0].contains("dir")) return out;
  const std::string dir = placement[0]["dir"].get<std::string>();
  out += "  job directory: " + dir + " (on " + placement[0].value("host", std::string("?")) + ")\n" +
         "  logs:          verlctl logs " + job.value("id", std::string()) + " (files in " + dir + "/logs)\n";
  if (launcher::wire::parse<launcher::wire::JobSummary>(job).kind != launcher::JobKind::kTrain || !job.contains("config"))
    return out;
  const JobConfigView config(job.at("config"));
  std::string ckpt = config.default_local_dir();
  if (ckpt.empty()) return out;
  if (ckpt[0] != '/') ckpt = dir + "/" + ckpt;
  // The trainer saves every save_freq steps and at the last one; <= 0 saves none (its log says so).
  const int64_t freq = config.save_freq();
  if (freq > 0) out += "  checkpoints:   " + ckpt + "\n";
  else out += "  checkpoints:   none saved (" + std::string(job_keys::kSaveFreq) + "=" + std::to_string(freq) + ")\n";
  return out;
}

void print_job(std::ostream& out, const Json& j) {
  out << j.value("id", std::string("?")) << " (" << j.value("kind", std::string("?")) << "): "
      << j.value("state", std::string("?"));
  if (j.value("restarts", 0) > 0) out << ", restarted " << j.value("restarts", 0) << "x";
  if (j.contains("pending_reason")) out << " (" << j["pending_reason"].get<std::string>() << ")";
  out << "\n";
  const int64_t step = j.value("step", int64_t{0}), total = j.value("total_steps", int64_t{0});
  if (j.contains("command")) {
    // A command job (submit -- CMD) has no trainer steps: what each rank runs.
    out << "  command:  " << j["command"].get<std::string>() << "\n";
  } else {
    out << "  step:     " << step;
    if (total > 0) out << "/" << total << " (" << (100 * step / total) << "%)";
    if (j.contains("eta_s")) out << ", ETA " << format_duration(j["eta_s"].get<double>());
    out << "\n";
  }
  if (j.contains("started_ms")) {
    const int64_t end = j.contains("ended_ms") ? j["ended_ms"].get<int64_t>() : 0;
    out << "  started:  " << clock_time(j["started_ms"].get<int64_t>());
    if (end) out << ", ended " << clock_time(end) << " (" << format_duration((end - j["started_ms"].get<int64_t>()) / 1000.0) << ")";
    out << "\n";
  }
  if (j.value("kind", std::string()) == "train" && j.contains("config")) {
    // Role placement (common/role_placement.h): which of each node's GPUs every role uses.
    try {
      const RolePlacement roles = role_placement(j["config"], JobConfigView(j["config"]).n_gpus_per_node());
      if (roles.named) out << "  roles:    " << roles.summary() << " (the job's GPUs on each node)\n";
    } catch (const Error&) {
      // a config the head accepted always parses; an older head's may not: no roles line
    }
  }
  for (const auto& p : j.value("placement", Json::array())) {
    out << "  rank " << p.value("rank", 0) << ":   " << p.value("node", std::string("?")) << " (" << p.value("host", std::string("?"))
        << ", " << p.value("device", std::string("?")) << ") " << p.value("state", std::string("?"));
    if (p.contains("dir")) out << ", " << p["dir"].get<std::string>();
    out << "\n";
  }
  const Json trend = j.value("score_trend", Json::array());
  if (!trend.empty())
    out << "  score:    " << sparkline(trend) << " " << number(trend.front()) << " -> " << number(trend.back()) << "\n";
  const Json m = j.value("latest_metrics", Json::object());
  if (!m.empty()) {
    out << "  metrics (step " << m.value("step", 0) << "):\n";
    for (const auto& [k, v] : m.items())
      if (k != "step") out << "    " << k << " = " << number(v) << "\n";
  }
  // Scaling health (launcher/scaling.h): one row per check, as the probes print theirs.
  const Json scaling = j.value("scaling", Json::object());
  if (scaling.contains("checks")) {
    out << "  scaling:\n";
    for (const auto& c : scaling["checks"]) {
      out << "    " << c.value("status", std::string("?")) << "  " << c.value("name", std::string()) << " ("
          << c.value("threshold", std::string()) << "): " << c.value("reason", std::string()) << "\n";
      if (c.contains("try")) out << "          try: " << c["try"].get<std::string>() << "\n";
    }
  }
  // submit --nccl-debug: what NCCL chose per node (launcher/nccl_log.h).
  for (const auto& n : j.value("nccl", Json::array())) {
    out << "  nccl " << n.value("node", std::string()) << ": " << n.value("status", std::string("?")) << "  "
        << n.value("reason", std::string());
    if (n.value("coll_channels", -1) >= 0) out << "; " << n.value("coll_channels", -1) << " coll channels";
    std::string algos;
    for (const auto& a : n.value("algorithms", Json::array())) algos += (algos.empty() ? "" : "/") + a.get<std::string>();
    if (!algos.empty()) out << ", " << algos;
    out << "\n";
    if (n.contains("try")) out << "          try: " << n["try"].get<std::string>() << "\n";
  }
  for (const auto& e : j.value("events", Json::array()))
    out << "  " << clock_time(e.value("time_ms", int64_t{0})) << " " << e.value("state", std::string()) << " "
        << e.value("detail", std::string()) << "\n";
  const std::string failure = format_failure(j);
  if (!failure.empty()) out << "failure: " << failure;
}

Json follow_logs(launcher::HeadClient& client, const std::string& job, std::ostream& out, const FollowOptions& o) {
  int64_t next = 0;
  bool first = true;
  auto last_job_poll = Clock::now() - std::chrono::hours(1);
  Json last_job;
  const std::string rank = o.rank >= 0 ? "&rank=" + std::to_string(o.rank) : "";
  auto print_line = [&](const launcher::wire::LogLineView& l) {
    if (o.json_lines) out << Json(l).dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    else out << log_prefix(l) << l.text << "\n";
  };
  auto get_page = [&](const std::string& path) { return launcher::wire::parse<launcher::wire::LogsPage>(client.get(path)); };
  for (;;) {
    if (o.interrupted && *o.interrupted)
      throw Error(ExitCode::kInterrupted, "interrupted; " + job + " keeps running",
                  "'verlctl stop " + job + "' stops it, 'verlctl logs " + job + " -f' follows it again");
    std::string path = "/api/jobs/" + job + "/logs?after=" + std::to_string(next) + "&limit=2000" + rank;
    if (first && o.tail >= 0) path = "/api/jobs/" + job + "/logs?tail=" + std::to_string(o.tail) + rank;
    first = false;
    const auto page = get_page(path);
    const auto& lines = page.lines;
    if (!lines.empty() && o.before_lines) o.before_lines();
    for (const auto& l : lines) print_line(l);
    out.flush();
    if (!lines.empty() && o.after_lines) o.after_lines();
    next = std::max(next, page.next);
    const bool done = page.done && (o.tail >= 0 || lines.size() < 2000);
    if (Clock::now() - last_job_poll >= std::chrono::seconds(2) || done || !o.follow) {
      last_job = client.get("/api/jobs/" + job);
      last_job_poll = Clock::now();
      if (o.on_job) o.on_job(last_job);
    }
    if (!o.follow) return last_job;
    if (done) {
      // The tail call's "done" covers lines up to now; anything after next was printed above.
      const auto rest = get_page("/api/jobs/" + job + "/logs?after=" + std::to_string(next) + "&limit=10000" + rank);
      const auto& last = rest.lines;
      if (!last.empty() && o.before_lines) o.before_lines();
      for (const auto& l : last) print_line(l);
      out.flush();
      if (!last.empty() && o.after_lines) o.after_lines();
      return client.get("/api/jobs/" + job);
    }
    if (lines.empty()) {
      for (int i = 0; i < 15 && !(o.interrupted && *o.interrupted); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace verl::cli
