// The head in-process on a free loopback port: bearer-token auth (401 without it or with another
// token), the node endpoints, heartbeat loss with short timeouts, and the shutdown handshake.
#include "launcher/head.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/error.h"
#include "launcher/head_client.h"
#include "tests/testing/eventually.h"
#include "tests/testing/head_fixture.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using testing::address_of;
using testing::eventually;
constexpr const char* kToken = testing::kTestToken;

// Heartbeats lost after 300 ms; node-0 and node-1 expected.
HeadOptions fast_options() {
  HeadOptions o = testing::fast_head_options(300ms, 2000ms);
  o.cluster_name = "test";
  o.expected_nodes = {"node-0", "node-1"};
  return o;
}

Json registration(const std::string& name) {
  Resources r;
  r.cpus = 4;
  r.memory_bytes = int64_t{1} << 30;
  return {{"name", name}, {"host", "testhost"}, {"pid", 1234}, {"resources", to_json(r)}};
}

TEST(Head, RequestWithoutTokenIs401) {
  Head head(fast_options());
  head.start();
  HeadClient anonymous(address_of(head), "");
  for (const char* path : {"/api/nodes", "/api/cluster"}) {
    auto r = anonymous.try_request("GET", path, nullptr);
    ASSERT_TRUE(r.answered()) << path << ": " << r.unreachable;
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_EQ(r.body.value("error", ""), "missing bearer token");
  }
  const Json body = registration("node-0");
  for (const char* path : {"/api/nodes/register", "/api/nodes/1/heartbeat", "/api/shutdown"}) {
    auto r = anonymous.try_request("POST", path, &body);
    ASSERT_TRUE(r.answered()) << path << ": " << r.unreachable;
    EXPECT_EQ(r.status, 401) << path;
  }
  EXPECT_TRUE(head.registry().nodes().empty()) << "a 401 request must not reach its handler";
  EXPECT_FALSE(head.shutting_down());
}

TEST(Head, WrongTokenIs401AndTheClientSaysSo) {
  Head head(fast_options());
  head.start();
  HeadClient wrong(address_of(head), std::string(kToken).replace(0, 1, "f"));
  auto r = wrong.try_request("GET", "/api/cluster", nullptr);
  ASSERT_TRUE(r.answered()) << r.unreachable;
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body.value("error", ""), "wrong bearer token");
  try {
    wrong.get("/api/cluster");
    FAIL() << "get() must throw on 401";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kFailure);
    EXPECT_NE(std::string(e.what()).find("rejected the token"), std::string::npos) << e.what();
  }
}

TEST(Head, RightTokenRegistersHeartbeatsAndLists) {
  Head head(fast_options());
  head.start();
  HeadClient client(address_of(head), kToken);
  const Json reg = client.post("/api/nodes/register", registration("node-0"));
  ASSERT_TRUE(reg.contains("id"));
  const int64_t id = reg["id"].get<int64_t>();
  EXPECT_DOUBLE_EQ(reg["heartbeat_interval_s"].get<double>(), 0.05);
  const Json hb = client.post("/api/nodes/" + std::to_string(id) + "/heartbeat", Json::object());
  EXPECT_EQ(hb["shutdown"], false);
  const Json nodes = client.get("/api/nodes")["nodes"];
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["name"], "node-0");
  EXPECT_EQ(nodes[0]["state"], "alive");
  EXPECT_EQ(nodes[0]["host"], "testhost");
  EXPECT_EQ(nodes[0]["resources"]["cpus"], 4);
  EXPECT_EQ(nodes[0]["heartbeats"], 1);
  const Json cluster = client.get("/api/cluster");
  EXPECT_EQ(cluster["name"], "test");
  EXPECT_EQ(cluster["state"], "up");
  EXPECT_EQ(cluster["expected_nodes"], Json::array({"node-0", "node-1"}));
  EXPECT_EQ(cluster["counts"]["alive"], 1);
  EXPECT_EQ(cluster["head"]["pid"], static_cast<int64_t>(::getpid()));
}

TEST(Head, BadRequestsAreAnswered4xx) {
  Head head(fast_options());
  head.start();
  HeadClient client(address_of(head), kToken);
  const Json no_name = {{"host", "h"}};
  EXPECT_EQ(client.try_request("POST", "/api/nodes/register", &no_name).status, 400);
  const Json empty = Json::object();
  EXPECT_EQ(client.try_request("POST", "/api/nodes/77/heartbeat", &empty).status, 404);
  EXPECT_EQ(client.try_request("GET", "/api/no-such-thing", nullptr).status, 404);
}

// A raw request, bytes as given: HeadClient writes only valid UTF-8.
httplib::Result raw(const Head& head, const std::string& method, const std::string& path, const std::string& body) {
  httplib::Client cli("127.0.0.1", head.port());
  cli.set_read_timeout(5, 0);
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kToken}};
  if (method == "GET") return cli.Get(path.c_str(), auth);
  return cli.Post(path.c_str(), auth, body, "application/json");
}

// Issue 16, case 1: the parse error quoted the byte, and dumping it threw out of the handler.
TEST(Head, InvalidUtf8InABodyIs400AndTheHeadStaysUp) {
  Head head(fast_options());
  head.start();
  for (const char* path : {"/api/nodes/register", "/api/nodes/1/heartbeat", "/api/jobs"}) {
    auto r = raw(head, "POST", path, "{\"name\":\"\xff\xfe\"}");
    ASSERT_TRUE(r) << path << ": the head did not answer";
    EXPECT_EQ(r->status, 400) << path << ": " << r->body;
    EXPECT_FALSE(Json::parse(r->body, nullptr, /*allow_exceptions=*/false).is_discarded()) << "valid JSON: " << r->body;
  }
  auto r = raw(head, "POST", "/api/nodes/register", "{\"grace_s\":\"\xff\"");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("bad request body"), std::string::npos) << r->body;
  EXPECT_TRUE(raw(head, "GET", "/api/cluster", ""));
}

TEST(Head, ADeeplyNestedBodyIs400) {
  Head head(fast_options());
  head.start();
  auto r = raw(head, "POST", "/api/nodes/register", std::string(100000, '['));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("nested deeper than"), std::string::npos) << r->body;
  // A body past the limit is refused (413, or the connection closed while it is still sent).
  auto big = raw(head, "POST", "/api/nodes/register", std::string(size_t{40} << 20, ' '));
  if (big) EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(head.registry().nodes().empty());
  EXPECT_TRUE(raw(head, "GET", "/api/cluster", "")) << "the head still answers";
}

// Issue 16, case 8: numbers past int64 were 500 {"error":"stoll"}; rank 2^32 read as rank 0.
TEST(Head, IdsAndNumbersPastTheirRangeAre404Or400) {
  Head head(fast_options());
  head.start();
  const std::string huge = "99999999999999999999999";
  auto hb = raw(head, "POST", "/api/nodes/" + huge + "/heartbeat", "{}");
  ASSERT_TRUE(hb);
  EXPECT_EQ(hb->status, 404) << hb->body;
  auto job = raw(head, "GET", "/api/jobs/job-" + huge, "");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->status, 404) << job->body;
  EXPECT_NE(job->body.find("no job job-" + huge), std::string::npos) << job->body;
  // A job, so that the query parameters are read.
  HeadClient client(address_of(head), kToken);
  const Json submit = {{"kind", "train"}, {"overrides", Json::array()}};
  const Json made = client.post("/api/jobs", submit);
  const std::string logs = "/api/jobs/" + made["id"].get<std::string>() + "/logs";
  for (const std::string& q : std::vector<std::string>{"?rank=4294967296", "?rank=" + huge, "?after=" + huge, "?rank=1x", "?limit=-"}) {
    auto r = raw(head, "GET", logs + q, "");
    ASSERT_TRUE(r) << q;
    EXPECT_EQ(r->status, 400) << q << ": " << r->body;
    EXPECT_NE(r->body.find("is not an integer within"), std::string::npos) << r->body;
  }
  auto ok = raw(head, "GET", logs + "?rank=0&after=0", "");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// GET /api/jobs is served from an answer built once per job store version (issue 18): it must
// never be older than the store. Each write a summary shows (a new job, a stop, a metric row)
// is in the very next answer, and two reads without a write between are the same bytes.
TEST(Head, JobListFollowsEveryWriteAtOnce) {
  Head head(fast_options());
  head.start();
  HeadClient client(address_of(head), kToken);
  auto list = [&] { return raw(head, "GET", "/api/jobs", "")->body; };
  EXPECT_EQ(Json::parse(list())["jobs"].size(), 0u);
  const std::string id = client.post("/api/jobs", Json{{"kind", "train"}, {"overrides", Json::array()}})["id"];
  const Json one = Json::parse(list());
  ASSERT_EQ(one["jobs"].size(), 1u);
  EXPECT_EQ(one["jobs"][0]["state"], "PENDING");
  EXPECT_EQ(list(), list()) << "no write: the same answer";
  head.jobs().put_metrics(std::stoll(id.substr(4)), Json::array({{{"step", 3}}}), 1000);
  EXPECT_EQ(Json::parse(list())["jobs"][0]["step"], 3);
  client.post("/api/jobs/" + id + "/stop", Json::object());
  EXPECT_EQ(Json::parse(list())["jobs"][0]["state"], "STOPPED");
  client.post("/api/jobs", Json{{"kind", "train"}, {"overrides", Json::array()}});
  EXPECT_EQ(Json::parse(list())["jobs"].size(), 2u);
}

// The agent keeps its connection alive (head_client.h); the head closes one idle for 5 s. An
// agent with a longer heartbeat interval must not lose its next request to the closed socket.
TEST(Head, AKeptAliveClientOutlivesTheHeadsIdleTimeout) {
  Head head(fast_options());
  head.start();
  HeadClient client(address_of(head), kToken);
  client.set_keep_alive(true);
  const auto first = client.try_request("GET", "/api/cluster", nullptr);
  ASSERT_TRUE(first.answered()) << first.unreachable;
  std::this_thread::sleep_for(std::chrono::milliseconds(5600));
  auto r = client.try_request("GET", "/api/cluster", nullptr);
  ASSERT_TRUE(r.answered()) << r.unreachable;
  EXPECT_EQ(r.status, 200);
}

// Found by tests/fuzz/head_requests_fuzz.cc and review of the handlers: get<int>() of 1e300 (a
// float-to-int overflow, undefined), a rank past int, a task that is not an object, 1e999 (nlohmann's
// out_of_range). Each is a 400 naming the field, and the head stays up.
TEST(Head, NumbersThatDoNotFitTheirFieldAre400NamingIt) {
  Head head(fast_options());
  head.start();
  HeadClient client(address_of(head), kToken);
  const Json made = client.post("/api/jobs", Json{{"kind", "train"}, {"overrides", Json::array()}});
  const std::string job = "/api/jobs/" + made["id"].get<std::string>();
  const Json reg = client.post("/api/nodes/register", Json{{"name", "n0"}, {"resources", {{"cpus", 1}, {"memory_bytes", 1}, {"gpus", 0}}}});
  const std::string node = "/api/nodes/" + std::to_string(reg["id"].get<int64_t>());
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {job + "/logs", R"({"rank": 1e300, "chunks": []})", "'rank'"},
      {job + "/logs", R"({"rank": 4294967296})", "'rank'"},
      {job + "/logs", R"({"rank": 0, "chunks": [{"offset": -1}]})", "'offset'"},
      {job + "/results", R"({"rank": 1e300})", "'rank'"},
      {job + "/stop", R"({"grace_s": 1e999})", "bad request body"},
      {"/api/nodes/register", R"({"name": "n1", "resources": {"cpus": 1e300, "memory_bytes": 1, "gpus": 0}})", "'cpus'"},
      {node + "/heartbeat", R"({"tasks": [5]})", "tasks[0]: must be a JSON object"},
      {node + "/heartbeat", R"({"tasks": [{"task": "job-1.0.0", "state": "exited", "signal": 1e300}]})", "'signal'"},
  };
  for (const auto& [path, body, names] : cases) {
    auto r = raw(head, "POST", path, body);
    ASSERT_TRUE(r) << path << " " << body;
    EXPECT_EQ(r->status, 400) << path << " " << body << ": " << r->body;
    EXPECT_NE(r->body.find(names), std::string::npos) << path << " " << body << ": " << r->body;
  }
  EXPECT_EQ(head.registry().nodes().size(), 1u);
  EXPECT_TRUE(raw(head, "GET", "/api/cluster", "")) << "the head still answers";
}

// Issue 16, case 5: a write that fails in the sweep thread ("database or disk is full", here a
// lock held past the busy timeout) is reported, and the sweep goes on once the store can be written.
TEST(Head, AStoreThatCannotBeWrittenDoesNotEndTheHead) {
  const testing::TempDir dir("head_store");
  HeadOptions o = fast_options();
  o.db_path = (dir / "state.db").string();
  {
    Head head(o);
    head.start();
    HeadClient client(address_of(head), kToken);
    const int64_t id = client.post("/api/nodes/register", registration("node-0"))["id"].get<int64_t>();
    {
      SQLite::Database other(o.db_path, SQLite::OPEN_READWRITE);
      SQLite::Transaction hold(other, SQLite::TransactionBehavior::EXCLUSIVE);
      // Past the heartbeat timeout and the store's 5 s busy timeout: the sweep's write fails.
      std::this_thread::sleep_for(5600ms);
    }
    EXPECT_TRUE(eventually([&] {
      const Json all = client.get("/api/nodes");
      return all["nodes"][0]["id"] == id && all["nodes"][0]["state"] == "lost";
    }, 10000ms)) << "the sweep goes on after the failed write";
  }
}

TEST(Head, SilentNodeIsMarkedLostWithinTheTimeout) {
  Head head(fast_options());  // timeout 300 ms, sweep every 20 ms
  head.start();
  HeadClient client(address_of(head), kToken);
  const int64_t quiet = client.post("/api/nodes/register", registration("node-0"))["id"].get<int64_t>();
  const int64_t chatty = client.post("/api/nodes/register", registration("node-1"))["id"].get<int64_t>();
  const auto started = Clock::now();
  std::atomic<bool> done{false};
  std::thread beats([&] {
    HeadClient c(address_of(head), kToken);
    while (!done) {
      c.try_request("POST", "/api/nodes/" + std::to_string(chatty) + "/heartbeat", nullptr);
      std::this_thread::sleep_for(50ms);
    }
  });
  auto state_of = [&](int64_t id) {
    const Json all = client.get("/api/nodes");  // kept: a range-for over a temporary's member dangles
    for (const auto& n : all["nodes"])
      if (n["id"] == id) return n;
    return Json::object();
  };
  EXPECT_TRUE(eventually([&] { return state_of(quiet)["state"] == "lost"; }, 3000ms));
  const double waited = std::chrono::duration<double>(Clock::now() - started).count();
  EXPECT_GE(waited, 0.25) << "lost before its timeout";
  const Json lost = state_of(quiet);
  EXPECT_TRUE(lost["lost_ms"].is_number());
  EXPECT_NE(lost["reason"].get<std::string>().find("no heartbeat for"), std::string::npos) << lost.dump();
  std::this_thread::sleep_for(400ms);  // longer than the timeout: the one that heartbeats stays alive
  EXPECT_EQ(state_of(chatty)["state"], "alive");
  done = true;
  beats.join();
  EXPECT_EQ(client.get("/api/cluster")["counts"]["lost"], 1);
}

TEST(Head, ShutdownIsToldInHeartbeatsAndDrainsWhenAgentsLeave) {
  Head head(fast_options());
  head.start();
  HeadClient client(address_of(head), kToken);
  const int64_t id = client.post("/api/nodes/register", registration("node-0"))["id"].get<int64_t>();
  EXPECT_EQ(client.post("/api/shutdown", Json::object())["agents"], 1);
  EXPECT_TRUE(head.shutting_down());
  EXPECT_EQ(client.get("/api/cluster")["state"], "shutting_down");
  EXPECT_EQ(client.post("/api/nodes/" + std::to_string(id) + "/heartbeat", Json::object())["shutdown"], true);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    head.wait();
    returned = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(returned) << "the head must wait for its alive agent to leave";
  client.post("/api/nodes/" + std::to_string(id) + "/leave", Json{{"reason", "shutdown"}});
  EXPECT_TRUE(eventually([&] { return returned.load(); }, 2000ms));
  waiter.join();
  const Json nobody = registration("node-9");
  EXPECT_EQ(client.try_request("POST", "/api/nodes/register", &nobody).status, 409);
}

TEST(Head, ShutdownGraceEndsTheWaitForAgentsThatNeverLeave) {
  auto o = fast_options();
  o.heartbeat_timeout = 60000ms;  // the node stays "alive" the whole test
  o.shutdown_grace = 300ms;
  Head head(o);
  head.start();
  HeadClient client(address_of(head), kToken);
  client.post("/api/nodes/register", registration("node-0"));
  client.post("/api/shutdown", Json::object());
  const auto t0 = Clock::now();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    head.wait();
    returned = true;
  });
  EXPECT_TRUE(eventually([&] { return returned.load(); }, 3000ms));
  waiter.join();
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.25);
}

TEST(Head, PortInUseIsAnErrorNamingIt) {
  Head first(fast_options());
  first.start();
  auto o = fast_options();
  o.port = first.port();
  Head second(o);
  try {
    second.start();
    FAIL() << "binding a taken port must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("head.dashboard_port"), std::string::npos);
  }
}

// A raw client socket on the head's port, non-blocking once connected.
int connect_raw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// Whether the server has closed fd: a read sees the end, or a reset.
bool closed_by_server(int fd) {
  char c;
  const ssize_t n = ::recv(fd, &c, 1, 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Slowloris: 8 connections that send their headers a byte at a time. Half the workers at most
// wait for slow requests, so a real one is answered at once; every slow one is dropped by the
// request deadline. Before, each held a worker for as long as it kept sending (httplib's read
// timeout is per read), and 8 held every worker of a head without agents (issue 16).
TEST(Head, SlowClientsAreDroppedAndDoNotHoldEveryWorker) {
  auto o = fast_options();
  o.expected_nodes = {};  // the smallest pool: 8 workers
  o.request_timeout = 2000ms;
  o.slow_request_after = 300ms;
  Head head(o);
  head.start();
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    const int fd = connect_raw(head.port());
    ASSERT_GE(fd, 0);
    const std::string start = "POST /api/nodes/register HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    ASSERT_EQ(::send(fd, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    slow.push_back(fd);
  }
  // One byte every 100 ms from each: well within httplib's 5 s per read.
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (int fd : slow) (void)!::send(fd, "a", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(100ms);
    }
  });
  std::this_thread::sleep_for(600ms);  // every slow one past slow_request_after
  httplib::Client client("127.0.0.1", head.port());
  client.set_connection_timeout(1s);
  client.set_read_timeout(1s);
  const auto t0 = Clock::now();
  auto r = client.Get("/api/cluster", {{"Authorization", std::string("Bearer ") + kToken}});
  EXPECT_TRUE(r) << "a real request was not answered while 8 slow clients were connected";
  if (r) EXPECT_EQ(r->status, 200);
  EXPECT_LT(Clock::now() - t0, 1s);
  // Every slow connection is closed by the deadline (2 s from its accept), although it kept sending.
  EXPECT_TRUE(eventually([&] {
    for (int fd : slow)
      if (!closed_by_server(fd)) return false;
    return true;
  }, 3000ms)) << "a slow connection outlived the request deadline";
  done = true;
  trickle.join();
  for (int fd : slow) ::close(fd);
}

// The accept queue has room for every agent connecting at once (httplib listens with 5): the
// kernel's view of the listening socket, as `ss` shows it (Send-Q is the backlog).
TEST(Head, ListenBacklogIsSizedForTheAgents) {
  if (std::system("command -v ss >/dev/null 2>&1") != 0) GTEST_SKIP() << "no ss (iproute2) to read the backlog";
  auto o = fast_options();
  for (int i = 0; i < 200; ++i) o.expected_nodes.push_back("node-" + std::to_string(i));
  Head head(o);
  head.start();
  const std::string cmd = "ss -Hltn 'sport = :" + std::to_string(head.port()) + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[512] = {0};
  const bool got = std::fgets(line, sizeof line, p) != nullptr;
  ::pclose(p);
  ASSERT_TRUE(got) << cmd << " printed nothing";
  std::istringstream in(line);
  std::string state;
  long recv_q = 0, backlog = 0;
  in >> state >> recv_q >> backlog;
  std::ifstream max_file("/proc/sys/net/core/somaxconn");
  long somaxconn = 4096;
  max_file >> somaxconn;
  EXPECT_EQ(backlog, std::min<long>(4 * 202, somaxconn)) << line;
}

TEST(HeadAddress, ParsesHostPortAndRejectsTheRest) {
  const auto a = HeadAddress::parse("10.0.0.1:8265");
  EXPECT_EQ(a.host, "10.0.0.1");
  EXPECT_EQ(a.port, 8265);
  EXPECT_EQ(a.url(), "http://10.0.0.1:8265");
  EXPECT_EQ(HeadAddress::parse("[::1]:80").host, "::1");
  EXPECT_EQ(HeadAddress::parse("[::1]:80").str(), "[::1]:80");
  for (const char* bad : {"host", "host:", ":80", "host:0", "host:70000", "host:8x"})
    EXPECT_THROW(HeadAddress::parse(bad), Error) << bad;
}

TEST(HeadClient, UnreachableHeadIsExit4NamingTheAddress) {
  int port = 0;
  {
    Head h(fast_options());
    h.start();
    port = h.port();
  }  // closed: nothing listens there now
  HeadClient client(HeadAddress{"127.0.0.1", port}, kToken, 500ms);
  try {
    client.get("/api/cluster");
    FAIL() << "must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnreachable);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace verl::launcher
