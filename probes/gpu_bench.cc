#include "probes/gpu_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/error.h"

namespace verl::probes {

double copy_gbps(uint64_t bytes, double ms) { return ms > 0 ? static_cast<double>(bytes) / (ms * 1e-3) / 1e9 : 0; }

double matmul_tflops(int64_t m, int64_t n, int64_t k, double ms) {
  return ms > 0 ? 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / (ms * 1e-3) / 1e12
                : 0;
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  uint64_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  if (v >= 1024 && u < 4) {  // not a whole number of the next unit: one decimal of it
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", static_cast<double>(v) / 1024, units[u + 1]);
    return buf;
  }
  return std::to_string(v) + " " + units[u];
}

const char* copy_direction_name(CopyDirection d) {
  switch (d) {
    case CopyDirection::kHostToDevice: return "h2d";
    case CopyDirection::kDeviceToHost: return "d2h";
    case CopyDirection::kDeviceToDevice: return "d2d";
  }
  return "?";
}

std::vector<SizeRate> measure_copy(int device, CopyDirection dir, const std::vector<uint64_t>& sizes, int reps) {
  const CudaRuntime& rt = cuda_or_throw();
  const std::string where = "gpu " + std::to_string(device);
  check_cuda(rt.set_device(device), where + ": cudaSetDevice");
  const uint64_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  DeviceBuffer dev_a(largest, where);
  DeviceBuffer dev_b(dir == CopyDirection::kDeviceToDevice ? largest : 0, where);
  PinnedBuffer host(dir == CopyDirection::kDeviceToDevice ? 0 : largest, where);
  if (host.data()) std::memset(host.data(), 0x5a, largest);  // touched, so that no page fault is timed
  check_cuda(rt.memcpy(dev_a.data(), host.data() ? host.data() : dev_b.data(), largest,
                       host.data() ? kHostToDevice : kDeviceToDevice),
             where + ": cudaMemcpy (initial fill)");
  Stream stream(where);
  Event start(where), stop(where);

  std::vector<SizeRate> out;
  for (const uint64_t bytes : sizes) {
    SizeRate r;
    r.bytes = bytes;
    r.best_ms = -1;
    for (int i = 0; i <= reps; ++i) {  // i == 0: the untimed warm-up
      check_cuda(rt.event_record(start.get(), stream.get()), where + ": cudaEventRecord");
      int rc = 0;
      switch (dir) {
        case CopyDirection::kHostToDevice:
          rc = rt.memcpy_async(dev_a.data(), host.data(), bytes, kHostToDevice, stream.get());
          break;
        case CopyDirection::kDeviceToHost:
          rc = rt.memcpy_async(host.data(), dev_a.data(), bytes, kDeviceToHost, stream.get());
          break;
        case CopyDirection::kDeviceToDevice:
          rc = rt.memcpy_async(dev_b.data(), dev_a.data(), bytes, kDeviceToDevice, stream.get());
          break;
      }
      check_cuda(rc, where + ": cudaMemcpyAsync " + copy_direction_name(dir) + " " + format_bytes(bytes));
      check_cuda(rt.event_record(stop.get(), stream.get()), where + ": cudaEventRecord");
      check_cuda(rt.event_synchronize(stop.get()), where + ": cudaEventSynchronize");
      float ms = 0;
      check_cuda(rt.event_elapsed_time(&ms, start.get(), stop.get()), where + ": cudaEventElapsedTime");
      if (i > 0 && (r.best_ms < 0 || ms < r.best_ms)) r.best_ms = ms;
    }
    r.gbps = copy_gbps(bytes, r.best_ms);
    out.push_back(r);
  }
  return out;
}

namespace {

// bf16 is the upper half of an IEEE float (round to nearest even on the dropped half).
uint16_t to_bf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

MatmulRate measure_matmul_bf16(int device, int n, int reps) {
  const CudaRuntime& rt = cuda_or_throw();
  const Cublas& blas = cublas();
  const std::string where = "gpu " + std::to_string(device);
  if (!blas.ok())
    throw Error(ExitCode::kNotCompiledIn, where + ": cuBLAS not loadable: " + blas.why,
                "install the CUDA toolkit's libcublas (it comes with the CUDA runtime) or put it on LD_LIBRARY_PATH");
  check_cuda(rt.set_device(device), where + ": cudaSetDevice");
  const uint64_t elems = static_cast<uint64_t>(n) * static_cast<uint64_t>(n);
  const uint64_t bytes = elems * sizeof(uint16_t);
  DeviceBuffer a(bytes, where), b(bytes, where), c(bytes, where);
  {
    std::vector<uint16_t> host(elems);
    std::mt19937 gen(/*seed=*/1234);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& v : host) v = to_bf16(dist(gen));
    check_cuda(rt.memcpy(a.data(), host.data(), bytes, kHostToDevice), where + ": cudaMemcpy A");
    check_cuda(rt.memcpy(b.data(), host.data(), bytes, kHostToDevice), where + ": cudaMemcpy B");
  }
  Stream stream(where);
  Event start(where), stop(where);
  CublasHandle handle(where);
  check_cublas(blas.set_stream(handle.get(), stream.get()), where + ": cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  MatmulRate r;
  r.n = n;
  r.best_ms = -1;
  for (int i = 0; i <= reps; ++i) {  // i == 0: the untimed warm-up (cuBLAS picks its kernel)
    check_cuda(rt.event_record(start.get(), stream.get()), where + ": cudaEventRecord");
    check_cublas(blas.gemm_ex(handle.get(), kCublasOpN, kCublasOpN, n, n, n, &alpha, a.data(), kCudaR16BF, n,
                              b.data(), kCudaR16BF, n, &beta, c.data(), kCudaR16BF, n, kCublasCompute32F,
                              kCublasGemmDefault),
                 where + ": cublasGemmEx bf16 " + std::to_string(n) + "^3");
    check_cuda(rt.event_record(stop.get(), stream.get()), where + ": cudaEventRecord");
    check_cuda(rt.event_synchronize(stop.get()), where + ": cudaEventSynchronize");
    float ms = 0;
    check_cuda(rt.event_elapsed_time(&ms, start.get(), stop.get()), where + ": cudaEventElapsedTime");
    if (i > 0 && (r.best_ms < 0 || ms < r.best_ms)) r.best_ms = ms;
  }
  r.tflops = matmul_tflops(n, n, n, r.best_ms);
  return r;
}

}  // namespace verl::probes
