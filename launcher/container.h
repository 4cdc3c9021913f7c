// Container run lines: the argv that runs a command (the inner argv, e.g. a trainer rank)
// inside the spec's container image with the node's GPUs, InfiniBand devices, mounts and
// environment. One function per runtime behind container_argv(); the result is an argv
// vector for the process module, never a shell string.
//
// What each runtime gets, and why:
//   docker, podman: --network host (NCCL and the store talk to other nodes' addresses directly),
//     --ipc host when container.shm_size is "host" (ranks in separate containers then share
//     /dev/shm and CUDA IPC), else --shm-size SIZE (PyTorch's data loaders and NCCL's
//     shared-memory transport need more than the runtime's 64 MiB); --ulimit memlock=-1 (RDMA
//     pins memory); --device /dev/infiniband when the node has InfiniBand/RoCE ports; GPUs with
//     --gpus all (docker) or --device nvidia.com/gpu=all (podman, CDI); -v SRC:DST per mount;
//     -e NAME=value per variable.
//   apptainer: exec, --nv when the node has GPUs, --bind per mount, --env per variable (host
//     network, IPC, /dev and /dev/shm are shared by default).
//   pyxis: srun --overlap --nodes 1 --ntasks 1 [--nodelist NODE] --container-image (--overlap:
//     the agent's own step holds the node's resources, and a step that does not share them
//     would wait until the agent ends; enroot shares the host network and /dev/shm; GPUs and HCAs
//     come from SLURM's GRES and enroot's hooks), --container-mounts SRC:DST,...; variables go
//     through `env NAME=value ... inner` inside the container, because srun's --export splits
//     values at commas and NCCL_IB_HCA has them.
//   none: inner unchanged; the caller passes the variables through process::Options::env.
// Pure functions; thread-safe.
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

// env: NAME=value entries. Throws verl::Error (invalid config) for a variable apptainer's
// --env cannot carry (exactly one '=' and a value ending in '"').
std::vector<std::string> container_argv(const ContainerConfig& config, const ContainerHost& host,
                                        const std::vector<std::string>& env, const std::vector<std::string>& inner);

}  // namespace verl::launcher
