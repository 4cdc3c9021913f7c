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

namespace {

// A head's answer to GET path read into its message T; a body this verlctl cannot read is an
// error naming the head and the request.
template <typename T>
T read_answer(launcher::HeadClient& client, const std::string& path, const Json& body) {
  try {
    return launcher::wire::parse<T>(body);
  } catch (const launcher::wire::BadMessage& e) {
    throw Error(ExitCode::kFailure,
                "the head at " + client.address().str() + " answered GET " + path + " with a body this verlctl cannot read: " +
                    e.what(),
                "is the head another verlctl version? 'verlctl version' here and on the head's node");
  }
}

}  // namespace

launcher::wire::Job get_job(launcher::HeadClient& client, const std::string& id) {
  const std::string path = "/api/jobs/" + id;
  return read_answer<launcher::wire::Job>(client, path, client.get(path));
}

std::vector<launcher::wire::JobSummary> list_jobs(launcher::HeadClient& client) {
  const std::string path = "/api/jobs";
  const Json body = client.get(path);  // {jobs: [JobSummary]}
  return read_answer<std::vector<launcher::wire::JobSummary>>(client, path,
                                                               body.is_object() ? body.value("jobs", Json::array()) : body);
}

Json get_metric_rows(launcher::HeadClient& client, const std::string& id) {
  const std::string path = "/api/jobs/" + id + "/metrics";
  return read_answer<launcher::wire::Metrics>(client, path, client.get(path)).rows;
}

std::string format_failure(const launcher::wire::Job& job) {
  if (!job.failure.is_object()) return {};
  const Json& f = job.failure;
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

std::string progress_line(const launcher::wire::Job& job) {
  const launcher::wire::JobSummary& s = job.summary;
  std::string out = s.id + " " + to_string(s.state);
  if (s.step > 0 || s.total_steps > 0)
    out += " step " + std::to_string(s.step) + (s.total_steps > 0 ? "/" + std::to_string(s.total_steps) : "");
  const Json& m = job.latest_metrics;
  if (m.contains(metric_names::kScore)) out += " score " + number(m[metric_names::kScore]);
  if (job.eta_s) out += " ETA " + format_duration(*job.eta_s);
  if (job.pending_reason) out += " (" + *job.pending_reason + ")";
  return out;
}

std::string closing_summary(const launcher::wire::Job& job, const Json& rows) {
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

  if (job.placement.empty() || !job.placement[0].dir) return out;
  const std::string& dir = *job.placement[0].dir;
  out += "  job directory: " + dir + " (on " + job.placement[0].host + ")\n" +
         "  logs:          verlctl logs " + job.summary.id + " (files in " + dir + "/logs)\n";
  if (job.summary.kind != launcher::JobKind::kTrain || !job.config.is_object()) return out;
  const JobConfigView config(job.config);
  std::string ckpt = config.default_local_dir();
  if (ckpt.empty()) return out;
  if (ckpt[0] != '/') ckpt = dir + "/" + ckpt;
  // The trainer saves every save_freq steps and at the last one; <= 0 saves none (its log says so).
  const int64_t freq = config.save_freq();
  if (freq > 0) out += "  checkpoints:   " + ckpt + "\n";
  else out += "  checkpoints:   none saved (" + std::string(job_keys::kSaveFreq) + "=" + std::to_string(freq) + ")\n";
  return out;
}

void print_job(std::ostream& out, const launcher::wire::Job& j) {
  const launcher::wire::JobSummary& s = j.summary;
  out << s.id << " (" << to_string(s.kind) << "): " << to_string(s.state);
  if (s.restarts > 0) out << ", restarted " << s.restarts << "x";
  if (j.pending_reason) out << " (" << *j.pending_reason << ")";
  out << "\n";
  if (s.command) {
    // A command job (submit -- CMD) has no trainer steps: what each rank runs.
    out << "  command:  " << *s.command << "\n";
  } else {
    out << "  step:     " << s.step;
    if (s.total_steps > 0) out << "/" << s.total_steps << " (" << (100 * s.step / s.total_steps) << "%)";
    if (j.eta_s) out << ", ETA " << format_duration(*j.eta_s);
    out << "\n";
  }
  if (s.started_ms) {
    const int64_t end = s.ended_ms.value_or(0);
    out << "  started:  " << clock_time(*s.started_ms);
    if (end) out << ", ended " << clock_time(end) << " (" << format_duration((end - *s.started_ms) / 1000.0) << ")";
    out << "\n";
  }
  if (s.kind == launcher::JobKind::kTrain && j.config.is_object()) {
    // Role placement (common/role_placement.h): which of each node's GPUs every role uses.
    try {
      const RolePlacement roles = role_placement(j.config, JobConfigView(j.config).n_gpus_per_node());
      if (roles.named) out << "  roles:    " << roles.summary() << " (the job's GPUs on each node)\n";
    } catch (const Error&) {
      // a config the head accepted always parses; an older head's may not: no roles line
    }
  }
  for (const auto& p : j.placement) {
    out << "  rank " << p.rank << ":   " << p.node << " (" << p.host << ", " << p.device << ") " << to_string(p.state);
    if (p.dir) out << ", " << *p.dir;
    out << "\n";
  }
  const Json& trend = j.score_trend;
  if (!trend.empty())
    out << "  score:    " << sparkline(trend) << " " << number(trend.front()) << " -> " << number(trend.back()) << "\n";
  const Json& m = j.latest_metrics;
  if (!m.empty()) {
    out << "  metrics (step " << m.value("step", 0) << "):\n";
    for (const auto& [k, v] : m.items())
      if (k != "step") out << "    " << k << " = " << number(v) << "\n";
  }
  // Scaling health (launcher/scaling.h): one row per check, as the probes print theirs.
  if (j.scaling && j.scaling->contains("checks")) {
    out << "  scaling:\n";
    for (const auto& c : j.scaling->at("checks")) {
      out << "    " << c.value("status", std::string("?")) << "  " << c.value("name", std::string()) << " ("
          << c.value("threshold", std::string()) << "): " << c.value("reason", std::string()) << "\n";
      if (c.contains("try")) out << "          try: " << c["try"].get<std::string>() << "\n";
    }
  }
  // submit --nccl-debug: what NCCL chose per node (launcher/nccl_log.h).
  for (const auto& n : j.nccl.value_or(Json::array())) {
    out << "  nccl " << n.value("node", std::string()) << ": " << n.value("status", std::string("?")) << "  "
        << n.value("reason", std::string());
    if (n.value("coll_channels", -1) >= 0) out << "; " << n.value("coll_channels", -1) << " coll channels";
    std::string algos;
    for (const auto& a : n.value("algorithms", Json::array())) algos += (algos.empty() ? "" : "/") + a.get<std::string>();
    if (!algos.empty()) out << ", " << algos;
    out << "\n";
    if (n.contains("try")) out << "          try: " << n["try"].get<std::string>() << "\n";
  }
  for (const auto& e : j.events) out << "  " << clock_time(e.time_ms) << " " << e.state << " " << e.detail << "\n";
  const std::string failure = format_failure(j);
  if (!failure.empty()) out << "failure: " << failure;
}

launcher::wire::Job follow_logs(launcher::HeadClient& client, const std::string& job, std::ostream& out, const FollowOptions& o) {
  int64_t next = 0;
  bool first = true;
  auto last_job_poll = Clock::now() - std::chrono::hours(1);
  launcher::wire::Job last_job;
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
      last_job = get_job(client, job);
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
      return get_job(client, job);
    }
    if (lines.empty()) {
      for (int i = 0; i < 15 && !(o.interrupted && *o.interrupted); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace verl::cli
