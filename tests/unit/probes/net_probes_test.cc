// The network probes against real servers on loopback: tcp bandwidth and RTT, the ports probe
// on a listening and a closed port, the clock offset against the in-process time server (and
// against one whose clock is skewed, so that a probe that always says 0 would fail).
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cmath>

#include "probes/clock_probe.h"
#include "probes/harness.h"
#include "probes/net.h"
#include "probes/probes.h"
#include "probes/tcp_probe.h"

namespace verl::probes {
namespace {

Context spec_ctx() {
  Context ctx;
  ctx.node = "here";
  ctx.spec = {{"probes", {{"min_tcp_gbps", 0.0}, {"max_clock_offset_ms", 100.0}}}};
  return ctx;
}

// A port on 127.0.0.1 that nothing listens on: bound, then closed.
int closed_port() {
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

TEST(TcpProbe, MeasuresBandwidthAndRoundTripOnLoopback) {
  TcpServer server;
  const TcpResult r = measure_tcp(server.endpoint(), /*bytes=*/64ull << 20, /*pings=*/200);
  EXPECT_GT(r.gbit_per_s, 0.0);
  EXPECT_GT(r.rtt_us, 0.0);
  EXPECT_LE(r.rtt_min_us, r.rtt_us);
  EXPECT_EQ(r.pings, 200);
}

TEST(TcpProbe, AServerServesOneClientAfterAnother) {
  TcpServer server;
  for (int i = 0; i < 3; ++i) EXPECT_GT(measure_tcp(server.endpoint(), 1 << 20, 10).gbit_per_s, 0.0);
}

TEST(TcpProbe, RowsAreJudgedAgainstMinTcpGbps) {
  TcpServer server;
  Context ctx = spec_ctx();
  ctx.tcp_server = server.endpoint();
  ctx.tcp_mib = 16;
  ctx.tcp_pings = 50;
  auto rows = run_probes({tcp_probe()}, ctx);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].metric, "bandwidth");
  EXPECT_EQ(rows[0].unit, "Gbit/s");
  EXPECT_EQ(rows[0].status, Status::kPass);
  EXPECT_EQ(rows[1].metric, "rtt");
  EXPECT_EQ(rows[1].unit, "us");

  ctx.spec["probes"]["min_tcp_gbps"] = 1e6;  // a petabit loopback does not exist yet
  rows = run_probes({tcp_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_EQ(exit_code(rows), ExitCode::kCheckFailed);
}

TEST(TcpProbe, AServerThatIsGoneIsAFailedRowNamingIt) {
  Context ctx = spec_ctx();
  ctx.tcp_server = Endpoint{"127.0.0.1", closed_port()};
  const auto rows = run_probes({tcp_probe()}, ctx);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_NE(rows[0].detail.find(ctx.tcp_server->str() + " refused"), std::string::npos) << rows[0].detail;
}

TEST(PortsProbe, AListeningPortPassesAndAClosedDashboardFailsNamingHostPort) {
  TcpServer listening;  // any listener will do: the probe only connects
  Context ctx = spec_ctx();
  ctx.dashboard = listening.endpoint();
  ctx.store = listening.endpoint();
  auto rows = run_probes({ports_probe()}, ctx);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].metric, "dashboard");
  EXPECT_EQ(rows[0].status, Status::kPass);
  ASSERT_TRUE(rows[0].value);
  EXPECT_GE(*rows[0].value, 0.0);
  EXPECT_EQ(rows[1].status, Status::kPass);

  ctx.dashboard = Endpoint{"127.0.0.1", closed_port()};
  rows = run_probes({ports_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_EQ(rows[0].detail, ctx.dashboard->str() + " refused");
  EXPECT_EQ(exit_code(rows), ExitCode::kCheckFailed);
}

TEST(PortsProbe, ARefusedStorePortPassesBetweenJobs) {
  // Nothing holds the store port between jobs (a job's rank 0 binds it): a reset from the host
  // proves the path open. (A timeout still fails: try_connect's reason is then "timed out".)
  TcpServer listening;
  Context ctx = spec_ctx();
  ctx.dashboard = listening.endpoint();
  ctx.store = Endpoint{"127.0.0.1", closed_port()};
  const auto rows = run_probes({ports_probe()}, ctx);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].metric, "store");
  EXPECT_EQ(rows[1].status, Status::kPass) << rows[1].detail;
  EXPECT_EQ(rows[1].detail.rfind(ctx.store->str() + " refused: nothing listens between jobs", 0), 0u) << rows[1].detail;
}

TEST(PortsProbe, SkippedWithoutAHead) {
  const auto rows = run_probes({ports_probe()}, spec_ctx());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, Status::kSkipped);
  EXPECT_EQ(rows[0].detail, "no head: skipped");
  EXPECT_EQ(exit_code(rows), ExitCode::kOk);
}

TEST(ClockProbe, OffsetAgainstTheInProcessServerIsWithinAFewMs) {
  TimeServer server;
  const ClockOffset o = measure_clock_offset(server.endpoint());
  EXPECT_LT(std::fabs(o.offset_ms), 3.0);
  EXPECT_GE(o.delay_ms, 0.0);
  EXPECT_EQ(o.exchanges, 16);
}

TEST(ClockProbe, MeasuresASkewedServerClock) {
  constexpr int64_t kSkewNs = 250'000'000;  // the server runs 250 ms ahead
  TimeServer server("127.0.0.1", 0, [] { return realtime_ns() + kSkewNs; });
  const ClockOffset o = measure_clock_offset(server.endpoint());
  EXPECT_NEAR(o.offset_ms, 250.0, 3.0);

  Context ctx = spec_ctx();
  ctx.time_server = server.endpoint();
  const auto rows = run_probes({clock_probe()}, ctx);  // max_clock_offset_ms 100
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].unit, "ms");
  EXPECT_EQ(rows[0].status, Status::kFail);
}

TEST(ClockProbe, SkippedWithoutAHead) {
  const auto rows = run_probes({clock_probe()}, spec_ctx());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kSkipped);
  EXPECT_EQ(*rows[0].value, 0.0);
  EXPECT_EQ(rows[0].detail, "no head: skipped");
}

TEST(ClockProbe, PassesAgainstTheInProcessServer) {
  TimeServer server;
  Context ctx = spec_ctx();
  ctx.time_server = server.endpoint();
  const auto rows = run_probes({clock_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kPass) << rows[0].detail;
}

TEST(Connect, TimesOutAgainstAnAddressThatDropsPackets) {
  // 192.0.2.0/24 is TEST-NET-1: never routed. Either no route (an immediate error) or a timeout,
  // never a hang past the timeout.
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(try_connect({"192.0.2.1", 9}, std::chrono::milliseconds(300), &why));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_NE(why.find("192.0.2.1:9"), std::string::npos) << why;
}

}  // namespace
}  // namespace verl::probes
