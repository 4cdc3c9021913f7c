#include "probes/cuda_api.h"

#include <dlfcn.h>

#include "common/error.h"

namespace verl::probes {

Library::Library(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    handle_ = ::dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      loaded_ = n;
      return;
    }
    const char* e = ::dlerror();
    if (error_.empty()) error_ = e ? e : n;
  }
}

Library::~Library() {
  if (handle_) ::dlclose(handle_);
}

void* Library::lookup(const char* symbol) const { return handle_ ? ::dlsym(handle_, symbol) : nullptr; }

namespace {

// The names tried, newest first: a CUDA 12 machine has libcudart.so.12, CUDA 11 libcudart.so.11.0,
// a toolkit install the unversioned development link. The libraries are never closed (leaked on
// purpose): a dlclose from a static destructor at exit can run after CUDA's own teardown.
Library& cudart_library() {
  static Library& lib = *new Library({"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"});
  return lib;
}

template <typename Api>
void finish(Api& api, const Library& lib, const std::string& missing) {
  api.library = lib.loaded();
  if (!lib) api.why = lib.error();
  else if (!missing.empty()) api.why = lib.loaded() + " lacks " + missing;
}

}  // namespace

const CudaRuntime& cudart() {
  static const CudaRuntime api = [] {
    CudaRuntime a;
    const Library& lib = cudart_library();
    std::string m;
    a.get_device_count = lib.get<decltype(a.get_device_count)>("cudaGetDeviceCount", &m);
    a.runtime_get_version = lib.get<decltype(a.runtime_get_version)>("cudaRuntimeGetVersion", &m);
    a.driver_get_version = lib.get<decltype(a.driver_get_version)>("cudaDriverGetVersion", &m);
    a.get_error_string = lib.get<decltype(a.get_error_string)>("cudaGetErrorString", &m);
    a.set_device = lib.get<decltype(a.set_device)>("cudaSetDevice", &m);
    a.mem_get_info = lib.get<decltype(a.mem_get_info)>("cudaMemGetInfo", &m);
    a.malloc = lib.get<decltype(a.malloc)>("cudaMalloc", &m);
    a.free = lib.get<decltype(a.free)>("cudaFree", &m);
    a.host_alloc = lib.get<decltype(a.host_alloc)>("cudaHostAlloc", &m);
    a.free_host = lib.get<decltype(a.free_host)>("cudaFreeHost", &m);
    a.memcpy = lib.get<decltype(a.memcpy)>("cudaMemcpy", &m);
    a.memcpy_async = lib.get<decltype(a.memcpy_async)>("cudaMemcpyAsync", &m);
    a.stream_create = lib.get<decltype(a.stream_create)>("cudaStreamCreate", &m);
    a.stream_destroy = lib.get<decltype(a.stream_destroy)>("cudaStreamDestroy", &m);
    a.stream_synchronize = lib.get<decltype(a.stream_synchronize)>("cudaStreamSynchronize", &m);
    a.device_synchronize = lib.get<decltype(a.device_synchronize)>("cudaDeviceSynchronize", &m);
    a.event_create = lib.get<decltype(a.event_create)>("cudaEventCreate", &m);
    a.event_destroy = lib.get<decltype(a.event_destroy)>("cudaEventDestroy", &m);
    a.event_record = lib.get<decltype(a.event_record)>("cudaEventRecord", &m);
    a.event_synchronize = lib.get<decltype(a.event_synchronize)>("cudaEventSynchronize", &m);
    a.event_elapsed_time = lib.get<decltype(a.event_elapsed_time)>("cudaEventElapsedTime", &m);
    finish(a, lib, m);
    return a;
  }();
  return api;
}

const Cublas& cublas() {
  static const Cublas api = [] {
    Cublas a;
    static Library& lib = *new Library({"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"});
    std::string m;
    a.create = lib.get<decltype(a.create)>("cublasCreate_v2", &m);
    a.destroy = lib.get<decltype(a.destroy)>("cublasDestroy_v2", &m);
    a.set_stream = lib.get<decltype(a.set_stream)>("cublasSetStream_v2", &m);
    a.gemm_ex = lib.get<decltype(a.gemm_ex)>("cublasGemmEx", &m);
    finish(a, lib, m);
    return a;
  }();
  return api;
}

const Nccl& nccl() {
  static const Nccl api = [] {
    Nccl a;
    static Library& lib = *new Library({"libnccl.so.2", "libnccl.so"});
    std::string m;
    a.get_version = lib.get<decltype(a.get_version)>("ncclGetVersion", &m);
    a.get_error_string = lib.get<decltype(a.get_error_string)>("ncclGetErrorString", &m);
    a.get_unique_id = lib.get<decltype(a.get_unique_id)>("ncclGetUniqueId", &m);
    a.comm_init_rank = lib.get<decltype(a.comm_init_rank)>("ncclCommInitRank", &m);
    a.comm_init_all = lib.get<decltype(a.comm_init_all)>("ncclCommInitAll", &m);
    a.comm_destroy = lib.get<decltype(a.comm_destroy)>("ncclCommDestroy", &m);
    a.group_start = lib.get<decltype(a.group_start)>("ncclGroupStart", &m);
    a.group_end = lib.get<decltype(a.group_end)>("ncclGroupEnd", &m);
    a.all_reduce = lib.get<decltype(a.all_reduce)>("ncclAllReduce", &m);
    a.all_gather = lib.get<decltype(a.all_gather)>("ncclAllGather", &m);
    a.reduce_scatter = lib.get<decltype(a.reduce_scatter)>("ncclReduceScatter", &m);
    finish(a, lib, m);
    return a;
  }();
  return api;
}

void check_cuda(int rc, const std::string& what) {
  if (rc == 0) return;
  const auto& rt = cudart();
  const std::string text = rt.get_error_string ? rt.get_error_string(rc) : "CUDA error";
  throw Error(ExitCode::kFailure, what + ": " + text + " (error " + std::to_string(rc) + ")");
}

void check_cublas(int rc, const std::string& what) {
  if (rc == 0) return;
  // cublasGetStatusString is newer than some drivers' toolkits: the status code names it.
  throw Error(ExitCode::kFailure, what + ": cuBLAS status " + std::to_string(rc),
              "cublas_api.h lists the cublasStatus_t values (13: execution failed, 3: alloc failed)");
}

void check_nccl(int rc, const std::string& what) {
  if (rc == 0) return;
  const auto& n = nccl();
  const std::string text = n.get_error_string ? n.get_error_string(rc) : "NCCL error";
  throw Error(ExitCode::kFailure, what + ": " + text + " (error " + std::to_string(rc) + ")",
              "rerun with NCCL_DEBUG=WARN for NCCL's own reason");
}

const CudaRuntime& cuda_or_throw() {
  const CudaRuntime& rt = cudart();
  if (!rt.ok())
    throw Error(ExitCode::kNotCompiledIn, "the CUDA runtime is not loadable: " + rt.why,
                "install the CUDA runtime (libcudart.so.13 or .12) or put it on LD_LIBRARY_PATH");
  return rt;
}

DeviceBuffer::DeviceBuffer(uint64_t bytes, const std::string& where) {
  if (bytes == 0) return;
  check_cuda(cuda_or_throw().malloc(&p_, bytes), where + ": cudaMalloc " + std::to_string(bytes) + " bytes");
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) cudart().free(p_);
}

PinnedBuffer::PinnedBuffer(uint64_t bytes, const std::string& where) {
  if (bytes == 0) return;
  check_cuda(cuda_or_throw().host_alloc(&p_, bytes, /*cudaHostAllocDefault=*/0),
             where + ": cudaHostAlloc " + std::to_string(bytes) + " bytes");
}
PinnedBuffer::~PinnedBuffer() {
  if (p_) cudart().free_host(p_);
}

Stream::Stream(const std::string& where) { check_cuda(cuda_or_throw().stream_create(&s_), where + ": cudaStreamCreate"); }
Stream::~Stream() {
  if (s_) cudart().stream_destroy(s_);
}

Event::Event(const std::string& where) { check_cuda(cuda_or_throw().event_create(&e_), where + ": cudaEventCreate"); }
Event::~Event() {
  if (e_) cudart().event_destroy(e_);
}

CublasHandle::CublasHandle(const std::string& where) { check_cublas(cublas().create(&h_), where + ": cublasCreate"); }
CublasHandle::~CublasHandle() {
  if (h_) cublas().destroy(h_);
}

}  // namespace verl::probes
