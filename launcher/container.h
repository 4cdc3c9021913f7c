// Container run lines: the argv that runs a task (the inner argv: a trainer rank, a probe)
// inside the spec's container image with the node's GPUs, InfiniBand devices, mounts and
// environment, rendered from templates/container/<runtime>.argv (one argument per line; see
// those files for what each flag is for, and common/template.h for overriding them). The
// result is an argv vector for the process module, never a shell string.
//
// What each runtime gets, and why (the templates say it in full):
//   docker, podman: --rm, --init (PID 1 passes SIGTERM on to the task), --name (a stop that
//     outlives its grace kills the container by name: container_kill_argv), --network host,
//     --ipc host when container.shm_size is "host" else --shm-size SIZE, --ulimit memlock=-1,
//     --device /dev/infiniband when the node has InfiniBand/RoCE ports, GPUs with --gpus all
//     (docker) or --device nvidia.com/gpu=all (podman, CDI), -v per mount, -w DIR, -e NAME.
//   apptainer: exec, --nv when the node has GPUs, --bind per mount, --pwd (host network, IPC,
//     /dev and /dev/shm are shared by default).
//   pyxis: srun --overlap --nodes 1 --ntasks 1 [--nodelist NODE] --container-image,
//     --container-mounts SRC:DST,..., --container-workdir.
//   none: inner unchanged.
// The variables' values never go on the command line (every user's ps shows it, and a rank's
// log starts with it): they travel in the client's environment (container_client_env), from
// which docker and podman take `-e NAME`, apptainer reads APPTAINERENV_NAME, and srun exports
// them into the step.
// The task's directory (ContainerTask::workdir) is mounted at its own path after the spec's
// mounts and is the container's working directory: job.yaml, logs, metrics and checkpoints are
// there. The inner argv's verlctl must exist at the same path inside the image.
// Pure functions apart from loading templates; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace verl::launcher {

enum class ContainerRuntime { kNone, kDocker, kPodman, kApptainer, kPyxis };
const char* runtime_name(ContainerRuntime runtime);

struct ContainerConfig {
  ContainerRuntime runtime = ContainerRuntime::kNone;
  std::string image;
  std::string shm_size = "16g";     // a size (16g, 512m) or "host"
  std::vector<std::string> mounts;  // SRC:DST or SRC:DST:OPTIONS, as written
};

// From a resolved cluster spec's `container`. Throws verl::Error (invalid config) naming the
// key: a runtime without an image, a mount that is not SRC:DST[:OPTIONS] (or has a comma where
// the runtime splits lists at commas: apptainer, pyxis), a shm_size that is neither a size nor
// "host".
ContainerConfig container_config(const nlohmann::ordered_json& spec);

struct ContainerHost {
  bool gpus = false;        // the node has NVIDIA GPUs
  bool infiniband = false;  // the node has InfiniBand/RoCE ports
  std::string slurm_node;   // pyxis: the node the step must run on (--nodelist); empty: any
};

// One task's run.
struct ContainerTask {
  std::string name;     // docker/podman --name; empty: none (a line shown, not run)
  std::string workdir;  // the task's directory: mounted at its own path, the working directory
};

// A container name from a cluster and a task id (job-3/0/1 -> verlctl-<cluster>-job-3-0-1):
// characters docker and podman refuse become '-'.
std::string container_name(const std::string& cluster, const std::string& task);

// env: NAME=value entries (only the names are used: docker/podman's -e). Throws verl::Error
// (invalid config) for a template that does not render (naming its file and line) or a value
// with a newline.
std::vector<std::string> container_argv(const ContainerConfig& config, const ContainerHost& host,
                                        const std::vector<std::string>& env, const std::vector<std::string>& inner,
                                        const ContainerTask& task = {});

// The client's environment for env (NAME=value entries): what process::Options::env gets
// when it runs container_argv's line. APPTAINERENV_NAME=value for apptainer, env as it is else.
std::vector<std::string> container_client_env(const ContainerConfig& config, const std::vector<std::string>& env);

// What kills a task's container by name when its client cannot pass SIGKILL on
// (templates/container/<runtime>-kill.argv): docker and podman. Empty for the runtimes whose
// task is in the client's process group (apptainer) or ends with its client (pyxis's srun), and
// for none.
std::vector<std::string> container_kill_argv(const ContainerConfig& config, const std::string& name);

}  // namespace verl::launcher
