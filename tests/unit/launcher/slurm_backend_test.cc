// The slurm backend's plan: the sbatch script rendered from templates/sbatch.sh for given spec
// values, and what --dry-run shows for each node. Submitting, waiting and cancelling run
// against a real slurmctld in tests/integration/slurm_cluster_test.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/config.h"
#include "common/error.h"
#include "common/process.h"
#include "launcher/backend.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const std::string kDir = "/home/u/.verlctl/c1";
const std::string kExe = "/opt/verl/verlctl";

ClusterSpec spec(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), {"backend=slurm", "name=c1"});
  return load_cluster_spec("", overrides);
}

std::vector<std::string> sbatch_lines(const std::string& script) {
  std::vector<std::string> lines;
  std::istringstream in(script);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#SBATCH", 0) == 0) lines.push_back(line);
  return lines;
}

TEST(SlurmBackend, RendersEverySbatchLineForTheSpec) {
  auto b = make_slurm_backend(spec({"slurm.nodes=4", "slurm.gpus_per_node=8", "slurm.cpus_per_task=16",
                                    "slurm.partition=gpu", "slurm.account=proj-7", "slurm.time=02:30:00"}),
                              kDir, kExe);
  const LaunchSpec head = b->head_spec();
  EXPECT_EQ(sbatch_lines(head.script), (std::vector<std::string>{
                                           "#SBATCH --job-name=verl-c1",
                                           "#SBATCH --nodes=4",
                                           "#SBATCH --ntasks-per-node=1",
                                           "#SBATCH --gpus-per-node=8",
                                           "#SBATCH --cpus-per-task=16",
                                           "#SBATCH --partition=gpu",
                                           "#SBATCH --account=proj-7",
                                           "#SBATCH --time=02:30:00",
                                           "#SBATCH --output=" + kDir + "/logs/slurm-%j.out",
                                           "#SBATCH --error=" + kDir + "/logs/slurm-%j.err",
                                       }));
  EXPECT_EQ(head.script_path, kDir + "/sbatch.sh");
  EXPECT_EQ(head.argv, (std::vector<std::string>{"sbatch", "--parsable", kDir + "/sbatch.sh"}));
  EXPECT_EQ(head.script.rfind("#!/bin/bash\n", 0), 0u);
}

TEST(SlurmBackend, LeavesOutGpusPartitionAndAccountWhenUnset) {
  auto b = make_slurm_backend(spec({"slurm.nodes=2", "slurm.gpus_per_node=0"}), kDir, kExe);
  const std::string script = b->head_spec().script;
  EXPECT_EQ(sbatch_lines(script), (std::vector<std::string>{
                                      "#SBATCH --job-name=verl-c1",
                                      "#SBATCH --nodes=2",
                                      "#SBATCH --ntasks-per-node=1",
                                      "#SBATCH --cpus-per-task=2",
                                      "#SBATCH --time=01:00:00",
                                      "#SBATCH --output=" + kDir + "/logs/slurm-%j.out",
                                      "#SBATCH --error=" + kDir + "/logs/slurm-%j.err",
                                  }));
  // sbatch reads #SBATCH lines only up to the first command: none may come after one.
  const size_t last = script.rfind("#SBATCH");
  const size_t first_command = script.find("\nset -u\n");
  EXPECT_LT(last, first_command);
}

TEST(SlurmBackend, OutputPathsFromTheSpec) {
  auto b = make_slurm_backend(spec({"slurm.output=/scratch/%x-%j.out", "slurm.error=/scratch/%x-%j.err"}), kDir, kExe);
  const auto lines = sbatch_lines(b->head_spec().script);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "#SBATCH --output=/scratch/%x-%j.out"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "#SBATCH --error=/scratch/%x-%j.err"), lines.end());
}

TEST(SlurmBackend, TheScriptRunsTheHeadAndOneAgentPerNodeWithTheLocalFlags) {
  auto b = make_slurm_backend(spec({"slurm.nodes=3", "head.dashboard_port=18265", "head.heartbeat_interval_s=0.5"}), kDir, kExe);
  const std::string script = b->head_spec().script;
  EXPECT_NE(script.find(kExe + " head --state-dir " + kDir + " --log-level "), std::string::npos) << script;
  EXPECT_NE(script.find("scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1"), std::string::npos);
  EXPECT_NE(script.find("export VERLCTL_HEAD_ADDRESS=\"$head_addr:18265\""), std::string::npos);
  EXPECT_NE(script.find("srun --nodes=3 --ntasks-per-node=1 "), std::string::npos);
  EXPECT_NE(script.find("--output=" + kDir + "/logs/agent-%n.log"), std::string::npos);
  EXPECT_NE(script.find(kExe + " agent --token-file " + kDir + "/token --heartbeat-interval 0.5 "), std::string::npos)
      << script;
  EXPECT_NE(script.find("--node \"node-$SLURM_NODEID\""), std::string::npos);
  ASSERT_EQ(b->agent_count(), 3u);
  EXPECT_EQ(node_names(spec({"slurm.nodes=3"})), (std::vector<std::string>{"node-0", "node-1", "node-2"}));
  for (size_t i = 0; i < 3; ++i) {
    const LaunchSpec a = b->agent_spec(i);
    EXPECT_EQ(a.node, "node-" + std::to_string(i));
    EXPECT_EQ(a.log, kDir + "/logs/agent-" + std::to_string(i) + ".log");
    EXPECT_EQ(a.argv.back(), a.node);
  }
}

// Every value is quoted for the shell: a state directory with a space and a quote still makes a
// script that bash parses, with the path intact.
TEST(SlurmBackend, QuotesValuesSoThatTheScriptParses) {
  const std::string dir = fs::temp_directory_path() / ("verl slurm 'q' " + std::to_string(::getpid()));
  auto b = make_slurm_backend(spec({"slurm.partition=a b"}), dir, kExe);
  const std::string script = b->head_spec().script;
  EXPECT_NE(script.find("--state-dir " + process::quote(dir) + " "), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --partition='a b'"), std::string::npos);
  const auto r = process::run({"bash", "-n"}, [&] {
    process::Options o;
    o.stdin_data = script;
    return o;
  }());
  EXPECT_EQ(r.exit_code, 0) << r.err << script;
}

TEST(SlurmBackend, AnOverriddenTemplateWithAnUnknownNameFailsNamingFileAndLine) {
  const testing::TempDir tmp("sbatch_tmpl");
  const fs::path dir = tmp.path();
  std::ofstream(dir / "sbatch.sh") << "#!/bin/bash\n#SBATCH --nodes={{nodes}}\n#SBATCH --qos={{qos}}\n";
  ::setenv("VERLCTL_TEMPLATE_DIR", dir.c_str(), 1);
  auto b = make_slurm_backend(spec({}), kDir, kExe);
  try {
    b->head_spec();
    ADD_FAILURE() << "an unknown placeholder must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find((dir / "sbatch.sh").string() + ":3: unknown placeholder 'qos'"), std::string::npos)
        << e.what();
  }
  ::unsetenv("VERLCTL_TEMPLATE_DIR");
}

TEST(SlurmBackend, WithoutASubmittedJobThereIsNoAllocation) {
  const fs::path dir = fs::temp_directory_path() / ("verl_slurm_empty_" + std::to_string(::getpid()));
  auto b = make_slurm_backend(spec({}), dir, kExe);
  EXPECT_TRUE(b->allocation().empty());
  EXPECT_EQ(b->head_host("127.0.0.1"), "") << "the head's place is the allocation's, unknown before it runs";
}

}  // namespace
}  // namespace verl::launcher
