#include "launcher/nccl_env.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "tests/testing/fake_sysfs.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using testing::FakeSysfs;
using testing::ipv4_gid;
using testing::kLinkLocalGid;

// The real sysfs reader on a fake tree, with a fake network: eth0 10.0.0.5, ib0 192.168.7.5,
// and the kernel "routing" every non-loopback head from route_from.
class TreeReader : public SystemReader {
 public:
  explicit TreeReader(const std::string& root, std::string route_from = "10.0.0.5")
      : SystemReader(root), route_from_(std::move(route_from)) {}
  std::vector<InterfaceAddress> interfaces() const override {
    return {{"lo", "127.0.0.1", true, true}, {"eth0", "10.0.0.5", false, true}, {"ib0", "192.168.7.5", false, true}};
  }
  SourceAddress source_address_to(const std::string& host) const override {
    if (is_loopback_address(host)) return {"127.0.0.1", ""};
    if (route_from_.empty()) return {"", "no route from this machine to the head " + host};
    return {route_from_, ""};
  }
  std::string hostname() const override { return "gpu-1"; }

 private:
  std::string route_from_;
};

const EnvVar* find(const EnvPlan& plan, const std::string& name) {
  auto it = std::find_if(plan.vars.begin(), plan.vars.end(), [&](const EnvVar& v) { return v.name == name; });
  return it == plan.vars.end() ? nullptr : &*it;
}

std::string value_of(const EnvPlan& plan, const std::string& name) {
  const EnvVar* v = find(plan, name);
  return v ? v->value : "<unset>";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

EnvPlan plan_for(const FakeSysfs& sys, const std::string& head = "10.0.0.1", const Json& env = Json::object(),
                 const std::string& route_from = "10.0.0.5") {
  return compute_env(read_node_facts(TreeReader(sys.root(), route_from), head), env);
}

TEST(NcclEnv, ActiveInfinibandPortsGiveExactMatchHcaAndLeaveDownPortsOut) {
  FakeSysfs sys("ib");
  sys.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  sys.port("mlx5_1", 1, "4: ACTIVE", "InfiniBand");
  sys.port("mlx5_2", 1, "1: DOWN", "InfiniBand");
  const auto plan = plan_for(sys);
  const EnvVar* hca = find(plan, "NCCL_IB_HCA");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->value, "=mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(hca->source, EnvSource::kDetected);
  EXPECT_TRUE(contains(hca->reason, "mlx5_2:1 is 1: DOWN")) << hca->reason;
  EXPECT_TRUE(contains(hca->reason, sys.root() + "/class/infiniband")) << hca->reason;
  EXPECT_EQ(find(plan, "NCCL_IB_DISABLE"), nullptr);
  EXPECT_EQ(find(plan, "NCCL_IB_GID_INDEX"), nullptr) << "no RoCE port: no GID index";
}

TEST(NcclEnv, RocePicksTheRoceV2Ipv4MappedGid) {
  FakeSysfs sys("roce");
  sys.port("mlx5_0", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
  sys.gid("mlx5_0", 1, 0, kLinkLocalGid, "IB/RoCE v1");
  sys.gid("mlx5_0", 1, 1, kLinkLocalGid, "RoCE v2");       // v2, but link-local IPv6
  sys.gid("mlx5_0", 1, 4, ipv4_gid(10, 1, 0, 5), "IB/RoCE v1");  // IPv4, but v1
  sys.gid("mlx5_0", 1, 5, ipv4_gid(10, 1, 0, 5), "RoCE v2");     // the one
  sys.gid("mlx5_0", 1, 7, ipv4_gid(10, 2, 0, 5), "RoCE v2");     // a later one
  const auto plan = plan_for(sys);
  EXPECT_EQ(value_of(plan, "NCCL_IB_HCA"), "=mlx5_0:1");
  const EnvVar* gid = find(plan, "NCCL_IB_GID_INDEX");
  ASSERT_NE(gid, nullptr);
  EXPECT_EQ(gid->value, "5");
  EXPECT_TRUE(contains(gid->reason, "mlx5_0:1 (10.1.0.5)")) << gid->reason;
  EXPECT_EQ(gid->source, EnvSource::kDetected);
}

TEST(NcclEnv, RoceWithoutReadableGidsFallsBackToThreeAndSaysSo) {
  FakeSysfs sys("roce3");
  sys.port("mlx5_0", 1, "4: ACTIVE", "Ethernet");
  sys.gid("mlx5_0", 1, 0, kLinkLocalGid, "IB/RoCE v1");
  sys.gid("mlx5_0", 1, 2, ipv4_gid(10, 1, 0, 5), "");  // type unreadable
  const auto plan = plan_for(sys);
  const EnvVar* gid = find(plan, "NCCL_IB_GID_INDEX");
  ASSERT_NE(gid, nullptr);
  EXPECT_EQ(gid->value, "3");
  EXPECT_TRUE(contains(gid->reason, "no RoCE v2 GID")) << gid->reason;
}

TEST(NcclEnv, RocePortsThatDisagreeAreNamed) {
  FakeSysfs sys("roce2");
  for (const char* dev : {"mlx5_0", "mlx5_1"}) sys.port(dev, 1, "4: ACTIVE", "Ethernet");
  sys.gid("mlx5_0", 1, 3, ipv4_gid(10, 1, 0, 5), "RoCE v2");
  sys.gid("mlx5_1", 1, 5, ipv4_gid(10, 2, 0, 5), "RoCE v2");
  const auto plan = plan_for(sys);
  const EnvVar* gid = find(plan, "NCCL_IB_GID_INDEX");
  ASSERT_NE(gid, nullptr);
  EXPECT_EQ(gid->value, "3");
  EXPECT_TRUE(contains(gid->reason, "mlx5_1:1 has it at 5")) << gid->reason;
}

TEST(NcclEnv, MixedFabricGetsOneHcaListAndTheRoceGidIndex) {
  FakeSysfs sys("mixed");
  sys.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  sys.port("mlx5_1", 1, "4: ACTIVE", "Ethernet");
  sys.gid("mlx5_1", 1, 3, ipv4_gid(10, 1, 0, 5), "RoCE v2");
  const auto plan = plan_for(sys);
  EXPECT_EQ(value_of(plan, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(value_of(plan, "NCCL_IB_GID_INDEX"), "3");
}

TEST(NcclEnv, OnlyDownPortsDisableIbAndNameTheirState) {
  FakeSysfs sys("down");
  sys.port("mlx5_0", 1, "1: DOWN", "InfiniBand");
  sys.port("mlx5_0", 2, "2: INIT", "InfiniBand");
  const auto plan = plan_for(sys);
  const EnvVar* off = find(plan, "NCCL_IB_DISABLE");
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->value, "1");
  EXPECT_TRUE(contains(off->reason, "mlx5_0:1 is 1: DOWN")) << off->reason;
  EXPECT_TRUE(contains(off->reason, "mlx5_0:2 is 2: INIT")) << off->reason;
  EXPECT_EQ(find(plan, "NCCL_IB_HCA"), nullptr);
  EXPECT_EQ(find(plan, "NCCL_IB_GID_INDEX"), nullptr);
}

TEST(NcclEnv, NoDeviceDisablesIb) {
  FakeSysfs sys("nodev");
  const auto plan = plan_for(sys);
  const EnvVar* off = find(plan, "NCCL_IB_DISABLE");
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->value, "1");
  EXPECT_TRUE(contains(off->reason, "no InfiniBand or RoCE device")) << off->reason;
  EXPECT_EQ(find(plan, "NCCL_IB_HCA"), nullptr);
}

TEST(NcclEnv, LoopbackHeadUsesLo) {
  FakeSysfs sys("lo");
  const auto plan = plan_for(sys, "127.0.0.1");
  EXPECT_EQ(value_of(plan, "NCCL_SOCKET_IFNAME"), "=lo");
  EXPECT_EQ(value_of(plan, "GLOO_SOCKET_IFNAME"), "lo");
  EXPECT_TRUE(contains(find(plan, "GLOO_SOCKET_IFNAME")->reason, "loopback"));
}

TEST(NcclEnv, RemoteHeadUsesTheInterfaceOfTheRoutedAddress) {
  FakeSysfs sys("route");
  const auto plan = plan_for(sys, "192.168.7.1", Json::object(), "192.168.7.5");
  EXPECT_EQ(value_of(plan, "NCCL_SOCKET_IFNAME"), "=ib0");
  EXPECT_EQ(value_of(plan, "GLOO_SOCKET_IFNAME"), "ib0");
  const EnvVar* v = find(plan, "NCCL_SOCKET_IFNAME");
  EXPECT_TRUE(contains(v->reason, "192.168.7.1 from 192.168.7.5 on ib0")) << v->reason;
  EXPECT_EQ(v->source, EnvSource::kDetected);
}

TEST(NcclEnv, RealLoopbackHeadResolvesToLo) {
  FakeSysfs sys("reallo");
  const auto plan = compute_env(read_node_facts(SystemReader(sys.root()), "127.0.0.1"), Json::object());
  EXPECT_EQ(value_of(plan, "NCCL_SOCKET_IFNAME"), "=lo");
  EXPECT_EQ(value_of(plan, "GLOO_SOCKET_IFNAME"), "lo");
}

TEST(NcclEnv, RealRouteToOneOfOurAddressesPicksItsInterface) {
  FakeSysfs sys("realroute");
  const SystemReader reader(sys.root());
  const auto ifs = reader.interfaces();
  auto it = std::find_if(ifs.begin(), ifs.end(), [](const InterfaceAddress& i) {
    return !i.loopback && i.up && i.address.find(':') == std::string::npos;
  });
  if (it == ifs.end()) GTEST_SKIP() << "this machine has no non-loopback IPv4 interface";
  const auto plan = compute_env(read_node_facts(reader, it->address), Json::object());
  EXPECT_EQ(value_of(plan, "GLOO_SOCKET_IFNAME"), it->name) << "head " << it->address;
  EXPECT_EQ(value_of(plan, "NCCL_SOCKET_IFNAME"), "=" + it->name);
}

TEST(NcclEnv, NoRouteToTheHeadLeavesSocketInterfacesUnsetWithANote) {
  FakeSysfs sys("noroute");
  const auto plan = plan_for(sys, "10.9.9.9", Json::object(), /*route_from=*/"");
  EXPECT_EQ(find(plan, "NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_EQ(find(plan, "GLOO_SOCKET_IFNAME"), nullptr);
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_TRUE(contains(plan.notes[0], "no route from this machine to the head 10.9.9.9")) << plan.notes[0];
}

TEST(NcclEnv, RoutedAddressOnNoInterfaceIsANote) {
  NodeFacts f;
  f.sysfs_root = "/sys";
  f.head = "10.0.0.1";
  f.head_source_address = "10.0.0.99";
  f.interfaces = {{"eth0", "10.0.0.5", false, true}};
  const auto plan = compute_env(f, Json::object());
  EXPECT_EQ(find(plan, "NCCL_SOCKET_IFNAME"), nullptr);
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_TRUE(contains(plan.notes[0], "10.0.0.99")) << plan.notes[0];
}

TEST(NcclEnv, FixedDefaultsComeLastWithTheirReasons) {
  FakeSysfs sys("defaults");
  const auto plan = plan_for(sys, "127.0.0.1");
  std::vector<std::string> names;
  for (const auto& v : plan.vars) names.push_back(v.name);
  const std::vector<std::string> want = {"NCCL_IB_DISABLE",   "NCCL_SOCKET_IFNAME",          "GLOO_SOCKET_IFNAME",
                                         "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_CUMEM_ENABLE",
                                         "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TOKENIZERS_PARALLELISM"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(value_of(plan, "CUDA_DEVICE_MAX_CONNECTIONS"), "1");
  EXPECT_EQ(value_of(plan, "NCCL_CUMEM_ENABLE"), "0");
  EXPECT_EQ(value_of(plan, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(value_of(plan, "TOKENIZERS_PARALLELISM"), "false");
  for (const char* n : {"CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_CUMEM_ENABLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                        "TOKENIZERS_PARALLELISM"}) {
    EXPECT_EQ(find(plan, n)->source, EnvSource::kDefault) << n;
    EXPECT_FALSE(find(plan, n)->reason.empty()) << n;
  }
}

TEST(NcclEnv, SpecEnvWinsAndIsReportedAsSuch) {
  FakeSysfs sys("spec");
  sys.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  const Json env = {{"NCCL_IB_HCA", "=mlx5_4:1"}, {"TOKENIZERS_PARALLELISM", true}, {"NCCL_DEBUG", "INFO"},
                    {"NCCL_BUFFSIZE", 8388608}, {"SOME_RATIO", 0.5}, {"NCCL_CUMEM_ENABLE", nullptr}};
  const auto plan = plan_for(sys, "127.0.0.1", env);
  const EnvVar* hca = find(plan, "NCCL_IB_HCA");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->value, "=mlx5_4:1");
  EXPECT_EQ(hca->source, EnvSource::kSpec);
  EXPECT_TRUE(contains(hca->reason, "from the cluster spec (env.NCCL_IB_HCA)")) << hca->reason;
  EXPECT_TRUE(contains(hca->reason, "=mlx5_0:1")) << "names the value it replaced: " << hca->reason;
  EXPECT_EQ(value_of(plan, "TOKENIZERS_PARALLELISM"), "true");
  EXPECT_EQ(find(plan, "TOKENIZERS_PARALLELISM")->source, EnvSource::kSpec);
  EXPECT_EQ(value_of(plan, "NCCL_BUFFSIZE"), "8388608");
  EXPECT_EQ(value_of(plan, "SOME_RATIO"), "0.5");
  EXPECT_EQ(find(plan, "NCCL_CUMEM_ENABLE"), nullptr) << "null removes what verlctl would set";
  EXPECT_TRUE(std::any_of(plan.notes.begin(), plan.notes.end(),
                          [](const std::string& n) { return contains(n, "NCCL_CUMEM_ENABLE is not set"); }));
  // Spec-only variables follow the computed ones, in the spec's order.
  ASSERT_GE(plan.vars.size(), 3u);
  EXPECT_EQ(plan.vars[plan.vars.size() - 3].name, "NCCL_DEBUG");
  EXPECT_EQ(plan.vars.back().name, "SOME_RATIO");
  EXPECT_EQ(plan.vars.back().reason, "from the cluster spec (env.SOME_RATIO)");
  // Every name once.
  std::vector<std::string> names;
  for (const auto& v : plan.vars) names.push_back(v.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

TEST(NcclEnv, SpecEnvWithListsOrBadNamesIsInvalidConfigNamingEachKey) {
  NodeFacts f;
  f.head = "127.0.0.1";
  const Json env = {{"GOOD", "1"}, {"LIST", Json::array({1, 2})}, {"1BAD", "x"}, {"MAP", Json::object()}};
  try {
    compute_env(f, env);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "env.LIST: expected a string, number or boolean, got a list")) << m;
    EXPECT_TRUE(contains(m, "env.MAP: expected a string, number or boolean, got a mapping")) << m;
    EXPECT_TRUE(contains(m, "env.1BAD: not a valid environment variable name")) << m;
    EXPECT_FALSE(contains(m, "env.GOOD")) << m;
  }
}

TEST(NcclEnv, AssignmentsAreNameEqualsValue) {
  const std::vector<EnvVar> vars = {{"A", "=x,y", "", EnvSource::kDetected}, {"B", "", "", EnvSource::kSpec}};
  EXPECT_EQ(assignments(vars), (std::vector<std::string>{"A==x,y", "B="}));
}

}  // namespace
}  // namespace verl::launcher
