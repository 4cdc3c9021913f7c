#include "launcher/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/process.h"
#include "launcher/command_job.h"
#include "launcher/container.h"
#include "launcher/gpu_sampler.h"
#include "launcher/log_chunks.h"
#include "launcher/nccl_env.h"
#include "launcher/node_facts.h"
#include "launcher/wire.h"

namespace verl::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

constexpr size_t kChunkBytes = 256 * 1024;  // one log POST at most
constexpr int kChunksPerTick = 16;          // 4 MiB per stream per tick: logs -f keeps up with a chatty rank
constexpr auto kTick = std::chrono::milliseconds(100);
// Logs and metrics go up once a second (as often as a heartbeat): at 250 ms, 1,000 nodes made
// 4,000 log POSTs a second, the head's largest load (bench/head_scale, docs/BENCHMARKS.md);
// a task's end ships at once whatever the tick.
constexpr auto kShipEvery = std::chrono::milliseconds(1000);

// Sleeps up to d, returning early (true) when *stop is set.
bool sleep_or_stop(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    if (stop) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20), until - Clock::now()));
  }
  return stop.load();
}

std::string hostname() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

[[noreturn]] void rejected(const AgentOptions& o) {
  throw Error(ExitCode::kFailure,
              "the head at " + o.head.url() + " rejected node " + o.node_name + "'s token (HTTP 401)",
              "the cluster was brought up again with a new token; this agent is left over");
}

// Up to max bytes of path from offset; "" at the end or when it cannot be read.
std::string read_from(const std::string& path, int64_t offset, size_t max, int64_t* size) {
  *size = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  if (fstat(fd, &st) == 0) *size = st.st_size;
  std::string out;
  if (*size > offset) {
    out.resize(std::min<int64_t>(static_cast<int64_t>(max), *size - offset));
    const ssize_t n = pread(fd, out.data(), out.size(), offset);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

struct Stream {
  std::string name, path;
  int64_t offset = 0;
  bool eof_sent = false;
};

struct Task {
  std::string id, job;
  TaskKind kind = TaskKind::kTrain;
  int rank = 0, attempt = 0;
  std::string dir;
  std::optional<process::Child> child;
  Stream streams[2];
  std::string metrics_path;
  int64_t metrics_offset = 0;
  std::optional<process::Result> result;
  std::string error;  // it could not start
  // Being stopped: the stop protocol's steps (process::EscalatingStop), polled on the agent's ticks.
  std::optional<process::EscalatingStop> stopping;
  // A task in a docker/podman container: what kills the container by name, since SIGKILL to
  // its client does not reach it (container.h). Empty otherwise.
  std::vector<std::string> kill_argv;
  bool result_sent = false;
  bool ended() const { return result.has_value() || !error.empty(); }
  // Every byte of its logs, its whole metrics file, and a probe's result reached the head.
  bool shipped() const {
    return streams[0].eof_sent && streams[1].eof_sent && (kind != TaskKind::kProbe || result_sent) &&
           (metrics_path.empty() || metrics_done);
  }
  bool metrics_done = false;  // ended, and its metrics file shipped to the end
};

class Runner {
 public:
  Runner(const AgentOptions& o, HeadClient& client) : o_(o), client_(client), host_(hostname()) {
    try {
      const auto facts = read_node_facts(SystemReader(), o.head.host);
      node_env_ = assignments(compute_env(facts, Json::object()).vars);
    } catch (const Error& e) {
      log::Warn() << "node " << o.node_name << ": no NCCL/Gloo environment for ranks: " << e.what();
    }
  }

  // A task's container outlives its client's SIGKILL (the Child's destructor): kill it first.
  ~Runner() {
    for (auto& [id, t] : tasks_)
      if (!t.ended() && t.child && t.child->running()) kill_container(t);
  }

  bool empty() const { return tasks_.empty(); }

  // The NCCL_* part of the ranks' environment, registered so that the head can compare it with
  // what NCCL chose (nccl_log.h).
  std::map<std::string, std::string> nccl_env() const {
    std::map<std::string, std::string> out;
    for (const auto& e : node_env_) {
      const auto eq = e.find('=');
      if (e.rfind("NCCL_", 0) == 0 && eq != std::string::npos) out[e.substr(0, eq)] = e.substr(eq + 1);
    }
    return out;
  }

  void order(const wire::TaskOrder& order) {
    const std::string& id = order.task;
    if (order.action == OrderAction::kStop) {
      auto it = tasks_.find(id);
      if (it != tasks_.end()) stop(it->second, std::chrono::milliseconds(static_cast<int64_t>(order.grace_s * 1000)));
      return;
    }
    if (id.empty() || tasks_.count(id)) return;
    Task& t = tasks_[id];
    t.id = id;
    t.job = order.job;
    t.kind = order.kind;
    t.rank = order.rank;
    t.attempt = order.attempt;
    try {
      start(t, order);
      log::Info() << "task " << id << " started (pid " << t.child->pid() << ") in " << t.dir;
    } catch (const std::exception& e) {
      t.error = std::string("could not start on ") + host_ + ": " + e.what();
      log::Err() << "task " << id << ": " << t.error;
      // The reason goes into the rank's log too, so that `verlctl logs` shows it.
      if (!t.streams[1].path.empty()) {
        const int fd = ::open(t.streams[1].path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
          const std::string line = "verlctl agent: " + t.error + "\n";
          (void)!::write(fd, line.data(), line.size());
          ::close(fd);
        }
      }
    }
  }

  void stop(Task& t, std::chrono::milliseconds grace) {
    if (t.ended() || t.stopping || !t.child) return;
    // The agent's own child, reaped by its poll: it waits for the SIGKILL's end as long as it takes.
    t.stopping.emplace(grace, std::nullopt);
    escalate(t);
  }

  // The step of a stopping task's stop protocol that is due now: SIGTERM at once, SIGKILL (and
  // its container killed by name, which the SIGKILL to its client does not reach) once the
  // grace has passed; nothing between and after.
  void escalate(Task& t) {
    switch (t.stopping->poll(Clock::now())) {
      case process::EscalatingStop::Step::kTerm:
        log::Info() << "task " << t.id << ": SIGTERM (SIGKILL in " << t.stopping->grace().count() << " ms)";
        t.child->signal(SIGTERM);
        break;
      case process::EscalatingStop::Step::kKill:
        log::Warn() << "task " << t.id << " did not end within its grace: SIGKILL";
        kill_container(t);
        t.child->signal(SIGKILL);
        break;
      case process::EscalatingStop::Step::kWait:
      case process::EscalatingStop::Step::kStillThere:  // not with no kill_wait
        break;
    }
  }

  void stop_all(std::chrono::milliseconds grace) {
    for (auto& [id, t] : tasks_) stop(t, grace);
  }

  // Reaps ended tasks and takes stopping ones a step on (SIGKILL where a grace ran out). Returns
  // true when one ended now.
  bool poll() {
    bool ended = false;
    for (auto& [id, t] : tasks_) {
      if (t.ended() || !t.child) continue;
      if (auto r = t.child->wait(std::chrono::milliseconds(0))) {
        t.result = r;
        ended = true;
        log::Info() << "task " << id << " ended: "
                    << (r->signal ? "signal " + std::to_string(r->signal) : "exit " + std::to_string(r->exit_code));
      } else if (t.stopping) {
        escalate(t);
      }
    }
    return ended;
  }

  // Ships what is new in every task's logs and metrics; an ended task's last bytes with eof.
  void ship() {
    for (auto& [id, t] : tasks_) {
      for (auto& s : t.streams) ship_stream(t, s);
      if (!t.metrics_path.empty()) ship_metrics(t);
      if (t.ended() && t.kind == TaskKind::kProbe && !t.result_sent) ship_result(t);
    }
  }

  // What the heartbeat says of the tasks: ended ones only when everything of theirs is shipped.
  std::vector<wire::TaskReport> reports() const {
    std::vector<wire::TaskReport> out;
    for (const auto& [id, t] : tasks_) {
      wire::TaskReport r;
      r.task = id;
      r.state = t.ended() && t.shipped() ? ReportState::kExited : ReportState::kRunning;
      if (r.state == ReportState::kExited) {
        if (t.result) {
          if (t.result->signal) r.signal = t.result->signal;
          else r.exit_code = t.result->exit_code;
        }
        r.error = t.error;
        if (t.kind == TaskKind::kPreflight) add_preflight_report(t, r);
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  // The head has seen these reports: ended tasks in them are done with.
  void reported(const std::vector<wire::TaskReport>& reports) {
    for (const auto& r : reports)
      if (r.state == ReportState::kExited) tasks_.erase(r.task);
  }

 private:
  void start(Task& t, const wire::TaskOrder& order) {
    const std::string& cwd = order.cwd;
    if (o_.work_dir.empty()) throw Error(ExitCode::kFailure, "the agent has no work directory");
    if (cwd.empty() || cwd[0] == '/' || cwd.find("..") != std::string::npos)
      throw Error(ExitCode::kFailure, "the order's cwd '" + cwd + "' is not a relative path inside the work directory");
    t.dir = o_.work_dir + "/" + cwd;
    claim_job_dir(t, order.owner);
    files::make_dirs(t.dir + "/logs", 0700);
    // A job preflight's output is its report (in the task's end report), not a rank's log; named
    // after the node, since local nodes share one job directory.
    const bool preflight = t.kind == TaskKind::kPreflight;
    const std::string base = t.dir + "/logs/" +
                             (preflight ? "preflight-" + o_.node_name : "rank-" + std::to_string(t.rank)) + ".attempt-" +
                             std::to_string(t.attempt);
    t.streams[0] = {"stdout", base + ".out"};
    t.streams[1] = {"stderr", base + ".err"};
    if (preflight) t.streams[0].eof_sent = t.streams[1].eof_sent = true;
    for (const auto& [name, text] : order.files) {
      if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
        throw Error(ExitCode::kFailure, "the order names a file '" + name + "' outside the job directory");
      files::write_atomic(t.dir + "/" + name, text, 0600);
    }
    const std::string metrics = order.metrics_file.value_or("");
    // Shipped from the start: rows of an earlier attempt come again and replace themselves (by step).
    if (!metrics.empty()) t.metrics_path = metrics[0] == '/' ? metrics : t.dir + "/" + metrics;
    std::vector<std::string> argv = order.argv;
    // A command job's ranks run the submitter's program as it is (command_job.h); every other
    // task is this node's verlctl.
    const bool command = t.kind == TaskKind::kCommand;
    if (argv.empty() || (!command && argv[0] != "verlctl"))
      throw Error(ExitCode::kFailure, "the order's argv must start with verlctl");
    if (!command) argv[0] = o_.exe.empty() ? process::self_exe() : o_.exe;
    std::vector<std::string> env = node_env_;
    env.insert(env.end(), order.env.begin(), order.env.end());
    process::Options po;
    po.cwd = t.dir;
    if (command && order.working_dir_bytes) po.cwd = unpack_working_dir(t);
    po.parent_death = process::Options::ParentDeath::kKill;
    const Json& container = order.container;
    if (container.is_object() && container.value("runtime", std::string("none")) != "none") {
      // The spec's container.runtime: the task runs inside the image, its variables passed in
      // by name (container.h). Its client gets SIGTERM, not SIGKILL, when the agent dies:
      // docker and podman pass SIGTERM on to the container (SIGKILL would leave it running),
      // srun to its step, apptainer's starter to the task.
      const ContainerConfig c = container_config(Json{{"container", container}});
      ContainerHost host;
      host.gpus = o_.resources.gpus > 0;
      host.infiniband = !o_.resources.ib_ports.empty();
      if (const char* node = std::getenv("SLURMD_NODENAME")) host.slurm_node = node;
      const std::string name = container.value("name", std::string());
      argv = container_argv(c, host, env, argv, {name, po.cwd});
      po.env = container_client_env(c, env);  // the values: never on the command line
      t.kill_argv = container_kill_argv(c, name);
      po.parent_death = process::Options::ParentDeath::kTerm;
    } else {
      po.env = env;
    }
    // The first line of every rank's log says what started, where: ranks other than 0 may say
    // nothing else until they fail.
    const std::string header = "verlctl agent: " + t.id + " (rank " + std::to_string(t.rank) + ", attempt " +
                               std::to_string(t.attempt + 1) + ") on " + host_ + " in " + t.dir + ": " +
                               process::quote_argv(argv) + "\n";
    const int fd = ::open(t.streams[1].path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)!::write(fd, header.data(), header.size());
      ::close(fd);
    }
    t.child = process::Child::spawn(argv, po, t.streams[0].path, t.streams[1].path);
  }

  static constexpr const char* kOwnerFile = ".verlctl-owner";

  // A command job's working directory (command_job.h) in <job dir>/work, fetched from the head
  // and unpacked by the first of the job's ranks on this machine; the others, and later
  // attempts, find it there. Unpacked beside it and renamed into place, so that a rank never
  // starts in half of it (agents of a local cluster share one job directory).
  std::string unpack_working_dir(const Task& t) {
    namespace fs = std::filesystem;
    const std::string dest = t.dir + "/" + kWorkingDirName;
    std::error_code ec;
    if (fs::is_directory(dest, ec)) return dest;
    // A client of its own: up to 16 MiB take longer than a heartbeat's timeout.
    HeadClient fetch(o_.head, o_.token, std::chrono::seconds(60));
    const auto got = wire::parse<wire::WorkingDir>(fetch.get("/api/jobs/" + t.job + "/working-dir"));
    const std::string& tar = got.tar;
    std::string tmp = dest + ".unpack-XXXXXX";
    if (!::mkdtemp(tmp.data()))
      throw Error(ExitCode::kFailure, "cannot make a directory in " + t.dir + ": " + std::strerror(errno));
    process::Options po;
    po.stdin_data = tar;
    po.timeout = std::chrono::seconds(60);
    const auto r = process::run({"tar", "-x", "-f", "-", "-C", tmp}, po);
    if (r.exit_code != 0) {
      fs::remove_all(tmp, ec);
      throw Error(ExitCode::kFailure, "cannot unpack the working directory " + got.source + " (" +
                                          std::to_string(tar.size()) + " bytes) into " + dest + ": tar exited with " +
                                          std::to_string(r.exit_code) + ": " + r.err,
                  "is tar installed on " + host_ + "?");
    }
    if (::rename(tmp.c_str(), dest.c_str()) != 0) {
      fs::remove_all(tmp, ec);  // another agent on this machine unpacked it first
      if (!fs::is_directory(dest, ec))
        throw Error(ExitCode::kFailure, "cannot move the working directory into " + dest + ": " + std::strerror(errno));
    }
    log::Info() << "task " << t.id << ": working directory " << got.source << " ("
                << tar.size() << " bytes) unpacked in " << dest;
    return dest;
  }

  // A job directory belongs to one job of one head: its .verlctl-owner file names the store's
  // incarnation and the job ("<incarnation>/job-1"). Job ids start again at job-1 in a new
  // cluster's store, so a directory of that name may be another head's job's: appending to its
  // logs mixed two runs (two probe reports in one file; issue 16, case 12), and its checkpoints
  // would have been resumed as this job's. Such a directory, or one without an owner that is not
  // empty, is moved aside whole (<dir>.replaced-<time>, said in the agent's log); this job's other
  // ranks and later attempts find their owner and share it.
  void claim_job_dir(const Task& t, const std::string& owner) {
    namespace fs = std::filesystem;
    if (owner.empty() || owner.find('\n') != std::string::npos)
      throw Error(ExitCode::kFailure, "the order for " + t.id + " names no owner of its job directory",
                  "the head is older than this agent: run the same verlctl on both ('verlctl up' again)");
    // Agents on one machine share a work directory (local backend): a directory is only ever
    // made whole, its owner inside, by a rename, so that no agent sees one without its owner.
    for (int tries = 0; tries < 5; ++tries) {
      std::error_code ec;
      if (fs::exists(t.dir, ec)) {
        std::string found;
        try {
          found = files::read_file(t.dir + "/" + kOwnerFile);
        } catch (const Error&) {
          // no owner file (an older verlctl's job, or one being made): found stays empty, and an
          // empty owner is handled below (removed when empty, else moved aside with a warning)
        }
        while (!found.empty() && found.back() == '\n') found.pop_back();
        if (found == owner) return;
        if (found.empty() && ::rmdir(t.dir.c_str()) == 0) continue;  // empty: made fresh below
        std::string aside = t.dir + ".replaced-" + std::to_string(::time(nullptr));
        for (int i = 1; fs::exists(aside, ec); ++i)
          aside = t.dir + ".replaced-" + std::to_string(::time(nullptr)) + "-" + std::to_string(i);
        if (::rename(t.dir.c_str(), aside.c_str()) != 0) {
          if (errno == ENOENT) continue;  // another agent moved it first
          throw Error(ExitCode::kFailure, "cannot move " + t.dir + " (" + (found.empty() ? "no owner" : found) +
                                              ") aside for " + owner + ": " + std::strerror(errno),
                      "remove that directory");
        }
        log::Warn() << "task " << t.id << ": " << t.dir << " belonged to "
                    << (found.empty() ? "no owner (an older verlctl's job)" : found) << ", not " << owner << "; moved to "
                    << aside;
      }
      // mkdtemp: a name of its own even for agents in one process (the unit tests run several).
      files::make_dirs(fs::path(t.dir).parent_path().string(), 0700);
      std::string templ = t.dir + ".claim-XXXXXX";
      if (!::mkdtemp(templ.data()))
        throw Error(ExitCode::kFailure, "cannot make a directory beside " + t.dir + ": " + std::strerror(errno),
                    "is the work directory writable?");
      const std::string fresh = templ;
      files::write_atomic(fresh + "/" + kOwnerFile, owner + "\n", 0600);
      if (::rename(fresh.c_str(), t.dir.c_str()) == 0) return;
      fs::remove_all(fresh, ec);  // another agent made it first: look at its owner
    }
    throw Error(ExitCode::kFailure, "cannot claim the job directory " + t.dir + " for " + owner,
                "other processes keep changing it; remove it");
  }

  // Kills the task's container by name (docker/podman) and waits for that, up to 10 s.
  void kill_container(const Task& t) {
    if (t.kill_argv.empty()) return;
    process::Options ko;
    ko.timeout = std::chrono::seconds(10);
    try {
      const auto r = process::run(t.kill_argv, ko);
      // It fails when the container has just ended by itself: the log says so, nothing else.
      if (r.exit_code != 0)
        log::Warn() << "task " << t.id << ": '" << process::quote_argv(t.kill_argv) << "' exited with "
                    << r.exit_code << ": " << r.err;
    } catch (const Error& e) {
      log::Err() << "task " << t.id << ": cannot kill its container: " << e.what();
    }
  }

  bool post(const std::string& path, const Json& body, bool* gone) {
    const HeadResponse r = client_.try_request("POST", path, &body);
    if (r.status == 401) rejected(o_);
    *gone = r.status >= 400 && r.status < 500;  // the head will never take it: do not resend
    return r.ok();
  }

  void ship_stream(Task& t, Stream& s) {
    if (s.eof_sent || s.path.empty()) {
      if (s.path.empty() && t.ended()) s.eof_sent = true;
      return;
    }
    for (int i = 0; i < kChunksPerTick; ++i) {
      const bool ended = t.ended();  // read before the file: bytes written before the end are in it
      int64_t size = 0;
      std::string data = read_from(s.path, s.offset, kChunkBytes, &size);
      const bool at_end = s.offset + static_cast<int64_t>(data.size()) >= size;
      data.resize(chunk_end(data, data.size() == kChunkBytes, ended && at_end));
      sanitize_utf8(data);
      const bool last = ended && s.offset + static_cast<int64_t>(data.size()) >= size;
      if (data.empty() && !last) return;
      wire::Logs body;
      body.rank = t.rank;
      body.attempt = t.attempt;
      body.host = host_;
      body.chunks.push_back(wire::LogChunk{s.name, s.offset, data, last});
      bool gone = false;
      if (!post("/api/jobs/" + t.job + "/logs", body, &gone)) {
        if (gone) s.eof_sent = true;
        return;
      }
      s.offset += static_cast<int64_t>(data.size());
      if (last) {
        s.eof_sent = true;
        return;
      }
    }
  }

  void ship_metrics(Task& t) {
    const bool ended = t.ended();  // read before the file, as for the logs
    int64_t size = 0;
    read_from(t.metrics_path, 0, 0, &size);
    if (size < t.metrics_offset) t.metrics_offset = 0;  // rewritten (a resumed run truncates it)
    std::string data = read_from(t.metrics_path, t.metrics_offset, 4 * kChunkBytes, &size);
    const auto nl = data.rfind('\n');
    if (nl == std::string::npos) {
      t.metrics_done = ended;  // nothing more to come (a row the rank never ended is no row)
      return;
    }
    data.resize(nl + 1);
    Json rows = Json::array();
    size_t start = 0;
    for (size_t e; (e = data.find('\n', start)) != std::string::npos; start = e + 1) {
      Json row = Json::parse(data.substr(start, e - start), nullptr, /*allow_exceptions=*/false);
      if (row.is_object()) rows.push_back(std::move(row));
    }
    bool gone = false;
    if (post("/api/jobs/" + t.job + "/metrics", wire::Metrics{rows}, &gone) || gone)
      t.metrics_offset += static_cast<int64_t>(data.size());
    if (gone) t.metrics_done = true;
  }

  // A job preflight's stdout is its JSON report; without one, the end of its stderr says why.
  static void add_preflight_report(const Task& t, wire::TaskReport& r) {
    int64_t size = 0;
    const Json report = Json::parse(read_from(t.streams[0].path, 0, 1 << 20, &size), nullptr, /*allow_exceptions=*/false);
    if (report.is_object()) {
      r.result = report;
      return;
    }
    read_from(t.streams[1].path, 0, 0, &size);
    std::string tail = read_from(t.streams[1].path, std::max<int64_t>(0, size - 600), 600, &size);
    sanitize_utf8(tail);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    const auto nl = tail.rfind('\n');
    r.output = nl == std::string::npos ? tail : tail.substr(nl + 1);
  }

  // A probe task's stdout is its report, one JSON document. One that is missing or does not
  // parse is sent as {"error": why} (the head shows it as the node's report row): sending
  // nothing left the head saying "no report" about a node whose probes had all passed.
  void ship_result(Task& t) {
    std::string out, why;
    if (t.streams[0].path.empty()) {
      why = "the probe did not start: " + t.error;
    } else {
      try {
        out = files::read_file(t.streams[0].path);
      } catch (const Error& e) {
        why = e.what();
      }
    }
    Json result;
    if (why.empty()) {
      try {
        result = Json::parse(out);
      } catch (const Json::exception& e) {
        why = "its report " + t.streams[0].path + " (" + std::to_string(out.size()) + " bytes) is not one JSON document: " + e.what();
      }
    }
    if (!why.empty()) {
      log::Err() << "task " << t.id << ": " << why;
      result = Json{{"error", why}};
    }
    bool gone = false;
    if (post("/api/jobs/" + t.job + "/results", wire::Result{t.rank, result}, &gone) || gone)
      t.result_sent = true;
  }

  const AgentOptions& o_;
  HeadClient& client_;
  std::string host_;
  std::vector<std::string> node_env_;
  std::map<std::string, Task> tasks_;
};

}  // namespace

const char* agent_exit_name(AgentExit e) {
  switch (e) {
    case AgentExit::kShutdown: return "shutdown";
    case AgentExit::kStopped: return "stopped";
    case AgentExit::kHeadLost: return "head lost";
  }
  return "?";
}

AgentExit run_agent(const AgentOptions& o, const std::atomic<bool>& stop) {
  const auto timeout = std::max(std::chrono::milliseconds(500), std::min(o.heartbeat_interval * 2, std::chrono::milliseconds(5000)));
  HeadClient client(o.head, o.token, timeout);
  client.set_keep_alive(true);  // one connection for every heartbeat and log POST (head_client.h)
  Runner runner(o, client);
  Resources registered = o.resources;
  registered.nccl_env = runner.nccl_env();
  const Json registration = wire::Register{o.node_name, hostname(), static_cast<int64_t>(getpid()), registered};
  int64_t id = -1;
  auto last_contact = Clock::now();
  auto next_beat = Clock::now();
  auto next_ship = Clock::now();
  std::string last_error;

  // One heartbeat: the task reports go up, the orders come back. false: no 2xx answer.
  auto heartbeat = [&](bool* shutdown) {
    wire::Heartbeat beat;
    beat.tasks = runner.reports();
    beat.work_dir = o.work_dir;
    // nvidia-smi is a process per call: only where the node has GPUs.
    if (o.sample_gpus && o.resources.gpus > 0) beat.gpus = sample_gpus();
    const Json body = beat;
    const HeadResponse r = client.try_request("POST", "/api/nodes/" + std::to_string(id) + "/heartbeat", &body);
    if (r.status == 401) rejected(o);
    if (r.status == 404) {
      log::Warn() << "the head does not know node id " << id << " any more; registering again";
      id = -1;
      return false;
    }
    std::optional<wire::HeartbeatReply> answer;
    std::string why = r.problem();
    if (r.status == 200) {
      try {
        answer = wire::parse<wire::HeartbeatReply>(r.body);
      } catch (const wire::BadMessage& e) {
        why = std::string("its heartbeat answer does not parse: ") + e.what() + " (is it another verlctl version?)";
      }
    }
    if (!answer) {
      if (why != last_error) log::Warn() << "head at " << o.head.url() << ": " << why << " (retrying)";
      last_error = why;
      return false;
    }
    runner.reported(beat.tasks);
    for (const auto& order : answer->tasks) runner.order(order);
    if (shutdown) *shutdown = answer->shutdown;
    return true;
  };

  // Stops every task (SIGTERM, SIGKILL after the grace), ships their ends, and says so.
  auto wind_down = [&] {
    if (runner.empty()) return;
    runner.stop_all(o.task_stop_grace);
    const auto until = Clock::now() + o.task_stop_grace + std::chrono::seconds(3);
    while (Clock::now() < until) {
      runner.poll();
      if (id >= 0) runner.ship();
      if (id < 0 || !runner.reports().empty()) {
        bool all_ended = true;
        for (const auto& r : runner.reports())
          if (r.state != ReportState::kExited) all_ended = false;
        if (all_ended) break;
      }
      std::this_thread::sleep_for(kTick);
    }
    if (id >= 0) heartbeat(nullptr);
  };

  AgentExit end = AgentExit::kStopped;
  for (;;) {
    if (stop) break;
    const bool ended_now = runner.poll();
    if (id >= 0 && (Clock::now() >= next_ship || ended_now)) {
      runner.ship();
      next_ship = Clock::now() + kShipEvery;
    }
    bool ok = false;
    if (id < 0 && Clock::now() >= next_beat) {
      const HeadResponse r = client.try_request("POST", "/api/nodes/register", &registration);
      if (r.status == 401) rejected(o);
      if (r.status == 409) {
        log::Info() << "the head is shutting down; node " << o.node_name << " does not register";
        end = AgentExit::kShutdown;
        break;
      }
      std::string why = r.problem();
      if (r.status == 200) {
        try {
          id = wire::parse<wire::RegisterReply>(r.body).id;
          ok = true;
        } catch (const wire::BadMessage& e) {
          why = std::string("its answer to register does not parse: ") + e.what();
        }
      }
      if (ok) {
        log::Info() << "node " << o.node_name << " registered with the head at " << o.head.url() << " as id " << id;
      } else {
        if (why != last_error) log::Warn() << "head at " << o.head.url() << ": " << why << " (retrying)";
        last_error = why;
      }
      next_beat = Clock::now() + (ok ? std::chrono::milliseconds(0) : o.heartbeat_interval);
    } else if (id >= 0 && (Clock::now() >= next_beat || ended_now)) {
      // An ended task is reported at once (after its logs), not at the next interval.
      bool shutdown = false;
      ok = heartbeat(&shutdown);
      next_beat = Clock::now() + o.heartbeat_interval;
      if (ok && shutdown) {
        log::Info() << "the head asked for shutdown; node " << o.node_name << " leaves";
        wind_down();
        const Json leave = wire::Leave{"shutdown requested by the head"};
        client.try_request("POST", "/api/nodes/" + std::to_string(id) + "/leave", &leave);
        return AgentExit::kShutdown;
      }
    } else {
      if (sleep_or_stop(kTick, stop)) break;
      continue;
    }
    if (ok) {
      last_contact = Clock::now();
      last_error.clear();
    } else if (Clock::now() - last_contact >= o.exit_after) {
      log::Err() << "the head at " << o.head.url() << " has been unreachable for "
                 << std::chrono::duration_cast<std::chrono::seconds>(o.exit_after).count() << " s; node "
                 << o.node_name << " exits";
      end = AgentExit::kHeadLost;
      break;
    }
  }
  wind_down();
  if (end == AgentExit::kStopped && id >= 0) {
    const Json leave = wire::Leave{"agent stopped by a signal"};
    client.try_request("POST", "/api/nodes/" + std::to_string(id) + "/leave", &leave);
  }
  log::Info() << "node " << o.node_name << " " << agent_exit_name(end);
  return end;
}

}  // namespace verl::launcher
