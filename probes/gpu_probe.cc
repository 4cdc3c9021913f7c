// gpu: the NVIDIA GPUs this machine has, their model and memory, the driver and the CUDA
// runtime. A node the spec gives GPUs (nodes[].gpus, slurm.gpus_per_node) fails without them;
// any other node without a GPU is skipped.
#include "probes/gpu_probe.h"

#include <algorithm>

#include "probes/cuda_api.h"
#include "probes/probes.h"

namespace verl::probes {

namespace {

// The NVML types and calls used, as nvml.h declares them (a stable C ABI).
struct NvmlMemory {
  unsigned long long total, free, used;
};
using NvmlDevice = void*;

void read_nvml(GpuInfo& info, std::string& why) {
  Library nvml({"libnvidia-ml.so.1"});
  if (!nvml) {
    why = "libnvidia-ml.so.1: not found (no NVIDIA driver)";
    return;
  }
  auto init = nvml.get<int (*)()>("nvmlInit_v2", nullptr);
  auto shutdown = nvml.get<int (*)()>("nvmlShutdown", nullptr);
  auto count = nvml.get<int (*)(unsigned*)>("nvmlDeviceGetCount_v2", nullptr);
  auto handle = nvml.get<int (*)(unsigned, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2", nullptr);
  auto name = nvml.get<int (*)(NvmlDevice, char*, unsigned)>("nvmlDeviceGetName", nullptr);
  auto memory = nvml.get<int (*)(NvmlDevice, NvmlMemory*)>("nvmlDeviceGetMemoryInfo", nullptr);
  auto driver = nvml.get<int (*)(char*, unsigned)>("nvmlSystemGetDriverVersion", nullptr);
  auto cuda = nvml.get<int (*)(int*)>("nvmlSystemGetCudaDriverVersion", nullptr);
  if (!init || !shutdown || !count || !handle) {
    why = "libnvidia-ml.so.1: lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
    return;
  }
  if (int rc = init(); rc != 0) {
    why = "nvmlInit: error " + std::to_string(rc);
    return;
  }
  char buf[96] = {};
  if (driver && driver(buf, sizeof buf) == 0) info.driver_version = buf;
  int v = 0;
  if (cuda && cuda(&v) == 0) info.cuda_driver = cuda_version_string(v);
  unsigned n = 0;
  if (count(&n) != 0) n = 0;
  for (unsigned i = 0; i < n; ++i) {
    GpuDevice d;
    d.name = "unknown";
    NvmlDevice dev = nullptr;
    if (handle(i, &dev) == 0) {
      char nm[96] = {};
      if (name && name(dev, nm, sizeof nm) == 0) d.name = nm;
      NvmlMemory m{};
      if (memory && memory(dev, &m) == 0) d.memory_gib = static_cast<double>(m.total) / kGiB;
    }
    info.devices.push_back(d);
  }
  if (n == 0) why = "NVML: no device";
  shutdown();
}

// libcudart (the one loader, probes/cuda_api.h): the runtime version, and the devices CUDA sees
// (CUDA_VISIBLE_DEVICES applies).
void read_cudart(GpuInfo& info, std::string& why) {
  const CudaRuntime& rt = cudart();
  if (!rt.ok()) {
    why = "libcudart: " + (rt.library.empty() ? std::string("not found") : rt.why);
    return;
  }
  int v = 0;
  if (rt.runtime_get_version(&v) == 0) info.cuda_runtime = cuda_version_string(v);
  if (info.cuda_driver.empty() && rt.driver_get_version(&v) == 0 && v > 0) info.cuda_driver = cuda_version_string(v);
  int n = 0;
  if (int rc = rt.get_device_count(&n); rc != 0) {
    why = std::string("cudaGetDeviceCount: ") + rt.get_error_string(rc);
    info.cuda_visible = 0;
    info.cuda_error = why;
    return;
  }
  info.cuda_visible = n;
  if (info.devices.empty())
    for (int i = 0; i < n; ++i) info.devices.push_back({"unknown", std::nullopt});
  if (n == 0) why = "cudaGetDeviceCount: 0 devices";
}

}  // namespace

std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

GpuInfo DlopenGpuSource::query() const {
  GpuInfo info;
  std::string nvml_why, cudart_why;
  read_nvml(info, nvml_why);
  read_cudart(info, cudart_why);
  if (info.devices.empty()) info.why_none = nvml_why + "; " + cudart_why;
  return info;
}

int expected_gpus(const Json& spec) {
  int n = 0;
  if (spec.contains("nodes") && spec.at("nodes").is_array())
    for (const auto& node : spec.at("nodes"))
      if (node.is_object() && node.contains("gpus") && node.at("gpus").is_number_integer())
        n = std::max(n, node.at("gpus").get<int>());
  if (const Json* s = spec.contains("slurm") ? &spec.at("slurm") : nullptr;
      s && s->contains("gpus_per_node") && s->at("gpus_per_node").is_number_integer())
    n = std::max(n, s->at("gpus_per_node").get<int>());
  return n;
}

int cuda_devices_or_skip(const Context& ctx, const std::string& metric, std::vector<Measurement>* out) {
  const DlopenGpuSource real;
  const GpuInfo info = (ctx.gpus ? ctx.gpus : &real)->query();
  const int n = info.cuda_visible.value_or(0);
  if (n > 0) return n;
  std::string why = !info.cuda_error.empty()      ? info.cuda_error
                    : !info.cuda_visible          ? "libcudart: not loadable"
                    : info.devices.empty()        ? info.why_none
                                                  : "CUDA sees none of the " + std::to_string(info.devices.size()) +
                                                        " GPUs (CUDA_VISIBLE_DEVICES)";
  if (const int want = expected_gpus(ctx.spec); want > 0)
    out->push_back({metric, std::nullopt,
                    "the spec gives this node " + std::to_string(want) + " GPUs, CUDA sees none (" + why + ")",
                    Status::kFail});
  else
    out->push_back({metric, std::nullopt, "skipped: no CUDA device (" + why + ")", Status::kSkipped});
  return 0;
}

Probe gpu_probe() {
  Probe p;
  p.descriptor = {"gpu", "NVIDIA GPUs by dlopen of libnvidia-ml.so.1 and libcudart: count, model, memory, versions",
                  {{"count", "GPUs", Bound::kNone, ""}, {"memory", "GiB", Bound::kNone, ""}}};
  p.run = [](const Context& ctx) {
    const DlopenGpuSource real;
    const GpuInfo info = (ctx.gpus ? ctx.gpus : &real)->query();
    const int want = expected_gpus(ctx.spec);
    const int have = static_cast<int>(info.devices.size());
    std::string versions = "driver " + (info.driver_version.empty() ? "unknown" : info.driver_version) +
                           ", CUDA runtime " + (info.cuda_runtime.empty() ? "not found" : info.cuda_runtime);
    if (!info.cuda_driver.empty()) versions += ", driver supports CUDA " + info.cuda_driver;
    // NVML counts every GPU; ranks get only those CUDA sees (CUDA_VISIBLE_DEVICES).
    if (info.cuda_visible && *info.cuda_visible != static_cast<int>(info.devices.size()))
      versions += "; CUDA sees " + std::to_string(*info.cuda_visible) + " (" +
                  (info.cuda_error.empty() ? std::string("CUDA_VISIBLE_DEVICES") : info.cuda_error) + ")";
    std::vector<Measurement> out;
    if (have == 0) {
      if (want > 0)
        out.push_back({"count", 0.0, "the spec gives this node " + std::to_string(want) + " GPUs, found none (" +
                                         info.why_none + ")", Status::kFail});
      else
        out.push_back({"count", 0.0, "skipped: no CUDA device (" + info.why_none + ")", Status::kSkipped});
      return out;
    }
    if (have < want)
      out.push_back({"count", static_cast<double>(have),
                     "the spec gives this node " + std::to_string(want) + " GPUs; " + versions, Status::kFail});
    else
      out.push_back({"count", static_cast<double>(have), versions, {}});
    for (int i = 0; i < have; ++i) {
      const GpuDevice& d = info.devices[static_cast<size_t>(i)];
      out.push_back({"memory", d.memory_gib, "gpu " + std::to_string(i) + ": " + d.name, {}});
    }
    return out;
  };
  return p;
}

}  // namespace verl::probes
