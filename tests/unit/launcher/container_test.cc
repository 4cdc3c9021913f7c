#include "launcher/container.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Argv = std::vector<std::string>;

const Argv kInner = {"verlctl", "train", "--rank", "0"};
const Argv kEnv = {"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME==eth0", "TOKENIZERS_PARALLELISM=false"};

Json spec_with(const Json& container) { return {{"name", "t"}, {"container", container}}; }

ContainerConfig config(const std::string& runtime, const std::string& shm = "16g") {
  return container_config(spec_with({{"runtime", runtime},
                                     {"image", "verl:latest"},
                                     {"shm_size", shm},
                                     {"mounts", {"/data:/data", "/home/u:/home/u:ro"}}}));
}

TEST(Container, DockerWithGpusAndInfiniband) {
  const Argv got = container_argv(config("docker"), {/*gpus=*/true, /*infiniband=*/true, ""}, kEnv, kInner);
  const Argv want = {"docker", "run", "--rm", "--init", "--network", "host", "--shm-size", "16g", "--ulimit", "memlock=-1",
                     "--device", "/dev/infiniband", "--gpus", "all",
                     "-v", "/data:/data", "-v", "/home/u:/home/u:ro",
                     "-e", "NCCL_IB_HCA", "-e", "NCCL_SOCKET_IFNAME", "-e", "TOKENIZERS_PARALLELISM",
                     "verl:latest", "verlctl", "train", "--rank", "0"};
  EXPECT_EQ(got, want);
  // The values stay off the command line: -e NAME takes them from the client's environment.
  EXPECT_EQ(container_client_env(config("docker"), kEnv), kEnv);
}

TEST(Container, DockerWithoutGpusOrInfinibandAndHostIpc) {
  const Argv got = container_argv(config("docker", "host"), {false, false, ""}, {"A=1"}, {"true"});
  const Argv want = {"docker", "run", "--rm", "--init", "--network", "host", "--ipc", "host", "--ulimit", "memlock=-1",
                     "-v", "/data:/data", "-v", "/home/u:/home/u:ro", "-e", "A", "verl:latest", "true"};
  EXPECT_EQ(got, want);
}

TEST(Container, PodmanPassesGpusThroughCdi) {
  const Argv got = container_argv(config("podman", "8g"), {true, true, ""}, {"A=1"}, {"true"});
  const Argv want = {"podman", "run", "--rm", "--init", "--network", "host", "--shm-size", "8g", "--ulimit", "memlock=-1",
                     "--device", "/dev/infiniband", "--device", "nvidia.com/gpu=all",
                     "-v", "/data:/data", "-v", "/home/u:/home/u:ro", "-e", "A", "verl:latest", "true"};
  EXPECT_EQ(got, want);
}

TEST(Container, ATaskIsNamedAndRunsInItsMountedDirectory) {
  const std::string name = container_name("lab", "job-3/0/1");
  EXPECT_EQ(name, "verlctl-lab-job-3-0-1");
  const Argv got = container_argv(config("podman", "host"), {false, false, ""}, {"A=1"}, {"/opt/verlctl", "train"},
                                  {name, "/w/jobs/job-3"});
  const Argv want = {"podman", "run", "--rm", "--init", "--name", "verlctl-lab-job-3-0-1", "--network", "host",
                     "--ipc", "host", "--ulimit", "memlock=-1", "-v", "/data:/data", "-v", "/home/u:/home/u:ro",
                     "-v", "/w/jobs/job-3:/w/jobs/job-3", "-w", "/w/jobs/job-3", "-e", "A", "verl:latest",
                     "/opt/verlctl", "train"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(container_kill_argv(config("podman"), name), (Argv{"podman", "kill", "verlctl-lab-job-3-0-1"}));
  EXPECT_EQ(container_kill_argv(config("docker"), name), (Argv{"docker", "kill", "verlctl-lab-job-3-0-1"}));
  // Where the client's process group holds the task (apptainer) or srun ends the step, no kill line.
  EXPECT_TRUE(container_kill_argv(config("apptainer"), name).empty());
  EXPECT_TRUE(container_kill_argv(config("pyxis"), name).empty());
  const Argv app = container_argv(config("apptainer"), {false, false, ""}, {}, {"true"}, {name, "/w/j"});
  EXPECT_EQ(app, (Argv{"apptainer", "exec", "--bind", "/data:/data", "--bind", "/home/u:/home/u:ro", "--bind",
                       "/w/j:/w/j", "--pwd", "/w/j", "verl:latest", "true"}));
  const Argv pyx = container_argv(config("pyxis"), {false, false, "n1"}, {"A=1"}, {"true"}, {name, "/w/j"});
  EXPECT_EQ(pyx, (Argv{"srun", "--overlap", "--nodes", "1", "--ntasks", "1", "--nodelist", "n1", "--container-image",
                       "verl:latest", "--container-mounts", "/data:/data,/home/u:/home/u:ro,/w/j:/w/j",
                       "--container-workdir", "/w/j", "true"}));
}

TEST(Container, ASiteTemplateOverridesTheEmbeddedOne) {
  const std::string dir = ::testing::TempDir() + "/container-templates-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/container");
  {
    std::ofstream f(dir + "/container/podman.argv");
    f << "# site: limits this host allows\npodman\nrun\n--ulimit\nmemlock=8192:8192\n{{image}}\n"
         "{{#inner}}\n{{.}}\n{{/inner}}\n";
  }
  ::setenv("VERLCTL_TEMPLATE_DIR", dir.c_str(), 1);
  const Argv got = container_argv(config("podman"), {}, {}, {"true"});
  ::unsetenv("VERLCTL_TEMPLATE_DIR");
  EXPECT_EQ(got, (Argv{"podman", "run", "--ulimit", "memlock=8192:8192", "verl:latest", "true"}));
  {
    std::ofstream f(dir + "/container/podman.argv");
    f << "podman\n{{imgae}}\n";
  }
  ::setenv("VERLCTL_TEMPLATE_DIR", dir.c_str(), 1);
  try {
    container_argv(config("podman"), {}, {}, {"true"});
    ADD_FAILURE() << "a broken site template rendered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find(dir + "/container/podman.argv:2: unknown placeholder 'imgae'"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("VERLCTL_TEMPLATE_DIR");
  std::filesystem::remove_all(dir);
}

TEST(Container, ApptainerGetsItsVariablesThroughApptainerenv) {
  const Argv got = container_argv(config("apptainer"), {true, true, ""}, kEnv, kInner);
  const Argv want = {"apptainer", "exec", "--nv", "--bind", "/data:/data", "--bind", "/home/u:/home/u:ro",
                     "verl:latest", "verlctl", "train", "--rank", "0"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(container_argv(config("apptainer"), {false, true, ""}, {}, {"true"}),
            (Argv{"apptainer", "exec", "--bind", "/data:/data", "--bind", "/home/u:/home/u:ro", "verl:latest", "true"}));
  // Values with commas, '=' and quotes go through as they are: no flag parses them.
  EXPECT_EQ(container_client_env(config("apptainer"), {"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "Q=a \"b\""}),
            (Argv{"APPTAINERENV_NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "APPTAINERENV_Q=a \"b\""}));
}

TEST(Container, PyxisRunsAnOverlappingStepThatInheritsTheVariables) {
  const Argv got = container_argv(config("pyxis"), {true, true, "gpu-3"}, kEnv, kInner);
  const Argv want = {"srun", "--overlap", "--nodes", "1", "--ntasks", "1", "--nodelist", "gpu-3",
                     "--container-image", "verl:latest", "--container-mounts", "/data:/data,/home/u:/home/u:ro",
                     "verlctl", "train", "--rank", "0"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(container_client_env(config("pyxis"), kEnv), kEnv) << "srun exports its environment into the step";
  const auto bare = container_config(spec_with({{"runtime", "pyxis"}, {"image", "nvcr.io#nvidia/pytorch:24.05-py3"},
                                                {"shm_size", "16g"}, {"mounts", Json::array()}}));
  EXPECT_EQ(container_argv(bare, {}, {}, {"true"}),
            (Argv{"srun", "--overlap", "--nodes", "1", "--ntasks", "1", "--container-image",
                  "nvcr.io#nvidia/pytorch:24.05-py3", "true"}));
}

TEST(Container, NoneRunsTheInnerCommandAsIs) {
  const auto none = container_config(spec_with({{"runtime", "none"}, {"image", nullptr}, {"mounts", Json::array()}}));
  EXPECT_EQ(none.runtime, ContainerRuntime::kNone);
  EXPECT_EQ(container_argv(none, {true, true, ""}, kEnv, kInner), kInner);
  EXPECT_EQ(container_config(Json::object()).runtime, ContainerRuntime::kNone);
}

void expect_invalid(const Json& container, const std::vector<std::string>& parts) {
  try {
    container_config(spec_with(container));
    ADD_FAILURE() << "accepted " << container.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << p << " in " << e.what();
  }
}

TEST(Container, BadSettingsAreInvalidConfigNamingTheKey) {
  expect_invalid({{"runtime", "docker"}, {"image", nullptr}, {"shm_size", "16g"}, {"mounts", Json::array()}},
                 {"container.image: container.runtime is docker but no image"});
  expect_invalid({{"runtime", "docker"}, {"image", "i"}, {"shm_size", "lots"}, {"mounts", {"/a", ":/b", "/c:"}}},
                 {"container.shm_size: 'lots'", "container.mounts[0]: '/a'", "container.mounts[1]",
                  "container.mounts[2]"});
  expect_invalid({{"runtime", "apptainer"}, {"image", "i.sif"}, {"shm_size", "16g"}, {"mounts", {"/a,b:/c"}}},
                 {"container.mounts[0]: '/a,b:/c' has a comma, which apptainer"});
  // The same mount is fine where commas mean nothing; shm_size is not checked where unused.
  EXPECT_NO_THROW(container_config(
      spec_with({{"runtime", "docker"}, {"image", "i"}, {"shm_size", "16g"}, {"mounts", {"/a,b:/c"}}})));
  EXPECT_NO_THROW(container_config(
      spec_with({{"runtime", "apptainer"}, {"image", "i.sif"}, {"shm_size", "lots"}, {"mounts", Json::array()}})));
}

}  // namespace
}  // namespace verl::launcher
