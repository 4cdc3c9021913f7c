// A GPU source (probes/gpu_probe.h) that answers what the test gives it, for the probes that
// read GPUs (gpu, the rate probes, nccl) on a machine with or without a device.
#pragma once

#include "probes/gpu_probe.h"

namespace verl::testing {

class FakeGpus : public probes::GpuSource {
 public:
  explicit FakeGpus(probes::GpuInfo info) : info_(std::move(info)) {}
  probes::GpuInfo query() const override;

 private:
  probes::GpuInfo info_;
};

// What the source finds without a driver: no device, why_none "libnvidia-ml.so.1: not found".
probes::GpuInfo no_gpu();

}  // namespace verl::testing
