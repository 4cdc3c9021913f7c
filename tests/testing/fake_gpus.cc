#include "tests/testing/fake_gpus.h"

namespace verl::testing {

probes::GpuInfo FakeGpus::query() const { return info_; }

probes::GpuInfo no_gpu() {
  probes::GpuInfo i;
  i.why_none = "libnvidia-ml.so.1: not found";
  return i;
}

}  // namespace verl::testing
