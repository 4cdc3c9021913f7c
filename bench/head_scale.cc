// bench/head_scale: one head against N simulated agents on this machine (issue 18).
//
// Starts a real head (`verlctl head --state-dir DIR`, the process `verlctl up` starts, with its own
// state directory and port) as a child, so that its CPU time and RSS are read from its own
// /proc/<pid>, apart from the simulator's. The N agents live in this process on one epoll loop,
// each doing what launcher/agent.cc does over HTTP/1.1: register; heartbeat every
// heartbeat_interval_s with its task reports, its work_dir and 8 GPU samples; start the ranks it is
// ordered to (one rank of a job of N ranks per node: trainer.nnodes=N, n_gpus_per_node=1) and
// report them running; ship each running rank's stdout (L lines per second, in a POST every
// --ship-ms as the agent's 1 s shipping tick does) and rank 0's metric rows (one per second);
// and on `down` (POST /api/shutdown) report its ranks exited and leave. Like the agent, each
// simulated node sends one request at a time (a heartbeat may wait behind a log POST) on one
// kept-alive connection, as the agent's HeadClient does (--keep-alive 0: a connection per request,
// what it did before issue 18).
//
// It prints one JSON line: the figures of the steady window (--seconds, after every agent has
// registered and every rank has started): heartbeat latency p50/p99/max, heartbeats sent and
// failed, the head's CPU in cores and RSS, state.db (+ WAL) size and growth per hour, log lines
// the head ingested per second (its own last seq, not what was sent), submit -> every rank
// ordered (= started by a real agent) and -> every rank acknowledged running, shutdown -> every
// agent's leave acknowledged, the errors by kind, and the machine's load (this bench and the head
// share its cores).
//
//   build/bench/head_scale --agents 1000 --seconds 60 [--log-lines-per-s 10] [--interval-s 1]
//                          [--keep-alive 0|1] [--ship-ms 1000] [--verlctl build/verlctl]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/ports.h"

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "head_scale: %s\n", what.c_str());
  std::exit(1);
}

struct Options {
  int agents = 100;
  double seconds = 60;
  double log_lines_per_s = 10;
  double interval_s = 1.0;
  double timeout_s = 10.0;
  int ship_ms = 1000;
  bool keep_alive = true;
  std::string verlctl;
  bool keep_dir = false;
};

// ---- /proc readings of the head ---------------------------------------------------------

double proc_cpu_s(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 14, 15: utime, stime (clock ticks)
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double self_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int64_t proc_status_kib(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1);
  return 0;
}

int64_t file_size(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- the simulated agents ----------------------------------------------------------------

enum class Kind { kRegister, kHeartbeat, kLogs, kMetrics, kLeave, kClient };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRegister: return "register";
    case Kind::kHeartbeat: return "heartbeat";
    case Kind::kLogs: return "logs";
    case Kind::kMetrics: return "metrics";
    case Kind::kLeave: return "leave";
    case Kind::kClient: return "client";
  }
  return "?";
}

struct Task {
  std::string id, job;
  int rank = 0, attempt = 0;
  bool exited = false;
  bool reported_running = false;  // a heartbeat with it running was answered 200
  bool exit_in_flight = false;    // the heartbeat in flight reports it exited
  bool exit_reported = false;     // ... and was answered 200
  int64_t offset = 0;             // stdout bytes shipped
  double lines_due = 0;           // lines written since the last ship
  int64_t line_no = 0;
  int64_t step = 0;
};

struct Agent {
  int index = 0;
  std::string name;
  int64_t id = -1;
  int fd = -1;
  int requests_on_fd = 0;
  bool busy = false;
  Kind kind = Kind::kHeartbeat;
  std::string out;  // request bytes
  size_t sent = 0;
  std::string in;   // response bytes
  Clock::time_point started;
  bool retried = false;
  Clock::time_point next_beat, next_ship, next_metrics;
  std::vector<Task> tasks;
  bool shutdown = false, left = false;
  Clock::time_point backoff_until{};
};

struct Stats {
  std::vector<double> hb_ms;  // heartbeat latencies in the window
  int64_t hb_sent = 0, hb_ok = 0, hb_failed = 0;
  int64_t log_posts = 0, log_lines_sent = 0, metric_posts = 0;
  std::map<std::string, int64_t> errors;
  bool window = false;
};

class Sim {
 public:
  Sim(const Options& o, int port, std::string token) : o_(o), port_(port), token_(std::move(token)) {
    ep_ = epoll_create1(0);
    agents_.resize(o.agents);
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> phase(0, o.interval_s);
    const auto now = Clock::now();
    for (int i = 0; i < o.agents; ++i) {
      auto& a = agents_[i];
      a.index = i;
      a.name = "node-" + std::to_string(i);
      // Agents that start together drift apart; spread their first beats over one interval.
      a.next_beat = now + std::chrono::microseconds(static_cast<int64_t>(phase(rng) * 1e6));
      a.next_ship = a.next_beat;
      a.next_metrics = a.next_beat;
    }
    gpus_ = Json::array();
    for (int g = 0; g < 8; ++g)
      gpus_.push_back({{"index", g}, {"util_pct", 97 - g}, {"mem_used_mib", 71234 + g}, {"mem_total_mib", 81559}});
    gpus_text_ = gpus_.dump();
  }

  Stats stats;
  Clock::time_point submitted{}, all_ordered{}, all_running{}, shutdown_at{}, all_left{};
  int ordered = 0, running = 0, left = 0, registered = 0;
  bool job_submitted = false;
  std::string job_name;
  bool shutting_down = false;

  // Runs the loop until pred() is true or the deadline passes; false on the deadline.
  template <class Pred>
  bool run_until(Pred pred, double max_s) {
    const auto until = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(max_s * 1e6));
    epoll_event events[256];
    while (!pred()) {
      const auto now = Clock::now();
      if (now >= until) return false;
      for (auto& a : agents_) maybe_start(a, now);
      const int n = epoll_wait(ep_, events, 256, 2);
      for (int i = 0; i < n; ++i) on_event(agents_[events[i].data.u32], events[i].events);
    }
    return true;
  }

 private:
  const Options& o_;
  int port_;
  std::string token_;
  int ep_;
  std::vector<Agent> agents_;
  Json gpus_;
  std::string gpus_text_;

  std::string request(const std::string& path, const std::string& body) const {
    std::string r = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                    "\r\nAuthorization: Bearer " + token_ + "\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n";
    if (!o_.keep_alive) r += "Connection: close\r\n";
    r += "\r\n";
    r += body;
    return r;
  }

  void maybe_start(Agent& a, Clock::time_point now) {
    if (a.busy || a.left || now < a.backoff_until) return;
    if (a.id < 0) {
      if (now < a.next_beat) return;
      Json res = {{"cpus", 96},
                  {"memory_bytes", int64_t{2} << 40},
                  {"gpus", 8},
                  {"gpu_names", Json::array()},
                  {"ib_ports", Json::array()}};
      for (int g = 0; g < 8; ++g) res["gpu_names"].push_back("NVIDIA H100 80GB HBM3");
      const Json body = {{"name", a.name}, {"host", "sim-" + a.name}, {"pid", 10000 + a.index}, {"resources", res}};
      return start(a, Kind::kRegister, request("/api/nodes/register", body.dump()));
    }
    if (a.shutdown) {
      bool all_reported = true;
      for (auto& t : a.tasks) all_reported = all_reported && t.exit_reported;
      if (all_reported) return start(a, Kind::kLeave, request("/api/nodes/" + std::to_string(a.id) + "/leave",
                                                             R"({"reason":"shutdown requested by the head"})"));
    }
    if (now >= a.next_beat) return heartbeat(a, now);
    if (now >= a.next_ship && !a.shutdown) {
      a.next_ship = now + std::chrono::milliseconds(o_.ship_ms);
      for (auto& t : a.tasks) {
        if (t.exited) continue;
        // Lines written since the last ship: what a rank printing L lines/s leaves in its file.
        t.lines_due += o_.log_lines_per_s * o_.ship_ms / 1000.0;
        const int n = static_cast<int>(t.lines_due);
        if (n <= 0) continue;
        t.lines_due -= n;
        std::string data;
        for (int i = 0; i < n; ++i) {
          char line[200];
          std::snprintf(line, sizeof line,
                        "(TaskRunner pid=%d) step %lld rank %d: actor/pg_loss=0.%06lld actor/entropy=1.%04d "
                        "response_length/mean=%lld throughput=%d tokens/s\\n",
                        4000 + t.rank, static_cast<long long>(t.line_no / 10), t.rank,
                        static_cast<long long>((t.line_no * 7919) % 1000000), static_cast<int>(t.line_no % 9973),
                        static_cast<long long>(200 + t.line_no % 300), 1500 + static_cast<int>(t.line_no % 700));
          data += line;
          ++t.line_no;
        }
        // The escaped "\n" is 2 bytes in JSON, 1 in the file: offsets count the file's bytes.
        const int64_t raw = static_cast<int64_t>(data.size()) - n;
        const std::string body = "{\"rank\":" + std::to_string(t.rank) + ",\"attempt\":" + std::to_string(t.attempt) +
                                 ",\"host\":\"sim-" + a.name + "\",\"chunks\":[{\"stream\":\"stdout\",\"offset\":" +
                                 std::to_string(t.offset) + ",\"data\":\"" + data + "\",\"eof\":false}]}";
        t.offset += raw;
        if (stats.window) {
          ++stats.log_posts;
          stats.log_lines_sent += n;
        }
        return start(a, Kind::kLogs, request("/api/jobs/" + t.job + "/logs", body));
      }
    }
    if (now >= a.next_metrics && !a.shutdown) {
      a.next_metrics = now + std::chrono::seconds(1);
      for (auto& t : a.tasks) {
        if (t.exited || t.rank != 0) continue;
        Json row = {{"step", ++t.step}};
        for (const char* k : {"actor/pg_loss", "actor/entropy", "actor/grad_norm", "actor/lr", "critic/score/mean",
                              "critic/rewards/mean", "response_length/mean", "timing_s/gen", "timing_s/update_actor",
                              "perf/throughput", "perf/mfu/actor", "perf/max_memory_allocated_gb"})
          row[k] = 0.5 + 0.001 * static_cast<double>(t.step);
        row["timing_s/step"] = 1.0;
        if (stats.window) ++stats.metric_posts;
        return start(a, Kind::kMetrics, request("/api/jobs/" + t.job + "/metrics", Json{{"rows", {row}}}.dump()));
      }
    }
  }

  void heartbeat(Agent& a, Clock::time_point now) {
    a.next_beat = now + std::chrono::microseconds(static_cast<int64_t>(o_.interval_s * 1e6));
    std::string tasks = "[";
    for (auto& t : a.tasks) {
      t.exit_in_flight = t.exited;
      if (tasks.size() > 1) tasks += ",";
      tasks += "{\"task\":\"" + t.id + "\",\"state\":\"" + (t.exited ? "exited" : "running") + "\"" +
               (t.exited ? ",\"exit_code\":0,\"signal\":15" : "") + "}";
    }
    tasks += "]";
    const std::string body =
        "{\"tasks\":" + tasks + ",\"work_dir\":\"/var/lib/verlctl/" + a.name + "\",\"gpus\":" + gpus_text_ + "}";
    if (stats.window) ++stats.hb_sent;
    start(a, Kind::kHeartbeat, request("/api/nodes/" + std::to_string(a.id) + "/heartbeat", body));
  }

  void error(Agent& a, const std::string& what) {
    ++stats.errors[std::string(kind_name(a.kind)) + ": " + what];
    if (a.kind == Kind::kHeartbeat && stats.window) ++stats.hb_failed;
  }

  bool connect_fd(Agent& a) {
    a.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(a.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Each node from its own address (127.0.x.y), as N hosts would be: from one address, a new
    // connection per request (HeadClient's way) ran out of the 4-tuples TIME_WAIT holds.
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl((127u << 24) | (static_cast<uint32_t>(1 + a.index / 250) << 8) |
                                static_cast<uint32_t>(1 + a.index % 250));
    ::bind(a.fd, reinterpret_cast<sockaddr*>(&src), sizeof src);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(a.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
      ::close(a.fd);
      a.fd = -1;
      return false;
    }
    a.requests_on_fd = 0;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(a.index);
    epoll_ctl(ep_, EPOLL_CTL_ADD, a.fd, &ev);
    return true;
  }

  void close_fd(Agent& a) {
    if (a.fd < 0) return;
    epoll_ctl(ep_, EPOLL_CTL_DEL, a.fd, nullptr);
    ::close(a.fd);
    a.fd = -1;
  }

  void start(Agent& a, Kind kind, std::string bytes) {
    a.busy = true;
    a.kind = kind;
    a.out = std::move(bytes);
    a.sent = 0;
    a.in.clear();
    a.retried = false;
    a.started = Clock::now();
    send_request(a);
  }

  void send_request(Agent& a) {
    if (a.fd < 0 && !connect_fd(a)) {
      error(a, std::string("connect: ") + std::strerror(errno));
      return finish(a, false);
    }
    ++a.requests_on_fd;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(a.index);
    epoll_ctl(ep_, EPOLL_CTL_MOD, a.fd, &ev);
  }

  void on_event(Agent& a, uint32_t events) {
    if (!a.busy) {  // an idle kept-alive connection the head closed
      close_fd(a);
      return;
    }
    if ((events & EPOLLOUT) && a.sent < a.out.size()) {
      const ssize_t n = ::send(a.fd, a.out.data() + a.sent, a.out.size() - a.sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return broken(a, std::string("send: ") + std::strerror(errno));
      if (n > 0) a.sent += static_cast<size_t>(n);
      if (a.sent == a.out.size()) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = static_cast<uint32_t>(a.index);
        epoll_ctl(ep_, EPOLL_CTL_MOD, a.fd, &ev);
      }
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      char buf[16384];
      for (;;) {
        const ssize_t n = ::recv(a.fd, buf, sizeof buf, 0);
        if (n > 0) {
          a.in.append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n == 0) break;  // closed: the answer must be complete now
        if (errno == EAGAIN || errno == EINTR) {
          if (!complete(a)) return;
          break;
        }
        return broken(a, std::string("recv: ") + std::strerror(errno));
      }
      if (!complete(a)) return broken(a, "connection closed before a whole answer");
      answered(a);
    }
  }

  // A kept-alive connection the head had closed (its keep-alive timeout or request cap) fails on
  // first use: once, the request goes again on a new connection, as httplib's client does.
  void broken(Agent& a, const std::string& what) {
    const bool reused = a.requests_on_fd > 1 && a.in.empty();
    close_fd(a);
    if (reused && !a.retried) {
      a.retried = true;
      a.sent = 0;
      return send_request(a);
    }
    error(a, what);
    finish(a, false);
  }

  bool complete(const Agent& a) const {
    const auto end = a.in.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    const auto cl = a.in.find("Content-Length: ");
    if (cl == std::string::npos || cl > end) return true;  // read to the close
    return a.in.size() >= end + 4 + static_cast<size_t>(std::atoll(a.in.c_str() + cl + 16));
  }

  void answered(Agent& a) {
    const auto end = a.in.find("\r\n\r\n");
    const int status = a.in.size() > 12 ? std::atoi(a.in.c_str() + 9) : 0;
    const bool close_now = !o_.keep_alive || a.in.find("Connection: close") < end;
    const std::string body = a.in.substr(end + 4);
    if (close_now) close_fd(a);
    if (status < 200 || status >= 300) {
      error(a, "HTTP " + std::to_string(status));
      return finish(a, false);
    }
    const auto now = Clock::now();
    if (a.kind == Kind::kHeartbeat && stats.window) stats.hb_ms.push_back(secs(now - a.started) * 1000);
    if (a.kind == Kind::kHeartbeat) ++stats.hb_ok;
    if (a.kind == Kind::kRegister) {
      a.id = Json::parse(body).at("id").get<int64_t>();
      a.next_beat = now;
      ++registered;
    } else if (a.kind == Kind::kHeartbeat) {
      for (auto& t : a.tasks) t.exit_reported = t.exit_reported || t.exit_in_flight;
      for (auto& t : a.tasks)
        if (!t.reported_running && !t.exited) {
          t.reported_running = true;
          if (++running == o_.agents) all_running = now;
        }
      if (body != R"({"shutdown":false,"tasks":[]})") {
        const Json j = Json::parse(body);
        for (const auto& order : j.value("tasks", Json::array())) on_order(a, order, now);
        if (j.value("shutdown", false) && !a.shutdown) {
          a.shutdown = true;  // wind down: the ranks end, the next heartbeat says so, then leave
          for (auto& t : a.tasks) t.exited = true;
          a.next_beat = now;
        }
      }
    } else if (a.kind == Kind::kLeave) {
      a.left = true;
      if (++left == o_.agents) all_left = now;
    }
    finish(a, true);
  }

  void on_order(Agent& a, const Json& order, Clock::time_point now) {
    const std::string task = order.value("task", std::string());
    if (order.value("action", std::string()) == "stop") {
      for (auto& t : a.tasks)
        if (t.id == task) t.exited = true;
      return;
    }
    for (auto& t : a.tasks)
      if (t.id == task) return;  // a start order repeats until the task is reported
    Task t;
    t.id = task;
    t.job = order.value("job", std::string());
    t.rank = order.value("rank", 0);
    t.attempt = order.value("attempt", 0);
    a.tasks.push_back(t);
    a.next_beat = now;  // the agent starts the rank now; its next heartbeat reports it
    if (++ordered == o_.agents) all_ordered = now;
  }

  // After a failure the node waits 200 ms before its next request, as an agent waits for its
  // next tick; a leave that failed is not retried (the head has gone: down_all_left stays null).
  void finish(Agent& a, bool ok) {
    a.busy = false;
    if (!ok) a.backoff_until = Clock::now() + std::chrono::milliseconds(200);
    if (!ok && a.kind == Kind::kLeave) a.left = true;
  }
};

// ---- plain blocking requests of the bench itself (submit, job detail, cluster) --------------

std::string blocking_request(int port, const std::string& token, const std::string& method, const std::string& path,
                             const std::string& body, int* status) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    *status = 0;
    return "";
  }
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                  "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body;
  ::send(fd, r.data(), r.size(), MSG_NOSIGNAL);
  std::string in;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) in.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const auto end = in.find("\r\n\r\n");
  *status = in.size() > 12 ? std::atoi(in.c_str() + 9) : 0;
  return end == std::string::npos ? "" : in.substr(end + 4);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - (p > 0 ? 1 : 0));
  return v[i];
}

double round3(double x) { return std::round(x * 1000) / 1000; }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.verlctl = (fs::path(argv[0]).parent_path() / ".." / "verlctl").string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--agents") o.agents = std::stoi(next());
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--log-lines-per-s") o.log_lines_per_s = std::stod(next());
    else if (a == "--interval-s") o.interval_s = std::stod(next());
    else if (a == "--ship-ms") o.ship_ms = std::stoi(next());
    else if (a == "--keep-alive") o.keep_alive = next() != "0";
    else if (a == "--verlctl") o.verlctl = next();
    else if (a == "--keep-dir") o.keep_dir = true;
    else if (a == "-h" || a == "--help") {
      std::puts("head_scale --agents N --seconds S [--log-lines-per-s L] [--interval-s 1] [--keep-alive 0|1]"
                " [--ship-ms 1000] [--verlctl PATH] [--keep-dir]");
      return 0;
    } else {
      die("unknown flag " + a);
    }
  }
  if (o.agents < 1 || o.seconds <= 0 || o.interval_s <= 0 || o.ship_ms <= 0) die("flags out of range");
  if (::access(o.verlctl.c_str(), X_OK) != 0) die("no verlctl at " + o.verlctl + " (--verlctl PATH)");
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  // The head's state directory, as `verlctl up --local N` would write it.
  char tmpl[] = "/tmp/head_scale.XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const int port = verl::free_tcp_port();
  const std::string token = "headscale-" + std::to_string(::getpid());
  {
    Json nodes = Json::array();
    for (int i = 0; i < o.agents; ++i) nodes.push_back({{"host", "127.0.0.1"}});
    const Json spec = {{"name", "headscale"},
                       {"backend", "local"},
                       {"head",
                        {{"bind_host", "127.0.0.1"},
                         {"dashboard_port", port},
                         {"heartbeat_interval_s", o.interval_s},
                         {"heartbeat_timeout_s", o.timeout_s},
                         {"store_port", verl::free_tcp_port()}}},
                       {"nodes", nodes}};
    std::ofstream(dir + "/cluster.json") << spec.dump(2);
    std::ofstream(dir + "/token") << token << "\n";
  }
  const pid_t head = ::fork();
  if (head == 0) {
    const int log = ::open((dir + "/head.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execl(o.verlctl.c_str(), o.verlctl.c_str(), "head", "--state-dir", dir.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  auto kill_head = [&] {
    if (head > 0 && ::waitpid(head, nullptr, WNOHANG) == 0) {
      ::kill(head, SIGTERM);
      ::waitpid(head, nullptr, 0);
    }
  };
  for (int i = 0;; ++i) {
    int status = 0;
    blocking_request(port, token, "GET", "/api/cluster", "", &status);
    if (status == 200) break;
    if (i > 200 || ::waitpid(head, nullptr, WNOHANG) != 0) {
      kill_head();
      die("the head did not come up; its log is " + dir + "/head.log");
    }
    ::usleep(50000);
  }

  const std::string load_before = loadavg();
  Sim sim(o, port, token);
  const auto t_start = Clock::now();
  bool ok = sim.run_until([&] { return sim.registered == o.agents; }, 60);
  const double register_s = secs(Clock::now() - t_start);
  // The job: one rank per node over every node (trainer.nnodes=N, one GPU each).
  int status = 0;
  const Json submit = {{"kind", "train"},
                       {"overrides", {"trainer.nnodes=" + std::to_string(o.agents), "trainer.n_gpus_per_node=1",
                                      "trainer.total_training_steps=100000", "actor_rollout_ref.rollout.n=1",
                                      // batches that split over N ranks
                                      "data.train_batch_size=" + std::to_string(o.agents),
                                      "actor_rollout_ref.actor.ppo_mini_batch_size=" + std::to_string(o.agents),
                                      "critic.ppo_mini_batch_size=" + std::to_string(o.agents),
                                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                                      "critic.ppo_micro_batch_size_per_gpu=1"}}};
  if (ok) {
    sim.run_until([] { return false; }, o.interval_s);  // one round of heartbeats first
    sim.submitted = Clock::now();
    const std::string answer = blocking_request(port, token, "POST", "/api/jobs", submit.dump(), &status);
    if (status != 201) {
      kill_head();
      die("submit answered " + std::to_string(status) + ": " + answer);
    }
    sim.job_name = Json::parse(answer).at("id").get<std::string>();
    ok = sim.run_until([&] { return sim.running == o.agents; }, 120);
  }
  // The steady window.
  auto last_seq = [&] {
    int st = 0;
    const std::string b = blocking_request(port, token, "GET", "/api/jobs/" + sim.job_name + "/logs?tail=0", "", &st);
    return st == 200 ? Json::parse(b).value("next", int64_t{0}) : int64_t{0};
  };
  const std::string db = dir + "/state.db";
  auto db_bytes = [&] { return file_size(db) + file_size(db + "-wal"); };
  const int64_t seq0 = last_seq();
  const int64_t db0 = db_bytes();
  const double head_cpu0 = proc_cpu_s(head), self_cpu0 = self_cpu_s();
  const auto w0 = Clock::now();
  sim.stats.window = true;
  if (ok) sim.run_until([] { return false; }, o.seconds);
  sim.stats.window = false;
  const double window_s = secs(Clock::now() - w0);
  const double head_cpu = (proc_cpu_s(head) - head_cpu0) / window_s;
  const double self_cpu = (self_cpu_s() - self_cpu0) / window_s;
  const int64_t rss_kib = proc_status_kib(head, "VmRSS"), hwm_kib = proc_status_kib(head, "VmHWM");
  const int64_t threads = proc_status_kib(head, "Threads");
  const int64_t seq1 = last_seq();
  const int64_t db1 = db_bytes();
  const std::string load_after = loadavg();
  Json lost = nullptr;
  {
    const std::string b = blocking_request(port, token, "GET", "/api/cluster", "", &status);
    if (status == 200) lost = Json::parse(b)["counts"]["lost"];
  }

  // down: the head tells every agent in its heartbeat answer; each ends its ranks and leaves.
  sim.shutdown_at = Clock::now();
  blocking_request(port, token, "POST", "/api/shutdown", "", &status);
  const bool down_ok = sim.run_until([&] { return sim.left == o.agents; }, 60);
  int head_status = 0;
  for (int i = 0; i < 200 && ::waitpid(head, &head_status, WNOHANG) == 0; ++i) ::usleep(50000);
  const double head_exit_s = secs(Clock::now() - sim.shutdown_at);
  kill_head();

  auto since = [&](Clock::time_point t) { return t == Clock::time_point{} ? Json(nullptr) : Json(round3(secs(t - sim.submitted))); };
  Json errors = Json::object();
  int64_t n_errors = 0;
  for (const auto& [k, v] : sim.stats.errors) {
    errors[k] = v;
    n_errors += v;
  }
  const auto& hb = sim.stats.hb_ms;
  const Json out = {
      {"agents", o.agents},
      {"seconds", round3(window_s)},
      {"heartbeat_interval_s", o.interval_s},
      {"keep_alive", o.keep_alive},
      {"log_lines_per_s_per_rank", o.log_lines_per_s},
      {"register_all_s", round3(register_s)},
      {"heartbeats", sim.stats.hb_sent},
      {"heartbeats_per_s", round3(static_cast<double>(sim.stats.hb_sent) / window_s)},
      {"heartbeats_failed", sim.stats.hb_failed},
      {"nodes_lost", lost},
      {"heartbeat_ms", {{"p50", round3(percentile(hb, 0.5))}, {"p99", round3(percentile(hb, 0.99))},
                        {"max", round3(hb.empty() ? 0 : *std::max_element(hb.begin(), hb.end()))}}},
      {"head_cpu_cores", round3(head_cpu)},
      {"head_rss_mib", round3(static_cast<double>(rss_kib) / 1024)},
      {"head_peak_rss_mib", round3(static_cast<double>(hwm_kib) / 1024)},
      {"head_threads", threads},
      {"bench_cpu_cores", round3(self_cpu)},
      {"state_db_mib", round3(static_cast<double>(db1) / (1 << 20))},
      {"state_db_growth_mib_per_h", round3(static_cast<double>(db1 - db0) / (1 << 20) / window_s * 3600)},
      {"log_lines_sent_per_s", round3(static_cast<double>(sim.stats.log_lines_sent) / window_s)},
      {"log_lines_ingested_per_s", round3(static_cast<double>(seq1 - seq0) / window_s)},
      {"log_posts_per_s", round3(static_cast<double>(sim.stats.log_posts) / window_s)},
      {"metric_posts", sim.stats.metric_posts},
      {"submit_to_all_ordered_s", since(sim.all_ordered)},
      {"submit_to_all_running_s", since(sim.all_running)},
      {"down_all_left_s", down_ok ? Json(round3(secs(sim.all_left - sim.shutdown_at))) : Json(nullptr)},
      {"down_head_exit_s", round3(head_exit_s)},
      {"errors", n_errors},
      {"error_kinds", errors},
      {"load_before", load_before},
      {"load_after", load_after},
      {"cores", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))}};
  std::printf("%s\n", out.dump().c_str());
  if (o.keep_dir) std::fprintf(stderr, "head_scale: state kept in %s\n", dir.c_str());
  else fs::remove_all(dir);
  return ok && down_ok ? 0 : 1;
}
