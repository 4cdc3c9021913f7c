// What a node has to offer: CPUs, memory, GPUs, InfiniBand ports. The agent detects them once
// at start and registers them with the head; the head stores them as JSON.
//
// Detection reads the OS only through the paths in ResourceRoots (and nvidia-smi through the
// process module), so that tests can point it at a fake /proc and /sys. Pure functions;
// thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
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
};

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
