// What `verlctl probe` does with several nodes' reports: each report read back from its JSON
// as it came through the head, and versions compared across nodes (a difference is a fail row
// naming each node and its value), failed rows named with their node.
#include <gtest/gtest.h>

#include "common/error.h"
#include "probes/harness.h"

namespace verl::probes {
namespace {

Row version_row(const std::string& node, const std::string& metric, const std::string& detail,
                Status s = Status::kPass) {
  Row r;
  r.node = node;
  r.probe = "versions";
  r.metric = metric;
  r.detail = detail;
  r.status = s;
  return r;
}

TEST(ClusterReport, IdenticalVersionsAddNoRow) {
  const std::vector<Row> rows = {version_row("a", "verlctl", "0.1.0 (commit x)"),
                                 version_row("b", "verlctl", "0.1.0 (commit x)")};
  EXPECT_TRUE(compare_versions(rows).empty());
}

TEST(ClusterReport, AVersionMismatchIsAFailNamingBothNodes) {
  const std::vector<Row> rows = {
      version_row("node-0", "verlctl", "0.1.0 (commit aaa)"), version_row("node-1", "verlctl", "0.1.0 (commit bbb)"),
      version_row("node-2", "verlctl", "0.1.0 (commit aaa)"), version_row("node-0", "driver", "NVIDIA 580"),
      // a node without a driver is skipped, not a mismatch
      version_row("node-1", "driver", "no NVIDIA driver loaded", Status::kSkipped)};
  const auto extra = compare_versions(rows);
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0].node, "*");
  EXPECT_EQ(extra[0].metric, "verlctl");
  EXPECT_EQ(extra[0].status, Status::kFail);
  EXPECT_NE(extra[0].detail.find("node-0, node-2 have '0.1.0 (commit aaa)'"), std::string::npos) << extra[0].detail;
  EXPECT_NE(extra[0].detail.find("node-1 has '0.1.0 (commit bbb)'"), std::string::npos) << extra[0].detail;
  std::vector<Row> all = rows;
  all.push_back(extra[0]);
  EXPECT_EQ(exit_code(all), ExitCode::kCheckFailed);
  EXPECT_EQ(failed_names(all), "* versions.verlctl");
}

TEST(ClusterReport, FailedNamesCarryTheNodeOnlyWhenThereAreSeveral) {
  Row a;
  a.node = "node-0";
  a.probe = "shm";
  a.metric = "size";
  a.status = Status::kFail;
  Row b = a;
  b.node = "node-1";
  EXPECT_EQ(failed_names({a}), "shm.size");
  EXPECT_EQ(failed_names({a, b}), "node-0 shm.size, node-1 shm.size");
}

TEST(ClusterReport, ARowSurvivesItsJson) {
  Row r;
  r.node = "n";
  r.probe = "tcp";
  r.metric = "bandwidth";
  r.value = 9.5;
  r.unit = "Gbit/s";
  r.bound = Bound::kAtLeast;
  r.threshold_key = "min_tcp_gbps";
  r.threshold = 10;
  r.status = Status::kFail;
  r.detail = "h:1, 16 MiB one stream";
  r.data = Json{{"k", 1}};
  Row s = r;
  s.metric = "rtt";
  s.value.reset();
  s.threshold.reset();
  s.bound = Bound::kNone;
  s.threshold_key.clear();
  s.status = Status::kSkipped;
  s.data = nullptr;
  const auto back = rows_from_json(to_json({r, s}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].value, 9.5);
  EXPECT_EQ(back[0].threshold, 10.0);
  EXPECT_EQ(back[0].threshold_key, "min_tcp_gbps");
  EXPECT_EQ(back[0].bound, Bound::kAtLeast);
  EXPECT_EQ(back[0].status, Status::kFail);
  EXPECT_EQ(back[0].data, (Json{{"k", 1}}));
  EXPECT_FALSE(back[1].value);
  EXPECT_FALSE(back[1].threshold);
  EXPECT_EQ(back[1].status, Status::kSkipped);
  EXPECT_EQ(to_json(back), to_json({r, s}));
}

TEST(ClusterReport, NotAReportIsAnError) {
  EXPECT_THROW(rows_from_json(Json{{"error", "x"}}), Error);
  EXPECT_THROW(rows_from_json(Json::array()), Error);
}

}  // namespace
}  // namespace verl::probes
