#include "launcher/head.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>

#include <httplib.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "launcher/http_server.h"
#include "launcher/nccl_log.h"
#include "launcher/scaling.h"
#include "launcher/wire.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

// Error texts can carry a client's bytes (nlohmann's parse errors quote the token read): a byte
// that is not UTF-8 is written as U+FFFD, never thrown out of the handler (issue 16, case 1).
void reply(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void fail(httplib::Response& res, int status, const std::string& message) {
  reply(res, status, Json{{"error", message}});
}

// Compares without an early exit, so that the time taken does not tell how much of a guess was right.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Every body goes through wire::parse_body (depth bound, then nlohmann's parser) and the
// endpoint's typed message (launcher/wire.h): a wrong type or range is a 400 naming the field.
template <typename T>
T read_body(const httplib::Request& req) {
  return wire::parse<T>(wire::parse_body(req.body));
}


// A decimal integer that is the whole text and lies within [lo, hi]; nullopt otherwise. std::stoll
// took "12abc" as 12 and threw out_of_range (a 500) past int64 (issue 16, case 8).
std::optional<int64_t> parse_int(const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < lo || v > hi) return std::nullopt;
  return v;
}

// A query parameter as an integer within [lo, hi], dflt when absent; a 400 naming it otherwise.
int64_t query_int(const httplib::Request& req, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  if (!req.has_param(key)) return dflt;
  const std::string text = req.get_param_value(key);
  if (auto v = parse_int(text, lo, hi)) return *v;
  throw std::invalid_argument("query parameter " + std::string(key) + "=" + text.substr(0, 40) +
                              " is not an integer within " + std::to_string(lo) + ".." + std::to_string(hi));
}

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

}  // namespace

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One worker per agent (each heartbeats and ships logs) plus room for clients, at least 8.
namespace {

int listen_backlog(const HeadOptions& o) { return static_cast<int>(std::max<size_t>(128, 4 * o.expected_nodes.size())); }

size_t worker_count(const HeadOptions& o) { return std::max<size_t>(8, 2 * o.expected_nodes.size() + 8); }

}  // namespace

struct Head::Server {
  // At most half of the workers wait for slow requests: the other half serve the agents.
  explicit Server(const HeadOptions& o) : http(HttpBounds{o.request_timeout, o.slow_request_after, worker_count(o) / 2}) {}
  GuardedHttpServer http;
};

Head::Head(HeadOptions options)
    : options_(std::move(options)),
      registry_(options_.db_path),
      jobs_(options_.db_path),
      server_(std::make_unique<Server>(options_)) {
  if (options_.token.empty())
    throw Error(ExitCode::kFailure, "the head needs a token", "verlctl up writes one into the state directory");
}

Head::~Head() { stop(); }

void Head::install_routes() {
  auto& http = server_->http;
  const std::string token = options_.token;
  http.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    // A browser and a scraper cannot set the header: these two take ?token= (docs/API.md).
    const bool page = req.path == "/dashboard" || req.path == "/metrics";
    if (auth.empty() && page && req.has_param("token")) auth = prefix + req.get_param_value("token");
    if (auth.rfind(prefix, 0) != 0 || !same_token(auth.substr(prefix.size()), token)) {
      // The dashboard answers 401 with its page, whose banner says where the token is (head_pages.cc).
      if (req.path == "/dashboard") {
        res.status = 401;
        return httplib::Server::HandlerResponse::Unhandled;
      }
      res.set_header("WWW-Authenticate", "Bearer");
      fail(res, 401, auth.empty() ? "missing bearer token" : "wrong bearer token");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const nlohmann::json::exception& e) {
      fail(res, 400, std::string("bad request body: ") + e.what());
    } catch (const std::invalid_argument& e) {
      fail(res, 400, std::string("bad request: ") + e.what());
    } catch (const std::exception& e) {
      log::Err() << req.method << " " << req.path << ": " << e.what();
      fail(res, 500, e.what());
    }
  });

  http.Post("/api/nodes/register", [this](const httplib::Request& req, httplib::Response& res) {
    const auto body = read_body<wire::Register>(req);
    if (shutting_down_) return fail(res, 409, "the head is shutting down");
    const Resources& resources = body.resources;
    const auto node = registry_.register_node(body.name, body.host, body.pid, resources, now_ms());
    log::Info() << "node " << node.name << " registered (id " << node.id << ", host " << node.host << ", pid "
                << node.pid << ", " << resources.cpus << " CPUs, " << format_bytes(resources.memory_bytes) << ", "
                << resources.gpus << " GPUs, " << resources.ib_ports.size() << " IB ports)";
    reply(res, 200, wire::RegisterReply{node.id, static_cast<double>(options_.heartbeat_interval.count()) / 1000.0});
  });

  http.Post(R"(/api/nodes/(\d+)/heartbeat)", [this](const httplib::Request& req, httplib::Response& res) {
    const auto parsed = parse_int(req.matches[1].str(), 0, kInt64Max);
    if (!parsed) return fail(res, 404, "no node " + req.matches[1].str().substr(0, 40) + "; register again");
    const int64_t id = *parsed;
    const NodeState before = [&] {
      auto n = registry_.node(id);
      return n ? n->state : NodeState::kAlive;
    }();
    const auto body = read_body<wire::Heartbeat>(req);
    const int64_t now = now_ms();
    auto node = registry_.heartbeat(id, now);
    if (!node) return fail(res, 404, "no node " + std::to_string(id) + "; register again");
    if (before == NodeState::kLost) log::Info() << "node " << node->name << " is heard from again";
    if (body.gpus) {
      GpuSamples sample{now, *body.gpus};
      std::lock_guard<std::mutex> lock(samples_mu_);
      auto& q = gpu_samples_[node->name];
      q.push_back(std::move(sample));
      while (q.size() > 600) q.pop_front();
    }
    wire::HeartbeatReply answer;
    answer.shutdown = shutting_down_.load();
    answer.tasks = controller_->heartbeat(*node, body.tasks, req.remote_addr, body.work_dir, now);
    reply(res, 200, answer);
  });

  http.Post(R"(/api/nodes/(\d+)/leave)", [this](const httplib::Request& req, httplib::Response& res) {
    const auto parsed = parse_int(req.matches[1].str(), 0, kInt64Max);
    if (!parsed) return fail(res, 404, "no node " + req.matches[1].str().substr(0, 40));
    const int64_t id = *parsed;
    const std::string reason = read_body<wire::Leave>(req).reason;
    if (!registry_.leave(id, reason, now_ms())) return fail(res, 404, "no node " + std::to_string(id));
    const auto node = registry_.node(id);
    log::Info() << "node " << (node ? node->name : std::to_string(id)) << " left: " << reason;
    cv_.notify_all();
    reply(res, 200, Json::object());
  });

  http.Get("/api/nodes", [this](const httplib::Request& req, httplib::Response& res) {
    const int64_t now = now_ms();
    const bool samples = req.get_param_value("samples") == "1";
    Json nodes = Json::array();
    for (const auto& n : registry_.nodes()) {
      Json j = node_view(n, now);
      if (samples) {
        std::lock_guard<std::mutex> lock(samples_mu_);
        Json list = Json::array();
        auto it = gpu_samples_.find(n.name);
        if (it != gpu_samples_.end())
          for (const auto& x : it->second) list.push_back(samples_json(x));
        j["gpu_samples"] = list;
      }
      nodes.push_back(std::move(j));
    }
    reply(res, 200, Json{{"nodes", nodes}});
  });

  http.Get("/api/cluster", [this](const httplib::Request&, httplib::Response& res) {
    wire::ClusterView c;
    for (const auto& n : registry_.nodes()) {
      if (n.state == NodeState::kAlive) ++c.alive;
      else if (n.state == NodeState::kLost) ++c.lost;
      else ++c.left;
    }
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    c.name = options_.cluster_name;
    c.backend = options_.backend;
    c.shutting_down = shutting_down_;
    c.head.bind = options_.bind_host + ":" + std::to_string(port_);
    c.head.hostname = host;
    c.head.pid = getpid();
    c.head.started_ms = started_ms_;
    c.head.uptime_s = static_cast<double>(now_ms() - started_ms_) / 1000.0;
    c.heartbeat_interval_s = static_cast<double>(options_.heartbeat_interval.count()) / 1000.0;
    c.heartbeat_timeout_s = static_cast<double>(options_.heartbeat_timeout.count()) / 1000.0;
    c.expected_nodes = options_.expected_nodes;
    c.store_port = options_.store_port;
    c.probe_ports = options_.probe_ports;
    reply(res, 200, c);
  });

  http.Post("/api/shutdown", [this](const httplib::Request&, httplib::Response& res) {
    int alive = 0;
    for (const auto& n : registry_.nodes()) alive += n.state == NodeState::kAlive;
    if (!shutting_down_.exchange(true)) {
      shutdown_ms_ = now_ms();
      log::Info() << "shutdown requested; telling " << alive << " agents";
    }
    cv_.notify_all();
    reply(res, 200, Json{{"agents", alive}});
  });

  install_job_routes();
  install_page_routes(http);
}

Json Head::samples_json(const GpuSamples& s) { return Json{{"time_ms", s.time_ms}, {"gpus", to_json(s.gpus)}}; }

// A train job's scaling health (scaling.h): its metric rows, the GPU samples the head holds of
// its nodes, and the same job run before on fewer nodes.
Json Head::scaling_of(const JobRecord& job, int64_t now) {
  ScalingInput in;
  in.job = job;
  in.rows = jobs_.metrics(job.id, -1);
  in.placement = jobs_.placements(job.id, job.attempt);
  in.now_ms = now;
  {
    std::lock_guard<std::mutex> lock(samples_mu_);
    for (const auto& p : in.placement) {
      auto it = gpu_samples_.find(p.node);
      if (it != gpu_samples_.end() && !in.gpu_samples.count(p.node)) {
        auto& list = in.gpu_samples[p.node];
        for (const auto& x : it->second) list.push_back(samples_json(x));
      }
    }
  }
  in.baseline = find_scaling_baseline(jobs_, job);
  return scaling_health(in);
}

// What NCCL chose on each of a --nccl-debug job's nodes (nccl_log.h), from the first lines of
// its ranks' logs there (NCCL says it while it sets up), against what the node registered.
Json Head::nccl_of(const JobRecord& job) {
  constexpr int kInitLines = 4000;
  std::map<std::string, std::vector<std::string>> lines;  // node -> its ranks' lines
  for (const auto& p : jobs_.placements(job.id, job.attempt))
    for (const auto& l : jobs_.log_lines(job.id, p.rank, 0, kInitLines)) lines[p.node].push_back(l.text);
  std::map<std::string, Resources> resources;
  for (const auto& n : registry_.nodes()) resources[n.name] = n.resources;
  Json out = Json::array();
  for (const auto& [node, text] : lines) {
    NcclExpectation expect;
    auto r = resources.find(node);
    if (r != resources.end()) {
      for (const auto& port : r->second.ib_ports) expect.has_ib = expect.has_ib || port.active();
      auto hca = r->second.nccl_env.find("NCCL_IB_HCA");
      if (hca != r->second.nccl_env.end()) expect.ib_hca = hca->second;
    }
    out.push_back(nccl_diagnosis(node, parse_nccl_info(text), expect));
  }
  return out;
}

// The job id in a path: job-<N>; nullopt (and a 404 answered) when it names no job.
std::optional<JobRecord> Head::job_of(const httplib::Request& req, httplib::Response& res) {
  const auto id = parse_int(req.matches[1].str(), 0, kInt64Max);
  std::optional<JobRecord> job;
  if (id) job = jobs_.job(*id);
  if (!job) {
    reply(res, 404, Json{{"error", "no job job-" + req.matches[1].str().substr(0, 40)}, {"hint", "'verlctl jobs' lists the jobs"}});
    return std::nullopt;
  }
  return job;
}

void Head::install_job_routes() {
  auto& http = server_->http;
  http.Post("/api/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    if (shutting_down_) return fail(res, 409, "the head is shutting down");
    SubmitError error;
    auto job = controller_->submit(wire::parse_body(req.body), now_ms(), &error);
    if (!job) {
      Json body = {{"error", error.error}, {"hint", error.hint}};
      if (!error.issues.empty()) {
        Json issues = Json::array();
        for (const auto& i : error.issues)
          issues.push_back({{"path", i.path}, {"message", i.message}, {"hint", i.hint}, {"location", i.where.str()}});
        body["issues"] = issues;
        body["text"] = config::format_issues(error.issues);
      }
      return reply(res, error.status, body);
    }
    reply(res, 201, wire::JobRef{job->name(), job->state});
  });

  // Dashboards and `status` poll it: the answer is built once per change of the store (its
  // version, read before the build: a write during the build makes the next request build again)
  // and served from memory until then (issue 18: 3,457 req/s, p99 11.7 ms when each request read
  // SQLite under the store's mutex).
  http.Get("/api/jobs", [this](const httplib::Request&, httplib::Response& res) {
    const uint64_t version = jobs_.version();
    std::shared_ptr<const std::string> answer;
    {
      std::lock_guard<std::mutex> lock(jobs_answer_mu_);
      if (jobs_answer_ && jobs_answer_version_ == version) answer = jobs_answer_;
    }
    if (!answer) {
      Json list = Json::array();
      for (const auto& j : jobs_.jobs()) list.push_back(Json(controller_->summary(j)));
      answer = std::make_shared<const std::string>(
          Json{{"jobs", list}}.dump(-1, ' ', false, Json::error_handler_t::replace));
      std::lock_guard<std::mutex> lock(jobs_answer_mu_);
      jobs_answer_ = answer;
      jobs_answer_version_ = version;
    }
    res.status = 200;
    res.set_content(*answer, "application/json");
  });

  http.Get(R"(/api/jobs/job-(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const int64_t now = now_ms();
    wire::Job d = controller_->detail(*job, now);
    if (job->kind == JobKind::kTrain) d.scaling = scaling_of(*job, now);
    if (job->nccl_debug) d.nccl = nccl_of(*job);
    reply(res, 200, d);
  });

  // A command job's working directory (command_job.h): each node's agent fetches it once.
  http.Get(R"(/api/jobs/job-(\d+)/working-dir)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const std::string tar = jobs_.working_dir(job->id);
    if (!job->command || job->command->working_dir.empty() || tar.empty())
      return reply(res, 404, Json{{"error", job->name() + " was submitted without a working directory"},
                                  {"hint", "verlctl submit --working-dir DIR -- CMD"}});
    reply(res, 200, wire::WorkingDir{job->command->working_dir, tar});
  });

  http.Post(R"(/api/jobs/job-(\d+)/stop)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const double grace = read_body<wire::Stop>(req).grace_s;
    job = controller_->stop(job->id, grace, now_ms());
    reply(res, 200, wire::JobRef{job->name(), job->state});
  });

  http.Get(R"(/api/jobs/job-(\d+)/logs)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    // rank -1: every rank. A rank past int used to wrap (4294967296 read as rank 0).
    const int rank = static_cast<int>(query_int(req, "rank", -1, -1, std::numeric_limits<int>::max()));
    const int64_t after = query_int(req, "after", 0, 0, kInt64Max);
    const int limit = static_cast<int>(std::clamp<int64_t>(query_int(req, "limit", 1000, 0, kInt64Max), 1, 10000));
    bool ended = is_terminal(job->state);
    for (const auto& p : jobs_.placements(job->id))
      if (p.state != TaskState::kExited) ended = false;
    // A tail's `next` is the newest line's seq, taken before the tail is read: following from
    // there shows what comes after the tail, even when the tail is empty (--tail 0).
    const int64_t tail_end = req.has_param("tail") ? jobs_.last_seq(job->id) : 0;
    std::vector<LogLine> lines = req.has_param("tail")
                                     ? jobs_.tail_lines(job->id, rank, static_cast<int>(std::clamp<int64_t>(query_int(req, "tail", 20, 0, kInt64Max), 0, 100000)))
                                     : jobs_.log_lines(job->id, rank, after, limit);
    wire::LogsPage page;
    page.next = std::max(after, tail_end);
    for (const auto& l : lines) {
      page.lines.push_back(wire::LogLineView{l.seq, l.rank, l.host, l.stream, l.text});
      page.next = std::max(page.next, l.seq);
    }
    // done: the job ended, its ranks are gone (their last partial lines flushed) and nothing is left.
    page.done = ended && (req.has_param("tail") || static_cast<int>(lines.size()) < limit);
    reply(res, 200, page);
  });

  http.Post(R"(/api/jobs/job-(\d+)/logs)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const auto body = read_body<wire::Logs>(req);
    for (const auto& c : body.chunks)
      jobs_.append_log(job->id, body.attempt, body.rank, body.host, c.stream, c.offset, c.data, c.eof);
    reply(res, 200, Json::object());
  });

  http.Post(R"(/api/jobs/job-(\d+)/results)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const auto body = read_body<wire::Result>(req);
    jobs_.put_result(job->id, body.rank, body.result);
    reply(res, 200, Json::object());
  });

  http.Get(R"(/api/jobs/job-(\d+)/metrics)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const int64_t after = query_int(req, "after", -1, -1, kInt64Max);
    Json rows = jobs_.metrics(job->id, after);
    for (auto& r : rows) r.erase("_received_ms");
    reply(res, 200, wire::Metrics{rows});
  });

  http.Post(R"(/api/jobs/job-(\d+)/metrics)", [this](const httplib::Request& req, httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    jobs_.put_metrics(job->id, read_body<wire::Metrics>(req).rows, now_ms());
    reply(res, 200, Json::object());
  });
}

void Head::start() {
  install_routes();
  auto& http = server_->http;
  // httplib's default also sets SO_REUSEPORT, which lets a second head bind the same port and
  // take half of the first one's connections. SO_REUSEADDR alone: a restart after a crash can
  // bind at once (TIME_WAIT), a port in use is an error.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<void*>(&yes), sizeof yes);
    // httplib writes the header and the body apart: with Nagle, the body waits for the client's
    // delayed ACK (40 ms a request; bench/api_bench.sh). Accepted sockets inherit it.
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<void*>(&yes), sizeof yes);
  });
  http.set_read_timeout(std::chrono::seconds(5));
  http.set_write_timeout(std::chrono::seconds(5));
  // Bounds for a client that misbehaves: a body larger than any agent sends (a log POST is
  // 256 KiB at most, agent.cc) is refused with 413, an idle keep-alive connection is closed after 5 s and a
  // connection serves at most 100 requests, so that no client holds a worker thread for good.
  http.set_payload_max_length(size_t{32} << 20);
  http.set_keep_alive_timeout(5);
  http.set_keep_alive_max_count(100);
  const size_t workers = worker_count(options_);
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  registry_.clear();
  started_ms_ = now_ms();
  ControllerOptions co;
  co.store_port = options_.store_port;
  co.spec_env = options_.spec_env;
  co.container = options_.container;
  co.cluster_name = options_.cluster_name;
  co.heartbeat_timeout_ms = options_.heartbeat_timeout.count();
  co.head_started_ms = started_ms_;
  co.node_order = options_.expected_nodes;
  controller_ = std::make_unique<JobController>(jobs_, registry_, co);
  controller_->note_restart(started_ms_);
  if (options_.port == 0) {
    port_ = http.bind_to_any_port(options_.bind_host);
    if (port_ <= 0) port_ = 0;
  } else if (http.bind_to_port(options_.bind_host, options_.port)) {
    port_ = options_.port;
  }
  if (port_ == 0)
    throw Error(ExitCode::kFailure,
                "the head cannot listen on " + options_.bind_host + ":" + std::to_string(options_.port),
                "is the port in use (another cluster's head)? pick another with head.dashboard_port=PORT");
  // Every agent may connect at once (all of them register again after a head restart): room
  // for each in the accept queue, so that none loses its SYN and waits a second to resend it.
  if (!http.listen_backlog(listen_backlog(options_)))
    log::Warn() << "head: cannot set the listen backlog of port " << port_ << ": " << std::strerror(errno);
  listen_thread_ = std::thread([this] {
    try {
      server_->http.listen_after_bind();
    } catch (const std::exception& e) {
      log::Err() << "head: the HTTP server on port " << port_ << " stopped: " << e.what();
    }
  });
  // stop() only reaches a server that runs: wait for it, so that a stop() right after start()
  // cannot miss it and leave the listen thread unjoinable.
  for (int i = 0; i < 2000 && !http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  sweep_thread_ = std::thread([this] { sweeper(); });
  log::Info() << "head of cluster '" << options_.cluster_name << "' listening on " << options_.bind_host << ":"
              << port_ << " (heartbeat timeout " << options_.heartbeat_timeout.count() << " ms)";
}

void Head::sweep() {
  for (const auto& n : registry_.mark_lost(now_ms(), options_.heartbeat_timeout.count()))
    log::Warn() << "node " << n.name << " (pid " << n.pid << " on " << n.host << ") lost: " << n.reason;
  if (controller_) controller_->tick(now_ms());
  if (shutting_down_ && !drained_) {
    int alive = 0;
    for (const auto& n : registry_.nodes()) alive += n.state == NodeState::kAlive;
    const bool grace_over = now_ms() - shutdown_ms_ >= options_.shutdown_grace.count();
    if (alive == 0 || grace_over) {
      if (alive > 0) log::Warn() << alive << " agents did not leave within the shutdown grace; stopping anyway";
      drained_ = true;
      cv_.notify_all();
    }
  }
}

void Head::sweeper() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    // A failed write (a full disk: "database or disk is full") is reported and tried again on
    // the next pass; it must not end the head (issue 16, case 5).
    try {
      sweep();
    } catch (const std::exception& e) {
      log::Err() << "head: sweeping nodes and jobs in " << options_.db_path << " failed: " << e.what()
                 << " (is the disk full? the next sweep tries again)";
    }
    lock.lock();
    cv_.wait_for(lock, options_.sweep_interval, [this] { return stopping_.load(); });
  }
}

void Head::wait(const std::atomic<bool>* stop) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!drained_ && !stopping_ && !(stop && *stop))
    cv_.wait_for(lock, std::chrono::milliseconds(100));
}

void Head::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (server_) server_->http.shutdown();
  if (listen_thread_.joinable()) listen_thread_.join();
  if (sweep_thread_.joinable()) sweep_thread_.join();
}

}  // namespace verl::launcher
