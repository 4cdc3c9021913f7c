// The GPU rate probes' measurements and their arithmetic, written down once:
//
//   copy bandwidth [GB/s]  = bytes copied / seconds / 1e9   (pinned host memory; D2D counts each
//                            byte once, though HBM reads and writes it: traffic is twice that)
//   matmul rate [TFLOP/s]  = 2 * m * n * k / seconds / 1e12 (one multiply and one add per term)
//
// Every time is one operation between two CUDA events on one stream; a size's figure is the best
// of `reps` after one untimed warm-up, the way peak rates are quoted (the best run is the one
// least disturbed by clocks ramping and other tenants). The measurements go through the one
// loader (probes/cuda_api.h) and throw verl::Error naming the device and the call that failed.
// Call from one thread at a time: they set the calling thread's current device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/cuda_api.h"

namespace verl::probes {

double copy_gbps(uint64_t bytes, double ms);
double matmul_tflops(int64_t m, int64_t n, int64_t k, double ms);

// "1 MiB", "256 MiB", "1 GiB", "8 B": binary units, whole numbers where they are whole.
std::string format_bytes(uint64_t bytes);

enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice };
const char* copy_direction_name(CopyDirection d);  // "h2d" | "d2h" | "d2d"

struct SizeRate {
  uint64_t bytes = 0;
  double best_ms = 0;
  double gbps = 0;  // of best_ms
};

// Copies of each size on `device`, best of reps each; host buffers are pinned (cudaHostAlloc).
std::vector<SizeRate> measure_copy(int device, CopyDirection dir, const std::vector<uint64_t>& sizes, int reps);

struct MatmulRate {
  int n = 0;  // an n x n by n x n product
  double best_ms = 0;
  double tflops = 0;
};

// C = A * B in bf16 with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F) on `device`;
// A and B hold pseudo-random values in [-1, 1] (all-zero inputs draw less power and run faster
// than real data).
MatmulRate measure_matmul_bf16(int device, int n, int reps);

}  // namespace verl::probes
