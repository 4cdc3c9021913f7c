// `verlctl env` in-process: the JSON it prints for a fake sysfs tree, the container line, and
// the exit codes for a node that is not this machine or not in the spec.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>

#include "cli/app.h"
#include "tests/testing/cli.h"
#include "tests/testing/fake_sysfs.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;
using testing::FakeSysfs;

using Outcome = testing::CliRun;
const auto verlctl = testing::run_cli;

const Json* var(const Json& doc, const std::string& name) {
  for (const auto& v : doc.at("env"))
    if (v.at("name") == name) return &v;
  return nullptr;
}

TEST(EnvCommand, JsonListsComputedValuesForAFakeTree) {
  FakeSysfs sys("cli");
  sys.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  sys.port("mlx5_1", 1, "1: DOWN", "InfiniBand");
  const Outcome r = verlctl({"env", "--sysfs-root", sys.root(), "-o", "json", "env.NCCL_DEBUG=INFO"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc.at("head"), "127.0.0.1");
  ASSERT_NE(var(doc, "NCCL_IB_HCA"), nullptr);
  EXPECT_EQ(var(doc, "NCCL_IB_HCA")->at("value"), "=mlx5_0:1");
  EXPECT_EQ(var(doc, "NCCL_IB_HCA")->at("source"), "detected");
  EXPECT_EQ(var(doc, "NCCL_SOCKET_IFNAME")->at("value"), "=lo");
  EXPECT_EQ(var(doc, "NCCL_DEBUG")->at("source"), "spec");
  EXPECT_EQ(var(doc, "NCCL_DEBUG")->at("reason"), "from the cluster spec (env.NCCL_DEBUG)");
  EXPECT_EQ(doc.at("facts").at("hca_ports").size(), 2u);
  EXPECT_TRUE(doc.at("container").is_null());
}

TEST(EnvCommand, TextTableAndContainerLine) {
  FakeSysfs sys("clitext");
  const Outcome r = verlctl({"env", "--sysfs-root", sys.root(), "container.runtime=docker", "container.image=verl:1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("NAME", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("NCCL_IB_DISABLE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("docker run --rm --init --network host --shm-size 16g --ulimit memlock=-1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("-e NCCL_IB_DISABLE -e"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("-e NCCL_IB_DISABLE=1"), std::string::npos) << "no value on the command line: " << r.out;
  EXPECT_NE(r.out.find("verl:1 verlctl train"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--device /dev/infiniband"), std::string::npos) << "no IB in the tree: " << r.out;
}

TEST(EnvCommand, ContainerRuntimeWithoutImageExits3) {
  FakeSysfs sys("cliimg");
  const Outcome r = verlctl({"env", "--sysfs-root", sys.root(), "container.runtime=podman"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("container.image"), std::string::npos) << r.err;
}

TEST(EnvCommand, EnvAndContainerProblemsAreReportedTogether) {
  FakeSysfs sys("cliboth");
  const Outcome r = verlctl({"env", "--sysfs-root", sys.root(), "env.X=[1]", "container.runtime=docker"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("env.X: expected a string"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("container.image"), std::string::npos) << r.err;
}

class EnvCommandSpec : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::string(::testing::TempDir()) + "/verl_env_spec_" + std::to_string(::getpid()) + ".yaml";
    std::ofstream(path_) << "name: t\nbackend: ssh\nnodes:\n  - host: 203.0.113.7\n  - host: localhost\n";
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(EnvCommandSpec, RemoteNodeExits4WithAHint) {
  FakeSysfs sys("cliremote");
  const Outcome r = verlctl({"env", "-f", path_, "--sysfs-root", sys.root(), "--node", "node-0"});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("node-0 (203.0.113.7) is not this machine"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: run 'verlctl env' with the same spec on 203.0.113.7"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(EnvCommandSpec, NodeThatIsThisMachineIsComputed) {
  FakeSysfs sys("clilocal");
  const Outcome r = verlctl({"env", "-f", path_, "--sysfs-root", sys.root(), "--node", "localhost", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out).at("node"), "node-1 (localhost, this machine)");
}

TEST_F(EnvCommandSpec, UnknownNodeExits2ListingTheNodes) {
  const Outcome r = verlctl({"env", "-f", path_, "--node", "node-9"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("node-0 (203.0.113.7), node-1 (localhost)"), std::string::npos) << r.err;
}

TEST(EnvCommand, MissingSysfsRootIsAUsageError) {
  EXPECT_EQ(verlctl({"env", "--sysfs-root", "/no/such/dir/anywhere"}).code, 2);
}

}  // namespace
}  // namespace verl::cli
