// What a node has to offer: CPUs, memory, GPUs, InfiniBand ports. The agent detects them once
// at start and registers them with the head; the head stores them as JSON.
//
// The cluster spec may declare what a node offers instead (nodes[].resources: {cpus, gpus,
// gpu_ids}, as `ray start --num-cpus/--num-gpus`): declare() puts the declared figures over the
// detected ones and refuses (exit 3, naming the node) GPUs the node does not have. The scheduler
// then places ranks only on the declared GPU indices, and a CPU node with declared cpus takes at
// most that many ranks of a job.
//
// Detection reads the OS only through the paths in ResourceRoots (and nvidia-smi through the
// process module), so that tests can point it at a fake /proc and /sys. Pure functions;
// thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/node_facts.h"

namespace verl::launcher {

struct Resources {
  int cpus = 0;                         // CPUs this process may run on
  int64_t memory_bytes = 0;             // MemTotal
  int gpus = 0;
  std::vector<std::string> gpu_names;   // as nvidia-smi -L names them; may be empty when gpus > 0
  std::vector<HcaPort> ib_ports;       // read_hca_ports() (launcher/node_facts.h), GIDs left out
  // The GPU indices ranks may use; empty: 0 .. gpus-1. Set by declare() from nodes[].resources.
  std::vector<int> gpu_ids;
  // What was detected before a declaration replaced it (status shows both); 0/false: nothing declared.
  bool declared = false;
  int detected_cpus = 0, detected_gpus = 0;
  std::vector<int> usable_gpus() const;  // gpu_ids, else 0 .. gpus-1
  // The NCCL_* variables the agent gives this node's ranks (nccl_env.h, as `verlctl env` shows
  // them): the head compares what NCCL chose with them (nccl_log.h). Empty when not computed.
  std::map<std::string, std::string> nccl_env;
};

// nodes[i].resources of the cluster spec; a field left null keeps what was detected.
struct DeclaredResources {
  std::optional<int> cpus, gpus;
  std::optional<std::vector<int>> gpu_ids;
  bool any() const { return cpus || gpus || gpu_ids; }
};
// From a node entry of the spec (its `resources` mapping, absent or null fields left unset).
DeclaredResources declared_resources(const nlohmann::ordered_json& node_entry);
nlohmann::ordered_json to_json(const DeclaredResources& d);  // {cpus?, gpus?, gpu_ids?}
// The detected resources with the declared ones over them. Throws verl::Error (invalid config,
// exit 3) naming `where` (e.g. "node-1 (nodes[1].resources)") when the declaration asks for GPUs
// or GPU indices the node does not have, or when gpus and gpu_ids disagree.
Resources declare(Resources detected, const DeclaredResources& d, const std::string& where);

nlohmann::ordered_json to_json(const Resources& r);
// Throws verl::Error (failure) naming the key when the JSON lacks one or has the wrong type.
Resources resources_from_json(const nlohmann::ordered_json& j);

struct ResourceRoots {
  std::string proc = "/proc";
  std::string sys = "/sys";
  std::string nvidia_smi = "nvidia-smi";  // empty: do not run it
};

// Everything below never throws: what cannot be read counts as absent (0, empty).
Resources detect_resources(const ResourceRoots& roots = {});

int cpu_count();                                         // sched_getaffinity, else online CPUs
int64_t parse_meminfo_total(const std::string& text);    // bytes of MemTotal; 0 when absent
std::vector<std::string> parse_nvidia_smi_list(const std::string& text);  // "GPU 0: NAME (UUID: ..)"
int count_proc_nvidia_gpus(const std::string& proc_root);                 // proc/driver/nvidia/gpus/*

// "7.8 GiB"
std::string format_bytes(int64_t bytes);

}  // namespace verl::launcher
