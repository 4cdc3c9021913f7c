#include "launcher/head.h"

#include <unistd.h>

#include <httplib.h>

#include "common/error.h"
#include "common/log.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

void reply(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
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

Json parse_body(const httplib::Request& req) {
  if (req.body.empty()) return Json::object();
  return Json::parse(req.body);  // nlohmann's exception is turned into a 400 by the caller
}

}  // namespace

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Head::Server {
  httplib::Server http;
};

Head::Head(HeadOptions options)
    : options_(std::move(options)), registry_(options_.db_path), server_(std::make_unique<Server>()) {
  if (options_.token.empty())
    throw Error(ExitCode::kFailure, "the head needs a token", "verlctl up writes one into the state directory");
}

Head::~Head() { stop(); }

void Head::install_routes() {
  auto& http = server_->http;
  const std::string token = options_.token;
  http.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) != 0 || !same_token(auth.substr(prefix.size()), token)) {
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
    } catch (const std::exception& e) {
      log::Err() << req.method << " " << req.path << ": " << e.what();
      fail(res, 500, e.what());
    }
  });

  http.Post("/api/nodes/register", [this](const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req);
    if (!body.contains("name") || !body["name"].is_string() || body["name"].get<std::string>().empty())
      return fail(res, 400, "register: 'name' (a non-empty string) is required");
    if (shutting_down_) return fail(res, 409, "the head is shutting down");
    const Resources resources = resources_from_json(body.value("resources", Json::object()));
    const auto node = registry_.register_node(body["name"].get<std::string>(), body.value("host", ""),
                                              body.value("pid", int64_t{0}), resources, now_ms());
    log::Info() << "node " << node.name << " registered (id " << node.id << ", host " << node.host << ", pid "
                << node.pid << ", " << resources.cpus << " CPUs, " << format_bytes(resources.memory_bytes) << ", "
                << resources.gpus << " GPUs, " << resources.ib_ports.size() << " IB ports)";
    reply(res, 200,
          Json{{"id", node.id},
               {"heartbeat_interval_s", static_cast<double>(options_.heartbeat_interval.count()) / 1000.0}});
  });

  http.Post(R"(/api/nodes/(\d+)/heartbeat)", [this](const httplib::Request& req, httplib::Response& res) {
    const int64_t id = std::stoll(req.matches[1].str());
    const NodeState before = [&] {
      auto n = registry_.node(id);
      return n ? n->state : NodeState::kAlive;
    }();
    auto node = registry_.heartbeat(id, now_ms());
    if (!node) return fail(res, 404, "no node " + std::to_string(id) + "; register again");
    if (before == NodeState::kLost) log::Info() << "node " << node->name << " is heard from again";
    reply(res, 200, Json{{"shutdown", shutting_down_.load()}});
  });

  http.Post(R"(/api/nodes/(\d+)/leave)", [this](const httplib::Request& req, httplib::Response& res) {
    const int64_t id = std::stoll(req.matches[1].str());
    const Json body = parse_body(req);
    const std::string reason = body.value("reason", std::string("agent left"));
    if (!registry_.leave(id, reason, now_ms())) return fail(res, 404, "no node " + std::to_string(id));
    const auto node = registry_.node(id);
    log::Info() << "node " << (node ? node->name : std::to_string(id)) << " left: " << reason;
    cv_.notify_all();
    reply(res, 200, Json::object());
  });

  http.Get("/api/nodes", [this](const httplib::Request&, httplib::Response& res) {
    const int64_t now = now_ms();
    Json nodes = Json::array();
    for (const auto& n : registry_.nodes()) nodes.push_back(to_json(n, now));
    reply(res, 200, Json{{"nodes", nodes}});
  });

  http.Get("/api/cluster", [this](const httplib::Request&, httplib::Response& res) {
    const int64_t now = now_ms();
    int alive = 0, lost = 0, left = 0;
    for (const auto& n : registry_.nodes()) {
      if (n.state == NodeState::kAlive) ++alive;
      else if (n.state == NodeState::kLost) ++lost;
      else ++left;
    }
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    reply(res, 200,
          Json{{"name", options_.cluster_name},
               {"backend", options_.backend},
               {"state", shutting_down_ ? "shutting_down" : "up"},
               {"head",
                {{"bind", options_.bind_host + ":" + std::to_string(port_)},
                 {"hostname", host},
                 {"pid", static_cast<int64_t>(getpid())},
                 {"started_ms", started_ms_},
                 {"uptime_s", static_cast<double>(now - started_ms_) / 1000.0}}},
               {"heartbeat_interval_s", static_cast<double>(options_.heartbeat_interval.count()) / 1000.0},
               {"heartbeat_timeout_s", static_cast<double>(options_.heartbeat_timeout.count()) / 1000.0},
               {"expected_nodes", options_.expected_nodes},
               {"counts", {{"alive", alive}, {"lost", lost}, {"left", left}}}});
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
  });
  http.set_read_timeout(std::chrono::seconds(5));
  http.set_write_timeout(std::chrono::seconds(5));
  registry_.clear();
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
  started_ms_ = now_ms();
  listen_thread_ = std::thread([this] { server_->http.listen_after_bind(); });
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
    sweep();
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
  if (server_) server_->http.stop();
  if (listen_thread_.joinable()) listen_thread_.join();
  if (sweep_thread_.joinable()) sweep_thread_.join();
}

}  // namespace verl::launcher
