// The one loader of NVIDIA's libraries for the probes: libcudart, libcublas and libnccl are
// dlopen'ed at run time (never linked), so that one verlctl binary starts and runs on machines
// without a GPU, a driver or the CUDA toolkit, and the GPU probes there say why they skipped.
//
// Each library is loaded once per process, on first use (a function-local static, so loading is
// thread-safe), and stays loaded: CUDA and NCCL keep per-process state that must outlive any one
// probe. The function types are those of cuda_runtime_api.h, cublas_api.h and nccl.h (stable C
// ABIs); the enum values below were checked against CUDA 13.0's and NCCL 2.28's headers. A
// library that is missing, or lacks a symbol, has ok() false and why() saying which.
//
// Every call site goes through check_cuda / check_cublas / check_nccl, which throw verl::Error
// naming the call and the library's own error string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace verl::probes {

// One dlopen'ed library: the first of names that loads; closed on destruction.
class Library {
 public:
  explicit Library(std::initializer_list<const char*> names);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  explicit operator bool() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }  // dlerror() of the first name tried
  const std::string& loaded() const { return loaded_; }  // which name loaded
  // The symbol, or nullptr (and `missing` gains its name) when the library lacks it.
  template <typename F>
  F get(const char* symbol, std::string* missing) const {
    void* p = lookup(symbol);
    if (!p && missing) *missing += (missing->empty() ? "" : ", ") + std::string(symbol);
    return reinterpret_cast<F>(p);
  }

 private:
  void* lookup(const char* symbol) const;
  void* handle_ = nullptr;
  std::string error_;
  std::string loaded_;
};

using CudaStream = void*;  // cudaStream_t
using CudaEvent = void*;   // cudaEvent_t

// cudaMemcpyKind
enum CudaMemcpyKind : int { kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3 };

struct CudaRuntime {
  int (*get_device_count)(int*) = nullptr;
  int (*runtime_get_version)(int*) = nullptr;
  int (*driver_get_version)(int*) = nullptr;
  const char* (*get_error_string)(int) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*mem_get_info)(size_t* free, size_t* total) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*host_alloc)(void**, size_t, unsigned flags) = nullptr;
  int (*free_host)(void*) = nullptr;
  int (*memcpy)(void* dst, const void* src, size_t, int kind) = nullptr;
  int (*memcpy_async)(void* dst, const void* src, size_t, int kind, CudaStream) = nullptr;
  int (*stream_create)(CudaStream*) = nullptr;
  int (*stream_destroy)(CudaStream) = nullptr;
  int (*stream_synchronize)(CudaStream) = nullptr;
  int (*device_synchronize)() = nullptr;
  int (*event_create)(CudaEvent*) = nullptr;
  int (*event_destroy)(CudaEvent) = nullptr;
  int (*event_record)(CudaEvent, CudaStream) = nullptr;
  int (*event_synchronize)(CudaEvent) = nullptr;
  int (*event_elapsed_time)(float* ms, CudaEvent start, CudaEvent end) = nullptr;

  bool ok() const { return why.empty(); }
  std::string why;      // empty when loaded with every symbol
  std::string library;  // which file loaded
};

// cublasGemmEx's enum values (library_types.h, cublas_api.h).
enum : int { kCublasOpN = 0, kCudaR16BF = 14, kCudaR32F = 0, kCublasCompute32F = 68, kCublasGemmDefault = -1 };

struct Cublas {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*set_stream)(Handle, CudaStream) = nullptr;
  int (*gemm_ex)(Handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a, int a_type,
                 int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type, int ldc,
                 int compute_type, int algo) = nullptr;
  bool ok() const { return why.empty(); }
  std::string why;
  std::string library;
};

// nccl.h: ncclUniqueId is 128 opaque bytes passed by value to ncclCommInitRank.
constexpr size_t kNcclUniqueIdBytes = 128;
struct NcclUniqueId {
  char internal[kNcclUniqueIdBytes];
};
enum : int { kNcclFloat32 = 7, kNcclSum = 0 };

struct Nccl {
  using Comm = void*;
  int (*get_version)(int*) = nullptr;
  const char* (*get_error_string)(int) = nullptr;
  int (*get_unique_id)(NcclUniqueId*) = nullptr;
  int (*comm_init_rank)(Comm*, int nranks, NcclUniqueId id, int rank) = nullptr;
  int (*comm_init_all)(Comm*, int ndev, const int* devlist) = nullptr;
  int (*comm_destroy)(Comm) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, Comm, CudaStream) = nullptr;
  int (*all_gather)(const void* send, void* recv, size_t send_count, int dtype, Comm, CudaStream) = nullptr;
  int (*reduce_scatter)(const void* send, void* recv, size_t recv_count, int dtype, int op, Comm,
                        CudaStream) = nullptr;
  bool ok() const { return why.empty(); }
  std::string why;
  std::string library;
};

// Loaded on first call, once per process.
const CudaRuntime& cudart();
const Cublas& cublas();
const Nccl& nccl();

// Throw verl::Error(failure) "<what>: <library's error string> (error <rc>)" when rc != 0.
void check_cuda(int rc, const std::string& what);
void check_cublas(int rc, const std::string& what);
void check_nccl(int rc, const std::string& what);

// The runtime, or verl::Error(not compiled in) saying why it cannot be loaded.
const CudaRuntime& cuda_or_throw();

// Owners of what the probes take from CUDA, freed on destruction on the device current then
// (the probes set one device per scope). `where` ("gpu 0") prefixes their errors.
class DeviceBuffer {
 public:
  DeviceBuffer(uint64_t bytes, const std::string& where);  // 0 bytes: holds nothing
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return p_; }

 private:
  void* p_ = nullptr;
};

class PinnedBuffer {  // page-locked host memory (cudaHostAlloc)
 public:
  PinnedBuffer(uint64_t bytes, const std::string& where);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return p_; }

 private:
  void* p_ = nullptr;
};

class Stream {
 public:
  explicit Stream(const std::string& where);
  ~Stream();
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CudaStream get() const { return s_; }

 private:
  CudaStream s_ = nullptr;
};

class Event {
 public:
  explicit Event(const std::string& where);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CudaEvent get() const { return e_; }

 private:
  CudaEvent e_ = nullptr;
};

class CublasHandle {
 public:
  explicit CublasHandle(const std::string& where);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  Cublas::Handle get() const { return h_; }

 private:
  Cublas::Handle h_ = nullptr;
};

}  // namespace verl::probes
