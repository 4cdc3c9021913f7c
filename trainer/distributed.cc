#include "trainer/distributed.h"

#include <torch/cuda.h>

#include <torch/version.h>
// The process-group base class: c10d::Backend from 2.0 on, c10d::ProcessGroup before.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
// Gloo: Debian's libtorch ships gloo's headers; the pip wheel (the GPU machine's 2.11) does not,
// though its library has Gloo. Without the headers there is no CPU process group (CUDA ranks use
// NCCL). ProcessGroupGloo.hpp is guarded by USE_C10D_GLOO, which Debian's TorchConfig defines.
#if __has_include(<gloo/algorithm.h>)
#define VERL_HAVE_GLOO 1
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
// NCCL only when the build says torch has it (CMake adds USE_C10D_NCCL for a CUDA libtorch).
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "common/log.h"
#include "trainer/core_algos.h"

namespace verl::trainer {
namespace {

// ProcessGroupGloo/NCCL became c10d::Backend subclasses in torch 2.0; before, ProcessGroup.
#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

constexpr int kMaxPort = 65535;
constexpr int kDefaultTimeoutSeconds = 60;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    throw Error{ExitCode::kInvalidConfig,
                std::string("environment variable ") + name + "='" + v +
                    "' is not an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]",
                "torchrun-style launchers set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
                "MASTER_PORT; unset them to run a single rank"};
  }
  return x;
}

std::string where(const DistributedOptions& o) {
  return o.master_addr + ":" + std::to_string(o.master_port);
}

std::string seconds(std::chrono::milliseconds ms) {
  const auto s = ms.count() / 1000.0;
  std::ostringstream out;
  out << s << " s";
  return out.str();
}

bool is_loopback(const std::string& addr) {
  return addr == "127.0.0.1" || addr == "localhost" || addr == "::1";
}

// FNV-1a over the joined keys: ranks compare one number instead of shipping strings.
int64_t keys_hash(const std::map<std::string, double>& m) {
  uint32_t h = 2166136261u;
  for (const auto& [k, v] : m) {
    for (unsigned char c : k) h = (h ^ c) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;  // separator
  }
  return static_cast<int64_t>(h);
}

enum class MetricReduce { kMean, kMax, kMin };
MetricReduce metric_reduce(const std::string& key) {
  auto ends = [&](const std::string& suffix) {
    return key.size() >= suffix.size() &&
           key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("_max") || ends("/max")) return MetricReduce::kMax;
  if (ends("_min") || ends("/min")) return MetricReduce::kMin;
  return MetricReduce::kMean;
}

}  // namespace

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<BackendBase> pg;
  std::chrono::milliseconds timeout;
  int rank = 0;
  // NCCL reduces device tensors only: CPU tensors (metrics, counts) take a round trip here.
  bool device_only = false;
  torch::Device device{torch::kCPU};

  // The tensor to hand to the backend for t, and whether it must be copied back.
  torch::Tensor staged(const torch::Tensor& t) const {
    return device_only && !t.is_cuda() ? t.to(device) : t;
  }

  // Seconds this rank spent in collectives: waiting for its peers and moving the data. A
  // subgroup's time is added to its parent's too (parent_comm_s, shared so that either may end
  // first), so that the world's comm_seconds covers the mesh.
  std::shared_ptr<double> comm_s = std::make_shared<double>(0.0);
  std::shared_ptr<double> parent_comm_s;
  void add_comm(double seconds) {
    *comm_s += seconds;
    if (parent_comm_s) *parent_comm_s += seconds;
  }

  // NCCL's wait() returns once the work is queued on the device: a CUDA group synchronises the
  // device before a collective starts (so that earlier compute is not counted) and after it ends,
  // so that comm_s is the collective's own time. On Gloo wait() blocks until the data is there.
  void sync() const {
    if (device_only) torch::cuda::synchronize(device.index());
  }

  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      work->wait(timeout);
      sync();
      add_comm(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    } catch (const std::exception& e) {
      throw Error{ExitCode::kFailure,
                  "rank " + std::to_string(rank) + ": " + what + " failed: " + e.what(),
                  "another rank probably died or stalled; check its log"};
    }
  }

  void allreduce(torch::Tensor& t, c10d::ReduceOp::RedOpType op, const char* what) {
    std::vector<at::Tensor> v{staged(t)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp(op);
    opts.timeout = timeout;
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    auto work = pg->allreduce(v, opts);
    add_comm(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());  // Gloo may run it here
    wait(work, what);
    if (!v[0].is_same(t)) t.copy_(v[0]);
  }
};

DistributedOptions Distributed::options_from_env() {
  DistributedOptions o;
  o.world_size = static_cast<int>(env_int("WORLD_SIZE", 1, 1, std::numeric_limits<int>::max()));
  o.rank = static_cast<int>(env_int("RANK", 0, 0, o.world_size - 1));
  o.local_rank = static_cast<int>(env_int("LOCAL_RANK", 0, 0, std::numeric_limits<int>::max()));
  o.master_addr = env_or("MASTER_ADDR", o.master_addr);
  o.master_port = static_cast<int>(env_int("MASTER_PORT", o.master_port, 1, kMaxPort));
  o.store_is_external = env_or("VERL_STORE_IS_EXTERNAL", "0") == "1";
  o.timeout = std::chrono::seconds(
      env_int("VERL_DIST_TIMEOUT_S", kDefaultTimeoutSeconds, 1, 7 * 24 * 3600));
  if (o.world_size > 1 && (!env_set("MASTER_ADDR") || !env_set("MASTER_PORT"))) {
    throw Error{ExitCode::kInvalidConfig,
                "WORLD_SIZE=" + std::to_string(o.world_size) +
                    " but MASTER_ADDR or MASTER_PORT is not set",
                "set MASTER_ADDR and MASTER_PORT to the store rank 0 (or the head) listens on"};
  }
  return o;
}

Distributed::Distributed(const torch::Device& device) : Distributed(options_from_env(), device) {}

Distributed::Distributed(const DistributedOptions& options, const torch::Device& device)
    : options_(options) {
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    throw Error{ExitCode::kInvalidConfig,
                "rank " + std::to_string(options_.rank) + " is outside world size " +
                    std::to_string(options_.world_size)};
  }
  if (options_.world_size == 1) return;

  impl_ = std::make_unique<Impl>();
  impl_->timeout = options_.timeout;
  impl_->rank = options_.rank;
  impl_->device = device;
  const bool host = options_.rank == 0 && !options_.store_is_external;
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(options_.master_port);
  so.isServer = host;
  so.numWorkers = options_.world_size;
  so.waitWorkers = false;  // peers are awaited by the process group below, with our error
  so.timeout = options_.timeout;
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(options_.master_addr, so);
    impl_->store = c10::make_intrusive<c10d::PrefixStore>(options_.store_prefix, tcp);
  } catch (const std::exception& e) {
    if (host) {
      throw Error{ExitCode::kUnreachable,
                  "rank 0 could not host the store at " + where(options_) + ": " + e.what(),
                  "is the port in use (another run)? pick a free MASTER_PORT"};
    }
    throw Error{ExitCode::kUnreachable,
                "rank " + std::to_string(options_.rank) + " could not reach the store at " +
                    where(options_) + " within " + seconds(options_.timeout) + "; " +
                    (options_.store_is_external ? "is the head running?" : "is rank 0 running?"),
                std::string("underlying error: ") + e.what()};
  }

  const auto joining_since = std::chrono::steady_clock::now();
  try {
    if (device.is_cuda()) {
#ifdef USE_C10D_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = options_.timeout;
      impl_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, options_.rank,
                                                              options_.world_size, opts);
      impl_->device_only = true;
      backend_name_ = "nccl";
#elif defined(VERL_HAVE_GLOO)
      log::Warn() << "this torch has no NCCL: gradients of CUDA tensors go through Gloo (slow)";
#endif
    }
    if (!impl_->pg) {
#ifdef VERL_HAVE_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create(options_.timeout);
      const std::string ifname = env_or("GLOO_SOCKET_IFNAME", "");
      if (!ifname.empty()) {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      } else if (is_loopback(options_.master_addr)) {
        // All ranks on this host: loopback avoids depending on the hostname resolving.
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      opts->threads = 2;
      impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, options_.rank,
                                                              options_.world_size, opts);
      backend_name_ = "gloo";
#else
      throw Error{ExitCode::kNotCompiledIn,
                  std::string("rank ") + std::to_string(options_.rank) +
                      ": no process group for device " + device.str() +
                      ": this build has no Gloo (its libtorch ships no gloo headers)" +
#ifdef USE_C10D_NCCL
                      "",
#else
                      " and no NCCL",
#endif
                  "run CPU ranks with a build against Debian's libtorch, or GPU ranks with NCCL"};
#endif
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // An error well before the timeout is not a missing rank: say what it was.
    const auto took = std::chrono::steady_clock::now() - joining_since;
    if (took < options_.timeout * 9 / 10) {
      const std::string what = e.what();
      throw Error{ExitCode::kFailure,
                  "rank " + std::to_string(options_.rank) + " of " + std::to_string(options_.world_size) +
                      ": joining the process group at " + where(options_) + " failed after " +
                      seconds(std::chrono::duration_cast<std::chrono::milliseconds>(took)) + ": " +
                      what.substr(0, what.find('\n')),
                  "a peer that is not one of this job's ranks (a port shared with another run), or a rank that "
                  "ended: check every rank's log, and that MASTER_PORT is this job's alone"};
    }
    throw Error{ExitCode::kTimedOut,
                "rank " + std::to_string(options_.rank) + " of " +
                    std::to_string(options_.world_size) +
                    ": not all ranks joined the process group at " + where(options_) +
                    " within " + seconds(options_.timeout),
                std::string("start every rank with the same WORLD_SIZE/MASTER_ADDR/MASTER_PORT; "
                            "underlying error: ") +
                    e.what()};
  }
  log::Debug() << "rank " << options_.rank << "/" << options_.world_size << " joined "
               << backend_name_ << " group at " << where(options_);
}

Distributed::~Distributed() = default;

std::unique_ptr<Distributed> Distributed::subgroup(const std::vector<int>& ranks, const std::string& name,
                                                   const std::optional<torch::Device>& device) const {
  std::string key = options_.store_prefix + "/" + name;
  int mine = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= world_size() || std::count(ranks.begin(), ranks.end(), r) != 1) {
      throw Error{ExitCode::kInvalidConfig,
                  "process group '" + name + "': rank " + std::to_string(r) + " is outside world size " +
                      std::to_string(world_size()) + " or listed twice",
                  "a group's ranks are distinct global ranks"};
    }
    if (r == rank()) mine = static_cast<int>(i);
    key += (i == 0 ? ":" : ",") + std::to_string(r);
  }
  if (mine < 0) return nullptr;
  // The n-th group of these ranks and name meets under its own prefix: the keys an earlier one
  // left in the store (its rendezvous) must not be read by a later one.
  const int n = subgroup_calls_[key]++;
  if (n > 0) key += "#" + std::to_string(n);
  DistributedOptions o = options_;
  o.rank = mine;
  o.world_size = static_cast<int>(ranks.size());
  o.store_is_external = true;  // the world's store is up: every member is its client
  o.store_prefix = key;
  auto group = std::make_unique<Distributed>(o, device ? *device : impl_ ? impl_->device : torch::Device(torch::kCPU));
  if (group->impl_ && impl_) group->impl_->parent_comm_s = impl_->comm_s;
  return group;
}

void Distributed::all_reduce_gradients(const std::vector<torch::Tensor>& params,
                                       std::size_t bucket_bytes) {
  if (!is_distributed()) return;
  torch::NoGradGuard no_grad;
  // Buckets hold gradients of one dtype and device, in parameter order (the same on every rank).
  std::vector<torch::Tensor> pending;
  std::size_t pending_bytes = 0;
  auto flush = [&] {
    if (pending.empty()) return;
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(pending.size());
    for (auto& g : pending) flat_parts.push_back(g.reshape({-1}));
    auto flat = torch::cat(flat_parts);
    impl_->allreduce(flat, c10d::ReduceOp::SUM, "gradient all-reduce");
    flat.div_(static_cast<double>(world_size()));
    int64_t offset = 0;
    for (auto& g : pending) {
      const int64_t n = g.numel();
      g.copy_(flat.narrow(0, offset, n).view_as(g));
      offset += n;
    }
    pending.clear();
    pending_bytes = 0;
  };
  for (const auto& p : params) {
    auto g = p.grad();
    if (!g.defined()) continue;
    if (!pending.empty() &&
        (pending.front().scalar_type() != g.scalar_type() ||
         pending.front().device() != g.device())) {
      flush();
    }
    pending.push_back(g);
    pending_bytes += g.numel() * g.element_size();
    if (pending_bytes >= bucket_bytes) flush();
  }
  flush();
}

void Distributed::all_reduce_metrics(std::map<std::string, double>& metrics) {
  if (!is_distributed()) return;
  // 1) same keys everywhere? max and min of (count, hash) agree iff all ranks agree.
  const int64_t count = static_cast<int64_t>(metrics.size());
  const int64_t hash = keys_hash(metrics);
  auto hi = torch::tensor({count, hash}, torch::kInt64);
  auto lo = torch::tensor({-count, -hash}, torch::kInt64);
  impl_->allreduce(hi, c10d::ReduceOp::MAX, "metric key check");
  impl_->allreduce(lo, c10d::ReduceOp::MAX, "metric key check");
  if (hi[0].item<int64_t>() != -lo[0].item<int64_t>() ||
      hi[1].item<int64_t>() != -lo[1].item<int64_t>()) {
    std::string keys;
    for (const auto& [k, v] : metrics) keys += (keys.empty() ? "" : ", ") + k;
    throw Error{ExitCode::kFailure,
                "rank " + std::to_string(rank()) +
                    ": ranks hold different metric keys; this rank has " +
                    std::to_string(count) + ": " + keys,
                "every rank must record the same metrics each step"};
  }
  // 2) one all-reduce per reduction kind; max/min reduce with MAX of (x) and (-x).
  const int64_t n = count;
  auto sum = torch::zeros({n}, torch::kFloat64);
  auto mx = torch::full({n}, -std::numeric_limits<double>::infinity(), torch::kFloat64);
  auto neg_mn = torch::full({n}, -std::numeric_limits<double>::infinity(), torch::kFloat64);
  auto* ps = sum.data_ptr<double>();
  auto* pm = mx.data_ptr<double>();
  auto* pn = neg_mn.data_ptr<double>();
  int64_t i = 0;
  for (const auto& [k, v] : metrics) {
    switch (metric_reduce(k)) {
      case MetricReduce::kMean: ps[i] = v; break;
      case MetricReduce::kMax: pm[i] = v; break;
      case MetricReduce::kMin: pn[i] = -v; break;
    }
    ++i;
  }
  impl_->allreduce(sum, c10d::ReduceOp::SUM, "metric all-reduce");
  impl_->allreduce(mx, c10d::ReduceOp::MAX, "metric all-reduce");
  impl_->allreduce(neg_mn, c10d::ReduceOp::MAX, "metric all-reduce");
  i = 0;
  for (auto& [k, v] : metrics) {
    switch (metric_reduce(k)) {
      case MetricReduce::kMean: v = ps[i] / world_size(); break;
      case MetricReduce::kMax: v = pm[i]; break;
      case MetricReduce::kMin: v = -pn[i]; break;
    }
    ++i;
  }
}

void Distributed::all_reduce_sum(torch::Tensor& tensor) {
  if (!is_distributed()) return;
  impl_->allreduce(tensor, c10d::ReduceOp::SUM, "all-reduce");
}

void Distributed::broadcast_parameters(const std::vector<torch::Tensor>& params, int root) {
  if (!is_distributed()) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    if (!p.defined()) continue;
    // Broadcast into a contiguous buffer so non-contiguous parameters are handled too.
    std::vector<at::Tensor> v{impl_->staged(p.detach().contiguous())};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = options_.timeout;
    impl_->wait(impl_->pg->broadcast(v, opts), "parameter broadcast");
    if (!v[0].is_same(p)) p.detach().copy_(v[0]);
  }
}

void Distributed::all_gather_flat(torch::Tensor& full, const torch::Tensor& shard) {
  TORCH_CHECK(full.dim() == 1 && shard.dim() == 1 && full.numel() == shard.numel() * world_size() &&
                  full.is_contiguous() && shard.is_contiguous(),
              "all_gather_flat: full [world * n] and shard [n], contiguous and 1-D");
  if (!is_distributed()) {
    full.copy_(shard);
    return;
  }
  torch::NoGradGuard no_grad;
  c10d::AllgatherOptions opts;
  opts.timeout = options_.timeout;
  impl_->sync();
  if (impl_->device_only) {
    at::Tensor out = full, in = shard;
    impl_->wait(impl_->pg->_allgather_base(out, in, opts), "parameter all-gather");
    return;
  }
  std::vector<at::Tensor> in{shard};
  std::vector<std::vector<at::Tensor>> out(1);
  const int64_t n = shard.numel();
  for (int r = 0; r < world_size(); ++r) out[0].push_back(full.narrow(0, r * n, n));
  impl_->wait(impl_->pg->allgather(out, in, opts), "parameter all-gather");
}

void Distributed::reduce_scatter_sum(torch::Tensor& shard, torch::Tensor& full) {
  TORCH_CHECK(full.dim() == 1 && shard.dim() == 1 && full.numel() == shard.numel() * world_size() &&
                  full.is_contiguous() && shard.is_contiguous(),
              "reduce_scatter_sum: full [world * n] and shard [n], contiguous and 1-D");
  const int64_t n = shard.numel();
  if (!is_distributed()) {
    shard.copy_(full);
    return;
  }
  torch::NoGradGuard no_grad;
  if (impl_->device_only) {
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
    opts.timeout = options_.timeout;
    impl_->sync();
    at::Tensor out = shard, in = full;
    impl_->wait(impl_->pg->_reduce_scatter_base(out, in, opts), "gradient reduce-scatter");
    return;
  }
  impl_->allreduce(full, c10d::ReduceOp::SUM, "gradient reduce-scatter");
  shard.copy_(full.narrow(0, rank() * n, n));
}

double Distributed::comm_seconds() const { return impl_ ? *impl_->comm_s : 0.0; }

void Distributed::barrier() {
  if (!is_distributed()) return;
  c10d::BarrierOptions opts;
  opts.timeout = options_.timeout;
  impl_->wait(impl_->pg->barrier(opts), "barrier");
}

torch::Tensor global_masked_whiten(const torch::Tensor& values, const torch::Tensor& mask,
                                   Distributed& dist, bool shift_mean) {
  if (!dist.is_distributed()) return algos::masked_whiten(values, mask, shift_mean);
  torch::NoGradGuard no_grad;
  auto m = mask.to(values.scalar_type());
  // Same arithmetic as algos::masked_whiten, with the sums taken over all ranks.
  auto stats = torch::stack({algos::masked_sum(values, m), m.sum()}).to(torch::kFloat64);
  auto stats_cpu = stats.to(torch::kCPU);
  dist.all_reduce_sum(stats_cpu);
  const double total = stats_cpu[0].item<double>();
  const double n = stats_cpu[1].item<double>();
  const double mean = total / (n + 1e-8);
  auto centered = values - mean;
  auto sq = algos::masked_sum(centered * centered, m).to(torch::kCPU, torch::kFloat64).reshape({1});
  dist.all_reduce_sum(sq);
  if (n < 2) {
    throw Error{ExitCode::kFailure,
                "global_masked_whiten: the mask selects fewer than 2 elements over all ranks"};
  }
  const double var = sq.item<double>() / (n + 1e-8) * (n / (n - 1));
  auto whitened = centered * (1.0 / std::sqrt(var + 1e-8));
  if (!shift_mean) whitened = whitened + mean;
  return whitened;
}

}  // namespace verl::trainer
