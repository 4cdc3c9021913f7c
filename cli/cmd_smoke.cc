// `verlctl smoke`: the whole path a user takes, as one check for CI: a local cluster of its own
// (a name and free ports of its own, so it never touches the user's), the local preflight
// probes, a short seeded default job submitted through the head's API, then checks that the job
// succeeded, that its validation score moved and that its metrics carry every verl name the
// trainer must emit; the cluster is taken down at the end whatever happened (also on Ctrl-C).
// Exit 0 only when every check held; otherwise the first failing check is named (exit 5, or
// 130 when interrupted). --junit FILE writes a JUnit XML report: one testcase per check, with
// its time and, for a failure, the message.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/app.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "common/error.h"
#include "common/files.h"
#include "common/job_config_view.h"
#include "common/ports.h"
#include "common/process.h"
#include "common/strings.h"
#include "launcher/cluster.h"
#include "launcher/cluster_state.h"
#include "launcher/head_client.h"
#include "launcher/signals.h"
#include "launcher/wire.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The default smoke job: the embedded default job, shortened. Its SFT warm start takes the
// held-out val score from ~0 to ~0.29 before PPO; PPO then moves it further within a few steps.
// Seeded (the job's own seeds), so a run repeats itself on one build and thread count.
const std::vector<std::string> kDefaultJob = {"trainer.total_training_steps=12", "trainer.test_freq=6",
                                              "trainer.val_before_train=true", "trainer.save_freq=-1"};


struct SmokeArgs {
  int local = 1;
  std::string name;
  std::string junit;
  double timeout_s = 600;
  double min_score_gain = 0.05;
  std::vector<std::string> overrides;
};

struct CheckResult {
  std::string name;
  double seconds = 0;
  enum class Outcome { kPassed, kFailed, kSkipped } outcome = Outcome::kPassed;
  std::string message;  // failure or skip reason
  std::string detail;   // what it saw (system-out)
};

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') o += ' ';
        else o += c;
    }
  }
  return o;
}

// JUnit's time attribute: seconds without a unit.
std::string seconds_str(double s) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << s;
  return o.str();
}

std::string junit_xml(const std::vector<CheckResult>& checks, double total_s, const std::string& timestamp) {
  int failures = 0, skipped = 0;
  for (const auto& c : checks) {
    failures += c.outcome == CheckResult::Outcome::kFailed;
    skipped += c.outcome == CheckResult::Outcome::kSkipped;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites name=\"verlctl smoke\" tests=\"" << checks.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << seconds_str(total_s) << "\">\n"
    << "  <testsuite name=\"verlctl.smoke\" tests=\"" << checks.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << seconds_str(total_s) << "\" timestamp=\"" << timestamp
    << "\">\n";
  for (const auto& c : checks) {
    x << "    <testcase classname=\"verlctl.smoke\" name=\"" << xml_escape(c.name) << "\" time=\"" << seconds_str(c.seconds)
      << "\"";
    if (c.outcome == CheckResult::Outcome::kPassed && c.detail.empty()) {
      x << "/>\n";
      continue;
    }
    x << ">\n";
    if (c.outcome == CheckResult::Outcome::kFailed)
      x << "      <failure message=\"" << xml_escape(c.message) << "\" type=\"check\">" << xml_escape(c.message)
        << "</failure>\n";
    else if (c.outcome == CheckResult::Outcome::kSkipped)
      x << "      <skipped message=\"" << xml_escape(c.message) << "\"/>\n";
    if (!c.detail.empty()) x << "      <system-out>" << xml_escape(c.detail) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

// A check that did not hold: its message goes into the report.
struct CheckFailed {
  std::string message;
};

class Smoke {
 public:
  explicit Smoke(std::ostream& err) : err_(err) {}

  // Runs one check unless an earlier one that it needs failed; its time, outcome and message
  // go into the report. verl::Error and CheckFailed fail it; an interrupt is passed on.
  void check(const std::string& name, bool needs_previous, const std::function<std::string()>& body) {
    CheckResult r;
    r.name = name;
    if (needs_previous && !first_failure_.empty()) {
      r.outcome = CheckResult::Outcome::kSkipped;
      r.message = "not run: '" + first_failure_ + "' failed";
      results_.push_back(r);
      return;
    }
    const auto t0 = Clock::now();
    err_ << "smoke: " << name << " ...\n";
    try {
      r.detail = body();
    } catch (const CheckFailed& f) {
      r.outcome = CheckResult::Outcome::kFailed;
      r.message = f.message;
    } catch (const Error& e) {
      if (e.code() == ExitCode::kInterrupted) interrupted_ = true;
      r.outcome = CheckResult::Outcome::kFailed;
      r.message = std::string(e.what()) + (e.hint().empty() ? "" : " (hint: " + e.hint() + ")");
    } catch (const std::exception& e) {
      r.outcome = CheckResult::Outcome::kFailed;
      r.message = e.what();
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    err_ << "smoke: " << name << ": "
         << (r.outcome == CheckResult::Outcome::kPassed ? "ok" : "FAILED: " + r.message) << " ("
         << format_seconds(r.seconds, 3) << ")\n";
    if (r.outcome == CheckResult::Outcome::kFailed && first_failure_.empty()) first_failure_ = name;
    results_.push_back(r);
  }

  const std::vector<CheckResult>& results() const { return results_; }
  const std::string& first_failure() const { return first_failure_; }
  bool interrupted() const { return interrupted_; }

 private:
  std::ostream& err_;
  std::vector<CheckResult> results_;
  std::string first_failure_;
  bool interrupted_ = false;
};

void throw_if_interrupted(const std::atomic<bool>& stop) {
  if (stop) throw Error(ExitCode::kInterrupted, "interrupted", "the cluster is taken down all the same");
}

// The first failing message of the rows' metric check, or empty.
std::string missing_metrics(const Json& rows, int64_t total_steps) {
  std::ostringstream why;
  int64_t last = -1;
  for (const auto& r : rows) {
    const int64_t step = r.value("step", int64_t{-1});
    last = std::max(last, step);
    const bool val_row = r.contains(metric_names::kValScore);
    if (step >= 1) {
      for (const auto& k : metric_names::ppo_step())
        if (!r.contains(k) || !r[k].is_number()) {
          why << "step " << step << " lacks " << k;
          return why.str();
        }
    }
    if (val_row)
      for (const auto& k : metric_names::validation())
        if (!r.contains(k) || !r[k].is_number()) {
          why << "the validation at step " << step << " lacks " << k;
          return why.str();
        }
  }
  if (last != total_steps) {
    why << "the last metrics row is step " << last << ", not " << total_steps;
    return why.str();
  }
  return {};
}

}  // namespace

void register_smoke(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<SmokeArgs>();
  auto* cmd = app.add_subcommand(
      "smoke", "Check the whole path on this machine: up, probe, a short job, its score and metrics, down");
  cmd->add_option("--local", a->local, "Agents of the smoke cluster on this machine")
      ->check(CLI::Range(1, 64))
      ->default_str("1");
  cmd->add_option("--name", a->name, "The smoke cluster's name (default: smoke-<pid>, never the user's cluster)");
  cmd->add_option("--junit", a->junit, "Write a JUnit XML report to FILE (one testcase per check)");
  cmd->add_option("--timeout", a->timeout_s, "Seconds the job may take before its check fails")
      ->check(CLI::PositiveNumber)
      ->default_str("600");
  cmd->add_option("--min-score-gain", a->min_score_gain,
                  "How much val/score/mean must rise from the first validation to the last")
      ->default_str("0.05");
  cmd->add_option("overrides", a->overrides, "Job config overrides on top of the smoke job: key.path=value");
  cmd->footer(
      "Checks, in order: up, probe, submit, job succeeded, score moved, metrics complete, down.\n"
      "Exit 0 when all held; else 5 naming the first that failed (130 when interrupted).\n"
      "Examples:\n  verlctl smoke\n  verlctl smoke --junit smoke.xml\n"
      "  verlctl smoke --local 2 trainer.nnodes=2 --junit reports/smoke.xml\n"
      "  verlctl smoke trainer.total_training_steps=30 --min-score-gain 0.1");
  cmd->callback([&ctx, a] {
    auto& err = *ctx.err;
    const auto& stop = launcher::install_stop_flag();
    const auto t_start = Clock::now();
    const std::time_t wall = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::gmtime(&wall));
    const std::string name = a->name.empty() ? "smoke-" + std::to_string(::getpid()) : a->name;
    const std::string exe = process::self_exe();
    Smoke smoke(err);
    bool started = false;
    std::unique_ptr<launcher::HeadClient> client;
    std::string job_id;
    launcher::wire::Job job;
    Json rows = Json::array(), val = Json::array();

    smoke.check("up", false, [&] {
      launcher::UpOptions o;
      o.local_nodes = a->local;
      o.name = name;
      o.exe = exe;
      o.overrides = {"head.dashboard_port=" + std::to_string(free_tcp_port()),
                     "head.store_port=" + std::to_string(free_tcp_port())};
      const auto r = launcher::bring_up(o, err, &stop);
      if (r.outcome == launcher::UpOutcome::kAlreadyUp)
        throw CheckFailed{"a cluster named '" + name + "' is up already; smoke needs its own (--name)"};
      started = true;
      TargetArgs target;
      target.name = name;
      target.by_name = true;  // its own cluster, never $VERLCTL_ADDRESS's
      client = connect(find_head(target));
      const Json nodes = client->get("/api/nodes").value("nodes", Json::array());
      int alive = 0;
      for (const auto& n : nodes)
        alive += launcher::wire::parse<launcher::wire::NodeView>(n).state == launcher::NodeState::kAlive;
      if (alive != a->local)
        throw CheckFailed{std::to_string(alive) + " of " + std::to_string(a->local) + " nodes alive after up"};
      return "head " + r.state.head_host + ":" + std::to_string(r.state.head_port) + ", " + std::to_string(alive) +
             " nodes alive";
    });

    smoke.check("probe", true, [&] {
      // The local preflight probes, judged against the smoke cluster's spec; a probe that fails
      // its threshold fails the smoke (exit 5 from probe), a warning does not.
      process::Options po;
      po.timeout = std::chrono::seconds(120);
      const std::string spec = launcher::StatePaths(files::state_dir(name, /*create=*/false)).spec();
      const auto r = process::run({exe, "probe", "--local", "-f", spec, "--tcp-mib", "64", "-o", "json"}, po);
      throw_if_interrupted(stop);
      if (r.exit_code != 0) {
        std::string failed;
        try {
          for (const auto& row : Json::parse(r.out).value("rows", Json::array()))
            if (row.value("status", std::string()) == "fail")
              failed += (failed.empty() ? "" : ", ") + row.value("probe", std::string("?")) + " " +
                        row.value("metric", std::string()) + ": " + row.value("detail", std::string());
        } catch (const std::exception&) {  // no JSON table (it failed before one): its stderr says why, below
          failed.clear();
        }
        throw CheckFailed{"verlctl probe --local exited " + std::to_string(r.exit_code) +
                          (failed.empty() ? ": " + r.err.substr(0, 400) : " (failed: " + failed + ")")};
      }
      return r.out;
    });

    smoke.check("submit", true, [&] {
      launcher::wire::Submit submit;
      submit.kind = launcher::JobKind::kTrain;
      submit.overrides.assign(std::begin(kDefaultJob), std::end(kDefaultJob));
      submit.overrides.insert(submit.overrides.end(), a->overrides.begin(), a->overrides.end());
      const Json request = submit;
      const launcher::HeadResponse r = client->try_request("POST", "/api/jobs", &request);
      if (!r.answered()) throw CheckFailed{"the head at " + client->address().str() + " does not answer: " + r.unreachable};
      if (r.status != 201) {
        // A config the head refuses: its issues, each with the key path, are the message.
        const Json& b = r.body;
        const bool obj = b.is_object();
        throw CheckFailed{"POST /api/jobs answered " + std::to_string(r.status) + ": " +
                          (obj ? b.value("error", std::string()) : std::string()) +
                          (obj && b.contains("text") ? "\n" + b.value("text", std::string()) : std::string())};
      }
      launcher::wire::JobRef answer;
      try {
        answer = launcher::wire::parse<launcher::wire::JobRef>(r.body);
      } catch (const launcher::wire::BadMessage& e) {
        throw CheckFailed{"the head answered no job: " + std::string(e.what()) + ": " + r.body.dump()};
      }
      job_id = answer.id;
      return job_id + " " + to_string(answer.state);
    });

    smoke.check("job succeeded", true, [&] {
      const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(a->timeout_s * 1000));
      auto last_line = Clock::now() - std::chrono::seconds(10);
      for (;;) {
        throw_if_interrupted(stop);
        job = get_job(*client, job_id);
        const launcher::wire::JobSummary& summary = job.summary;
        const std::string state = to_string(summary.state);
        if (Clock::now() - last_line >= std::chrono::seconds(5)) {
          err << "smoke: " << progress_line(job) << "\n";
          last_line = Clock::now();
        }
        if (summary.state == launcher::JobState::kSucceeded) break;
        if (launcher::is_terminal(summary.state)) throw CheckFailed{job_id + " " + state + ": " + format_failure(job)};
        if (Clock::now() > deadline)
          throw CheckFailed{job_id + " still " + state + " after " + format_seconds(a->timeout_s, 3) + " (--timeout)"};
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      rows = get_metric_rows(*client, job_id);
      for (const auto& r : rows)
        if (r.contains(metric_names::kValScore) && r[metric_names::kValScore].is_number())
          val.push_back({{"step", r["step"]}, {"score", r[metric_names::kValScore]}});
      return progress_line(job);
    });

    smoke.check("score moved", true, [&] {
      if (val.size() < 2) throw CheckFailed{"fewer than 2 validations: set trainer.test_freq below total_training_steps"};
      const double first = val.front()["score"].get<double>(), last = val.back()["score"].get<double>();
      std::ostringstream d;
      d << metric_names::kValScore << " " << first << " (step " << val.front()["step"] << ") -> " << last << " (step "
        << val.back()["step"] << ")";
      if (!(last - first >= a->min_score_gain))
        throw CheckFailed{d.str() + ": rose by less than " + std::to_string(a->min_score_gain) + " (--min-score-gain)"};
      return d.str();
    });

    smoke.check("metrics complete", true, [&] {
      const std::string why = missing_metrics(rows, job.summary.total_steps);
      if (!why.empty()) throw CheckFailed{why};
      return std::to_string(rows.size()) + " rows, each with the " + std::to_string(metric_names::ppo_step().size()) +
             " step metrics; " + std::to_string(val.size()) + " validations";
    });

    // Always: what up started goes away, whatever failed before (an interrupt included).
    smoke.check("down", false, [&] {
      if (!started) return std::string("nothing was started");
      const auto r = launcher::tear_down(name, std::chrono::seconds(15), err, exe);
      return std::to_string(r.stopped) + " processes stopped, " + std::to_string(r.signalled) + " signalled";
    });

    const double total = std::chrono::duration<double>(Clock::now() - t_start).count();
    if (!a->junit.empty()) files::write_atomic(a->junit, junit_xml(smoke.results(), total, stamp));
    if (ctx.output == OutputFormat::kJson) {
      Json checks = Json::array();
      for (const auto& c : smoke.results())
        checks.push_back({{"name", c.name},
                          {"outcome", c.outcome == CheckResult::Outcome::kPassed   ? "passed"
                                      : c.outcome == CheckResult::Outcome::kFailed ? "failed"
                                                                                   : "skipped"},
                          {"seconds", c.seconds},
                          {"message", c.message}});
      print_json(*ctx.out, {{"cluster", name}, {"job", job_id}, {"passed", smoke.first_failure().empty()},
                            {"seconds", total}, {"checks", checks}});
    } else {
      for (const auto& c : smoke.results())
        *ctx.out << (c.outcome == CheckResult::Outcome::kPassed   ? "ok      "
                     : c.outcome == CheckResult::Outcome::kFailed ? "FAILED  "
                                                                  : "skipped ")
                 << c.name << " (" << format_seconds(c.seconds, 3) << ")"
                 << (c.message.empty() ? "" : ": " + c.message) << "\n";
    }
    if (smoke.interrupted() || stop)
      throw Error(ExitCode::kInterrupted,
                  smoke.first_failure().empty() ? std::string("smoke interrupted")
                                                : "smoke interrupted during '" + smoke.first_failure() + "'",
                  "the smoke cluster '" + name + "' was taken down");
    if (!smoke.first_failure().empty()) {
      std::string message;
      for (const auto& c : smoke.results())
        if (c.name == smoke.first_failure()) message = c.message;
      throw Error(ExitCode::kCheckFailed, "smoke: check '" + smoke.first_failure() + "' failed: " + message,
                  a->junit.empty() ? "rerun with --junit FILE for a report of every check"
                                   : "every check is in " + a->junit);
    }
  });
}

}  // namespace verl::cli
