// What the gpu probe reads, behind one interface so that tests can fake it: the real source
// dlopens libnvidia-ml.so.1 (count, model, memory, driver version) and libcudart (runtime
// version, the devices CUDA sees) at run time, so that one binary runs with and without a GPU,
// and built with or without CUDA. Nothing here links against CUDA. Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/probe.h"

namespace verl::probes {

struct GpuDevice {
  std::string name;                   // "NVIDIA H200"; "unknown" when only CUDA saw it
  std::optional<double> memory_gib;   // total; nullopt without NVML
};

struct GpuInfo {
  std::vector<GpuDevice> devices;
  std::string driver_version;   // "570.86.15"; empty when unknown
  std::string cuda_runtime;     // "13.0"; empty when libcudart is not there
  std::string cuda_driver;      // the CUDA version the driver supports; empty when unknown
  std::optional<int> cuda_visible;  // devices CUDA sees (after CUDA_VISIBLE_DEVICES); nullopt: unknown
  std::string cuda_error;           // why cudaGetDeviceCount failed (then cuda_visible is 0)
  std::string why_none;         // when devices is empty: what each library said
};

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual GpuInfo query() const = 0;
};

class DlopenGpuSource : public GpuSource {
 public:
  GpuInfo query() const override;
};

// The number of CUDA devices a GPU rate probe measures (after CUDA_VISIBLE_DEVICES), from
// ctx.gpus or the real source. 0 with one measurement of `metric` added to *out saying why:
// "skipped: no CUDA device (...)", or a fail when the spec gives this node GPUs.
int cuda_devices_or_skip(const Context& ctx, const std::string& metric, std::vector<Measurement>* out);

// 12040 -> "12.4" (cudaRuntimeGetVersion's and cudaDriverGetVersion's encoding).
std::string cuda_version_string(int v);

}  // namespace verl::probes
