// The probes, one file each (probes/<name>_probe.cc), and the pieces of them that tests use
// directly. Each factory returns the probe's descriptor and run function; local_probes()
// (probes/harness.h) lists them in report order. The servers and the GPU source live in
// clock_probe.h, tcp_probe.h and gpu_probe.h.
#pragma once

#include <cstdint>
#include <string>

#include "probes/probe.h"

namespace verl::probes {

Probe shm_probe();       // /dev/shm size vs probes.min_shm_gib
Probe disk_probe();      // free space where checkpoints go vs probes.min_free_disk_gib
Probe clock_probe();     // offset against the head's clock vs probes.max_clock_offset_ms
Probe ports_probe();     // the head's dashboard and store ports accept connections
Probe tcp_probe();       // bandwidth vs probes.min_tcp_gbps and round-trip time to the head
Probe versions_probe();  // verlctl, commit, libtorch, CUDA, NCCL, NVIDIA driver
Probe gpu_probe();       // GPUs: count, model, memory, driver and CUDA runtime
Probe ib_probe();        // InfiniBand/RoCE ports: state and rate
// GPU rates, per GPU (probes/gpu_bench.h); skipped without a CUDA device.
Probe h2d_probe();         // pinned host -> device copy bandwidth vs probes.min_copy_gbps
Probe d2h_probe();         // device -> pinned host copy bandwidth vs probes.min_copy_gbps
Probe d2d_probe();         // device -> same device copy bandwidth vs probes.min_d2d_gbps
Probe matmul_probe();      // bf16 matrix product rate vs probes.min_bf16_tflops
// NCCL collectives (probes/nccl_probe.h): busbw vs probes.min_busbw_gbps.
Probe nccl_intra_probe();  // this process over all its GPUs (ncclCommInitAll)
Probe nccl_inter_probe();  // every rank of the job (Context::world), through the cluster

struct FsSpace {
  std::string path;         // what was measured: the path itself or its nearest existing parent
  uint64_t size_bytes = 0;  // f_blocks * f_frsize
  uint64_t free_bytes = 0;  // f_bavail * f_frsize: what an unprivileged writer may use
};
// statvfs of path, or of its nearest existing parent when it does not exist (yet). Throws
// verl::Error naming the path when not even "/" can be read.
FsSpace fs_space(const std::string& path);

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// "200 Gb/sec (4X HDR)" -> 200; nullopt when it does not start with a number.
std::optional<double> parse_ib_rate_gbps(const std::string& rate);

// The GPUs a node of this spec should have: the largest nodes[].gpus, or slurm.gpus_per_node.
int expected_gpus(const Json& spec);

}  // namespace verl::probes
