// up's plan (what --dry-run prints) and the backend factory; the live up/down/status run is
// tests/integration/local_cluster_test.sh.
#include "launcher/cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/process.h"
#include "verl/build_info.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {
namespace fs = std::filesystem;

// Each test with a VERLCTL_HOME of its own.
class TempHome : public ::testing::Test {
 protected:
  testing::TempHome temp_home_;
  const fs::path home_ = temp_home_.path();
};

bool has(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag && argv[i + 1] == value) return true;
  return false;
}

TEST_F(TempHome, LocalPlanIsAHeadAndNAgentsAndCreatesNothing) {
  UpOptions o;
  o.local_nodes = 3;
  o.name = "plan";
  o.exe = "/opt/verlctl";
  o.overrides = {"head.dashboard_port=18111", "head.store_port=18112", "head.heartbeat_interval_s=0.5"};
  const auto plan = plan_up(o);
  EXPECT_EQ(plan.spec.name, "plan");
  EXPECT_EQ(plan.spec.backend, BackendKind::kLocal);
  EXPECT_EQ(plan.spec.nodes.size(), 3u);
  EXPECT_EQ(plan.state_dir, (home_ / "plan").string());
  ASSERT_EQ(plan.daemons.size(), 4u);
  EXPECT_EQ(plan.daemons[0].role, ProcessRole::kHead);
  EXPECT_EQ(plan.daemons[0].argv[0], "/opt/verlctl");
  EXPECT_EQ(plan.daemons[0].argv[1], "head");
  EXPECT_TRUE(has(plan.daemons[0].argv, "--state-dir", plan.state_dir));
  for (size_t i = 1; i < 4; ++i) {
    const auto& a = plan.daemons[i];
    EXPECT_EQ(a.role, ProcessRole::kAgent);
    EXPECT_EQ(a.node, "node-" + std::to_string(i - 1));
    EXPECT_TRUE(has(a.argv, "--head", "127.0.0.1:18111"));
    EXPECT_TRUE(has(a.argv, "--token-file", plan.state_dir + "/token"));
    EXPECT_TRUE(has(a.argv, "--heartbeat-interval", "0.5"));
    EXPECT_EQ(a.log, plan.state_dir + "/logs/agent-" + std::to_string(i - 1) + ".log");
    for (const auto& arg : a.argv) EXPECT_EQ(arg.find("token\n"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(home_)) << "a plan (dry run) must not create the state directory";
}

TEST_F(TempHome, LocalWithoutNodesIsOneNode) {
  UpOptions o;
  o.overrides = {"backend=local"};
  EXPECT_EQ(plan_up(o).daemons.size(), 2u);
}

// --dry-run's container line runs rank 0 in the agent's own work directory (LaunchSpec::work_dir,
// never read back from its argv) with what the backend knows of the node (Backend::known_host):
// a remote node's GPUs from nodes[].gpus, a slurm node's from slurm.gpus_per_node.
TEST_F(TempHome, ContainerLinesUseEachAgentsWorkDirectoryAndWhatItsBackendKnows) {
  auto has_arg = [](const std::vector<std::string>& argv, const std::string& arg) {
    return std::find(argv.begin(), argv.end(), arg) != argv.end();
  };
  UpOptions o;
  o.exe = "/opt/verl/verlctl";
  o.overrides = {"backend=ssh", "name=c3", "nodes=[{host: 10.0.0.2, gpus: 8}, {host: 10.0.0.3}]",
                 "head.host=10.0.0.1", "head.bind_host=0.0.0.0", "container.runtime=docker", "container.image=verl:1"};
  const auto ssh = plan_up(o);
  ASSERT_EQ(ssh.containers.size(), 2u);
  EXPECT_EQ(ssh.daemons[1].work_dir, "~/.verlctl/c3/nodes/10.0.0.2");
  EXPECT_TRUE(has_arg(ssh.containers[0].argv, "~/.verlctl/c3/nodes/10.0.0.2/jobs/job-N"));
  EXPECT_TRUE(has_arg(ssh.containers[0].argv, "--gpus")) << "nodes[0].gpus: 8";
  EXPECT_FALSE(has_arg(ssh.containers[1].argv, "--gpus")) << "nodes[1] declares no GPUs";
  EXPECT_NE(ssh.containers[0].note.find("/dev/infiniband"), std::string::npos) << "only the node knows its ports";

  o.overrides = {"backend=slurm", "name=c4", "slurm.nodes=2", "slurm.gpus_per_node=4", "container.runtime=pyxis",
                 "container.image=verl:1"};
  const auto slurm = plan_up(o);
  ASSERT_EQ(slurm.containers.size(), 2u);
  EXPECT_EQ(slurm.daemons[1].work_dir, slurm.state_dir);
  EXPECT_TRUE(has_arg(slurm.containers[1].argv, "$SLURMD_NODENAME"));

  o.overrides = {"backend=local", "name=c5", "container.runtime=docker", "container.image=verl:1"};
  o.local_nodes = 1;
  const auto local = plan_up(o);
  ASSERT_EQ(local.containers.size(), 1u);
  EXPECT_EQ(local.daemons[1].work_dir, local.state_dir);
  EXPECT_TRUE(has_arg(local.containers[0].argv, local.state_dir + "/jobs/job-N"));
}

// The ssh plan: the head here, one agent per host named by it, and exactly the remote commands
// that start() runs (quoted; the node's own directory under ssh.remote_dir).
TEST_F(TempHome, SshPlanNamesNodesByHostWithTheirRemoteCommands) {
  UpOptions o;
  o.exe = "/opt/verl/verlctl";
  o.overrides = {"backend=ssh", "name=c1", "nodes=[{host: 10.0.0.2}, {host: 10.0.0.3, port: 2200, user: bob}, {host: 10.0.0.3}]",
                 "ssh.user=alice", "ssh.remote_dir=/scratch/it's here", "head.host=10.0.0.1", "head.bind_host=0.0.0.0"};
  const auto plan = plan_up(o);
  ASSERT_EQ(plan.daemons.size(), 4u);
  EXPECT_EQ(plan.daemons[0].role, ProcessRole::kHead);
  EXPECT_TRUE(plan.daemons[0].remote.empty()) << "the head runs on this machine";
  const std::vector<std::string> names = {"10.0.0.2", "10.0.0.3-1", "10.0.0.3-2"};
  const std::vector<std::string> targets = {"alice@10.0.0.2:22", "bob@10.0.0.3:2200", "alice@10.0.0.3:22"};
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& a = plan.daemons[i + 1];
    EXPECT_EQ(a.node, names[i]);
    // "# ssh ...", "# stdin ...", the sync command (which starts a current verlctl itself),
    // "# sftp ...", the start command after a copy.
    ASSERT_EQ(a.remote.size(), 5u);
    EXPECT_EQ(a.remote[0].rfind("# ssh " + targets[i] + " ", 0), 0u) << a.remote[0];
    EXPECT_EQ(a.remote[1].rfind("# stdin of the next command: " + plan.state_dir + "/token, then ", 0), 0u) << a.remote[1];
    const std::string dir = "'/scratch/it'\\''s here/c1/nodes/" + names[i] + "'";
    const std::string& sync = a.remote[2];
    EXPECT_EQ(sync.rfind("umask 077 && mkdir -p " + dir + " '/scratch/it'\\''s here/bin' && cd " + dir + " && ", 0), 0u) << sync;
    EXPECT_NE(sync.find("read -r token && printf '%s\\n' \"$token\" >token.tmp && mv -f token.tmp token"), std::string::npos) << sync;
    const std::string& start = a.remote.back();
    EXPECT_EQ(start.rfind("cd " + dir + " || exit 1; setsid nohup '/scratch/it'\\''s here/bin/verlctl' agent ", 0), 0u) << start;
    EXPECT_NE(start.find("--head 10.0.0.1:8265 "), std::string::npos) << start;
    EXPECT_NE(start.find("--token-file " + dir.substr(0, dir.size() - 1) + "/token'"), std::string::npos) << start;
    EXPECT_NE(start.find("--node " + names[i] + " "), std::string::npos) << start;
    EXPECT_NE(start.find("</dev/null >>agent.log 2>&1 &"), std::string::npos) << start;
    // A current verlctl starts within the sync command: the same start line, behind the check.
    const std::string start_only = start.substr(start.find("setsid nohup"));
    EXPECT_NE(sync.find("] && [ \"$s\" = "), std::string::npos) << sync;
    EXPECT_NE(sync.find("; then " + start_only + "; else printf 'version="), std::string::npos) << sync;
    EXPECT_EQ(a.log, a.host + ":/scratch/it's here/c1/nodes/" + names[i] + "/agent.log");
  }
  EXPECT_FALSE(fs::exists(home_)) << "a plan (dry run) must not create the state directory";
}

TEST_F(TempHome, SshRemoteDirUnderHomeIsExpandedByTheRemoteShell) {
  UpOptions o;
  o.overrides = {"backend=ssh", "nodes=[{host: 127.0.0.2}]", "ssh.copy_binary=never"};
  const auto plan = plan_up(o);
  // copy_binary never: one command, nothing copied; it starts verlctl from the PATH.
  ASSERT_EQ(plan.daemons.at(1).remote.size(), 3u);
  const std::string& sync = plan.daemons.at(1).remote.back();
  EXPECT_EQ(sync.rfind("umask 077 && mkdir -p \"$HOME\"/.verlctl/local/nodes/127.0.0.2 && cd \"$HOME\"/.verlctl/local/nodes/127.0.0.2 && ", 0), 0u)
      << sync;
  EXPECT_NE(sync.find("if command -v verlctl >/dev/null 2>&1; then setsid nohup verlctl agent "), std::string::npos) << sync;
  for (const auto& line : plan.daemons.at(1).remote) EXPECT_EQ(line.find("sftp"), std::string::npos) << line;
}

// A node on another machine cannot reach a head that listens on loopback (the default
// head.bind_host) or that it is told is on loopback (head.host): up refuses before it starts
// anything, naming the key.
TEST_F(TempHome, SshNodeElsewhereWithALoopbackHeadIsInvalidConfig) {
  UpOptions o;
  o.overrides = {"backend=ssh", "nodes=[{host: 127.0.0.2}, {host: 10.0.0.3}]"};
  try {
    plan_up(o);
    FAIL() << "a loopback head with a node at 10.0.0.3 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_EQ(std::string(e.what()).rfind("head.bind_host is 127.0.0.1", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("nodes[1].host 10.0.0.3"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("head.bind_host=0.0.0.0"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("head.host"), std::string::npos) << e.hint();
  }
  o.overrides.push_back("head.bind_host=0.0.0.0");
  try {
    plan_up(o);
    FAIL() << "head.host 127.0.0.1 with a node at 10.0.0.3 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_EQ(std::string(e.what()).rfind("head.host is 127.0.0.1", 0), 0u) << e.what();
  }
  o.overrides.push_back("head.host=10.0.0.1");
  EXPECT_EQ(plan_up(o).daemons.size(), 3u);
  // Every node on this machine's loopback: the defaults work.
  UpOptions here;
  here.overrides = {"backend=ssh", "nodes=[{host: 127.0.0.2}, {host: 127.0.0.3}]"};
  EXPECT_EQ(plan_up(here).daemons.size(), 3u);
}

// This binary's version is the one compiled in: the test binary (what `up` passes as exe in the
// unit tests) is not run with --version, which gtest takes for no flag and so ran every test
// again, each running it again (issue 16: a fork chain of `verl_unit_tests --version`).
TEST_F(TempHome, SshPlanTakesItsOwnVersionWithoutRunningItself) {
  UpOptions o;
  o.exe = process::self_exe();
  o.overrides = {"backend=ssh", "nodes=[{host: 127.0.0.2}]"};
  const auto plan = plan_up(o);
  const std::string& sync = plan.daemons.at(1).remote.at(2);
  EXPECT_NE(sync.find("if [ \"$v\" = '" VERL_VERSION_LINE "' ]"), std::string::npos) << sync;
}

// Another binary runs once with --version and VERLCTL_VERSION_PROBE set; a process that has it
// set runs none, so that a binary which is not verlctl cannot start a chain.
TEST_F(TempHome, SshPlanRunsAnotherBinarysVersionOnceAndNeverFromAProbe) {
  fs::create_directories(home_);
  const fs::path exe = home_ / "fake-verlctl", runs = home_ / "runs";
  std::ofstream(exe) << "#!/bin/sh\necho \"$VERLCTL_VERSION_PROBE\" >>'" << runs.string() << "'\necho 'verlctl 9.9 (commit fake)'\n";
  fs::permissions(exe, fs::perms::owner_all);
  UpOptions o;
  o.exe = exe.string();
  o.overrides = {"backend=ssh", "nodes=[{host: 127.0.0.2}]"};
  EXPECT_NE(plan_up(o).daemons.at(1).remote.at(2).find("'verlctl 9.9 (commit fake)'"), std::string::npos);
  std::ifstream in(runs);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << "the other binary was not run";
  EXPECT_EQ(line, "1") << "it runs with VERLCTL_VERSION_PROBE=1";
  EXPECT_FALSE(std::getline(in, line)) << "run more than once";

  ::setenv("VERLCTL_VERSION_PROBE", "1", 1);
  const auto probe_plan = plan_up(o);
  ::unsetenv("VERLCTL_VERSION_PROBE");
  EXPECT_NE(probe_plan.daemons.at(1).remote.at(2).find("not run: this process is itself a --version probe"), std::string::npos);
  std::ifstream again(runs);
  int n = 0;
  while (std::getline(again, line)) ++n;
  EXPECT_EQ(n, 1) << "a probe process ran the binary again";
}

// --accept-new-host-keys is for the up that is given it: its backend adds unknown keys, the
// recorded spec (what down reads) keeps strict checking.
TEST_F(TempHome, AcceptNewHostKeysIsNotRecorded) {
  UpOptions o;
  o.overrides = {"backend=ssh", "nodes=[{host: 127.0.0.2}]"};
  o.accept_new_host_keys = true;
  const auto plan = plan_up(o);
  EXPECT_TRUE(plan.spec.ssh.strict_host_keys);
  EXPECT_NE(plan.daemons.at(1).remote.at(0).find("unknown ones added"), std::string::npos) << plan.daemons.at(1).remote.at(0);
  o.accept_new_host_keys = false;
  EXPECT_NE(plan_up(o).daemons.at(1).remote.at(0).find(", strict"), std::string::npos);
}

TEST_F(TempHome, BadSpecIsInvalidConfig) {
  UpOptions o;
  o.local_nodes = 1;
  o.overrides = {"head.heartbeat_timeout_s=0.5", "head.heartbeat_interval_s=1"};
  try {
    plan_up(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("head.heartbeat_timeout_s"), std::string::npos) << e.what();
  }
}

TEST_F(TempHome, StatusOfNoClusterIsUnreachableWithAHint) {
  try {
    query_status("nothing-here");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnreachable);
    EXPECT_NE(std::string(e.what()).find("nothing-here"), std::string::npos);
    EXPECT_NE(e.hint().find("verlctl up"), std::string::npos);
  }
}

TEST_F(TempHome, StatusWithADeadHeadNamesItsAddress) {
  const std::string dir = home_.string() + "/dead";
  fs::create_directories(dir);
  ClusterState s;
  s.name = "dead";
  s.backend = "local";
  s.status = ClusterStatus::kUp;
  s.head_host = "127.0.0.1";
  s.head_port = 1;  // nothing listens on port 1
  write_state(StatePaths(dir), s);
  std::ofstream(dir + "/token") << "t\n";
  try {
    query_status("dead");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnreachable);
    EXPECT_NE(std::string(e.what()).find("http://127.0.0.1:1"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("head.log"), std::string::npos) << e.hint();
  }
}

}  // namespace
}  // namespace verl::launcher
