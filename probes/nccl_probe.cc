// nccl_intra and nccl_inter: all_reduce, all_gather and reduce_scatter swept over sizes, busbw
// judged at the largest size against probes.min_busbw_gbps, the whole sweep in the row's data.
// The formulas and the data check are nccl_probe.h's.
#include "probes/nccl_probe.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/strings.h"
#include "probes/gpu_bench.h"
#include "probes/gpu_probe.h"
#include "probes/net.h"
#include "probes/probes.h"

namespace verl::probes {

namespace {

double all_reduce_factor(int n) { return n > 0 ? 2.0 * (n - 1) / n : 0; }
double gather_scatter_factor(int n) { return n > 0 ? static_cast<double>(n - 1) / n : 0; }

}  // namespace

const std::vector<CollectiveDesc>& collectives() {
  static const std::vector<CollectiveDesc> all = {
      {Collective::kAllReduce, "all_reduce", "2(n-1)/n", all_reduce_factor},
      {Collective::kAllGather, "all_gather", "(n-1)/n", gather_scatter_factor},
      {Collective::kReduceScatter, "reduce_scatter", "(n-1)/n", gather_scatter_factor},
  };
  return all;
}

const CollectiveDesc& collective(Collective op) {
  for (const auto& c : collectives())
    if (c.op == op) return c;
  return collectives().front();
}

std::vector<uint64_t> nccl_default_sizes() {
  std::vector<uint64_t> out;
  for (uint64_t b = 8; b <= (1ull << 30); b *= 8) out.push_back(b);
  return out;
}

uint64_t parse_bytes(const std::string& text) {
  size_t end = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string suffix = text.substr(end);
  for (auto& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (suffix.size() > 1 && suffix.back() == 'B') suffix.pop_back();
  if (suffix.size() > 1 && suffix.back() == 'I') suffix.pop_back();
  const std::map<std::string, uint64_t> mult = {{"", 1}, {"B", 1}, {"K", 1ull << 10}, {"M", 1ull << 20},
                                                {"G", 1ull << 30}};
  const auto it = mult.find(suffix);
  if (end == 0 || it == mult.end() || v == 0)
    throw Error(ExitCode::kUsage, "'" + text + "' is not a size", "write a positive number with K, M or G: 8, 64K, 1G");
  return static_cast<uint64_t>(v) * it->second;
}

std::vector<uint64_t> parse_size_sweep(const std::string& text) {
  std::vector<uint64_t> out;
  if (text.find(':') != std::string::npos) {
    std::vector<std::string> parts;
    size_t from = 0;
    for (size_t c; (c = text.find(':', from)) != std::string::npos; from = c + 1) parts.push_back(text.substr(from, c - from));
    parts.push_back(text.substr(from));
    if (parts.size() < 2 || parts.size() > 3)
      throw Error(ExitCode::kUsage, "'" + text + "' is not a size sweep", "write MIN:MAX[:FACTOR], e.g. 8:1G:2");
    const uint64_t lo = parse_bytes(parts[0]), hi = parse_bytes(parts[1]);
    const uint64_t factor = parts.size() == 3 ? parse_bytes(parts[2]) : 2;
    if (factor < 2 || lo > hi)
      throw Error(ExitCode::kUsage, "'" + text + "': the sweep needs MIN <= MAX and a FACTOR of 2 or more",
                  "e.g. 8:1G:2");
    for (uint64_t b = lo; b <= hi; b *= factor) {
      out.push_back(b);
      if (b > hi / factor) break;
    }
    return out;
  }
  size_t from = 0;
  for (size_t c; (c = text.find(',', from)) != std::string::npos; from = c + 1) out.push_back(parse_bytes(text.substr(from, c - from)));
  out.push_back(parse_bytes(text.substr(from)));
  // Ascending and once each: the report judges the largest, the last.
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

float nccl_fill(int rank, uint64_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 5 + 1)); }

float nccl_expected(Collective op, int n, int rank, uint64_t count, uint64_t i) {
  const float ranks_sum = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  switch (op) {
    case Collective::kAllReduce: return ranks_sum * static_cast<float>(i % 5 + 1);
    case Collective::kAllGather: return nccl_fill(static_cast<int>(i / count), i % count);
    case Collective::kReduceScatter:
      return ranks_sum * static_cast<float>((static_cast<uint64_t>(rank) * count + i) % 5 + 1);
  }
  return 0;
}

uint64_t nccl_count(Collective op, uint64_t bytes, int n) {
  return op == Collective::kAllReduce ? bytes / sizeof(float) : bytes / sizeof(float) / static_cast<uint64_t>(n);
}

uint64_t nccl_bytes(Collective op, uint64_t count, int n) {
  return op == Collective::kAllReduce ? count * sizeof(float) : count * sizeof(float) * static_cast<uint64_t>(n);
}

double algbw_gbps(uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }

double busbw_gbps(Collective op, uint64_t bytes, double seconds, int n) {
  return algbw_gbps(bytes, seconds) * collective(op).bus_factor(n);
}

// --- rendezvous ---------------------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

void send_u64(int fd, uint64_t v) {
  v = to_wire(v);
  send_all(fd, &v, sizeof v);
}
uint64_t recv_u64(int fd) {
  uint64_t v = 0;
  recv_all(fd, &v, sizeof v);
  return from_wire(v);
}
void send_str(int fd, const std::string& s) {
  send_u64(fd, s.size());
  send_all(fd, s.data(), s.size());
}
std::string recv_str(int fd) {
  const uint64_t n = recv_u64(fd);
  if (n > (1u << 16)) throw Error(ExitCode::kFailure, "rendezvous: a peer sent a " + std::to_string(n) + "-byte string");
  std::string s(n, '\0');
  recv_all(fd, s.data(), n);
  return s;
}

constexpr uint64_t kMagic = 0x76726c6e63636c32ull;  // "vrlnccl2": not some other service on the port

// A rank sends its hello as soon as it is connected: a connection that says nothing this long
// (the ports probe's connect-and-close, a port scanner) is dropped, not waited for.
constexpr std::chrono::milliseconds kHelloTimeout{3000};

struct Hello {
  RendezvousMember member;
  bool ready = false;
  std::string why;
};

void send_member(int fd, const RendezvousMember& m) {
  send_u64(fd, static_cast<uint64_t>(m.rank));
  send_u64(fd, static_cast<uint64_t>(m.gpus));
  send_str(fd, m.node);
  send_str(fd, m.host);
}

RendezvousMember recv_member(int fd) {
  RendezvousMember m;
  m.rank = static_cast<int>(recv_u64(fd));
  m.gpus = static_cast<int>(recv_u64(fd));
  m.node = recv_str(fd);
  m.host = recv_str(fd);
  return m;
}

void send_hello(int fd, const Hello& h) {
  send_u64(fd, kMagic);
  send_member(fd, h.member);
  send_u64(fd, h.ready ? 1 : 0);
  send_str(fd, h.why);
}

Hello recv_hello(int fd) {
  if (recv_u64(fd) != kMagic) throw Error(ExitCode::kFailure, "rendezvous: a connection that is not a verlctl probe");
  Hello h;
  h.member = recv_member(fd);
  h.ready = recv_u64(fd) != 0;
  h.why = recv_str(fd);
  return h;
}

void send_answer(int fd, const RendezvousResult& r) {
  send_u64(fd, r.go ? 1 : 0);
  send_str(fd, r.why_not);
  send_u64(fd, static_cast<uint64_t>(r.first_rank));
  send_u64(fd, static_cast<uint64_t>(r.nranks));
  send_u64(fd, static_cast<uint64_t>(r.nprocs));
  send_u64(fd, static_cast<uint64_t>(r.nnodes));
  send_u64(fd, r.members.size());
  for (const auto& m : r.members) send_member(fd, m);
  send_all(fd, r.id.internal, sizeof r.id.internal);
}

RendezvousResult recv_answer(int fd) {
  RendezvousResult r;
  r.go = recv_u64(fd) != 0;
  r.why_not = recv_str(fd);
  r.first_rank = static_cast<int>(recv_u64(fd));
  r.nranks = static_cast<int>(recv_u64(fd));
  r.nprocs = static_cast<int>(recv_u64(fd));
  r.nnodes = static_cast<int>(recv_u64(fd));
  const uint64_t n = recv_u64(fd);
  if (n > (1u << 20)) throw Error(ExitCode::kFailure, "rendezvous: rank 0 sent " + std::to_string(n) + " members");
  for (uint64_t i = 0; i < n; ++i) r.members.push_back(recv_member(fd));
  recv_all(fd, r.id.internal, sizeof r.id.internal);
  return r;
}

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

std::string who(const RendezvousMember& m) {
  return m.node == m.host || m.host.empty() ? m.node : m.node + " (" + m.host + ")";
}

}  // namespace

RendezvousResult rendezvous(const World& world, const RendezvousMember& me_in, bool ready, const std::string& why_not_ready,
                            const std::function<NcclUniqueId()>& make_id, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  RendezvousMember me = me_in;
  me.rank = world.rank;
  const Hello mine{me, ready, why_not_ready};
  const std::string port = std::to_string(world.master.port);
  if (world.rank != 0) {
    std::string why;
    for (;;) {
      auto s = try_connect(world.master, std::min(left_until(deadline), std::chrono::milliseconds(2000)), &why);
      if (s) {
        // Rank 0 answers once every rank has come: up to the whole timeout from now.
        set_io_timeout(s->fd(), std::max(left_until(deadline), std::chrono::milliseconds(1000)));
        send_hello(s->fd(), mine);
        try {
          return recv_answer(s->fd());
        } catch (const Error& e) {
          throw Error(ExitCode::kTimedOut,
                      "nccl rendezvous: rank " + std::to_string(world.rank) + " on " + who(me) +
                          " reached rank 0 at " + world.master.str() + " but got no answer (" + e.what() +
                          "): rank 0 gave up within " + format_seconds_shortest(timeout) + " or died",
                      "rank 0 waits for every rank: its nccl_inter row names the ranks that never came");
        }
      }
      if (Clock::now() >= deadline)
        throw Error(ExitCode::kTimedOut,
                    "nccl rendezvous: rank " + std::to_string(world.rank) + " on " + who(me) +
                        " could not reach rank 0 at " + world.master.str() + " within " + format_seconds_shortest(timeout) +
                        " (" + why + ")",
                    "is rank 0's probe running (its nccl_inter row says why not), and is port " + port +
                        " of MASTER_ADDR open from this node? slow nodes: a longer --rendezvous-timeout");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  Socket listener;
  try {
    listener = listen_on("0.0.0.0", world.master.port, nullptr);
  } catch (const Error& e) {
    throw Error(ExitCode::kFailure,
                "nccl rendezvous: rank 0 on " + who(me) + " cannot listen on port " + port + ": " + e.what(),
                "another process holds the port (a leftover rank 0? 'ss -ltnp sport = :" + port +
                    "' names it); free it, or pick another head.store_port");
  }
  std::map<int, Hello> hellos{{0, mine}};
  std::map<int, Socket> conns;
  while (static_cast<int>(hellos.size()) < world.size) {
    auto c = accept_within(listener, std::min(left_until(deadline), std::chrono::milliseconds(500)));
    if (!c) {
      if (Clock::now() < deadline) continue;
      std::string missing, joined;
      for (int r = 0; r < world.size; ++r)
        if (!hellos.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      for (const auto& [r, h] : hellos) joined += (joined.empty() ? "" : ", ") + std::to_string(r) + " " + who(h.member);
      throw Error(ExitCode::kTimedOut,
                  "nccl rendezvous: rank" + std::string(world.size - hellos.size() > 1 ? "s " : " ") + missing +
                      " of " + std::to_string(world.size) + " never reached rank 0 on " + who(me) + " port " + port +
                      " within " + format_seconds_shortest(timeout) + " (joined: " + joined + ")",
                  "did every node start the probe (a cluster probe: 'verlctl logs JOB --rank N')? is port " + port +
                      " open between the nodes? slow nodes: a longer --rendezvous-timeout");
    }
    set_io_timeout(c->fd(), kHelloTimeout);
    Hello h;
    try {
      h = recv_hello(c->fd());
    } catch (const Error&) {
      continue;  // a stray connection: not one of ours
    }
    if (h.member.rank <= 0 || h.member.rank >= world.size || hellos.count(h.member.rank)) continue;
    set_io_timeout(c->fd(), kIoTimeout);
    hellos[h.member.rank] = h;
    conns[h.member.rank] = std::move(*c);
  }

  RendezvousResult base;
  base.go = true;
  base.nprocs = world.size;
  std::set<std::string> hosts;
  for (const auto& [rank, h] : hellos) {
    hosts.insert(h.member.host);
    base.nranks += h.member.gpus;
    base.members.push_back(h.member);
    if (!h.ready && base.go) {
      base.go = false;
      base.why_not = "rank " + std::to_string(rank) + " on " + who(h.member) + " is not ready: " + h.why;
    }
  }
  base.nnodes = static_cast<int>(hosts.size());
  if (base.go && base.nranks > 0) base.id = make_id();
  int first = 0;
  RendezvousResult own;
  for (const auto& [rank, h] : hellos) {
    RendezvousResult r = base;
    r.first_rank = first;
    first += h.member.gpus;
    if (rank == 0) own = r;
    else send_answer(conns.at(rank).fd(), r);
  }
  return own;
}

std::string describe_rendezvous(const World& world, const RendezvousResult& r) {
  std::string names;
  for (size_t i = 0; i < r.members.size() && i < 8; ++i) names += (i ? ", " : "") + r.members[i].node;
  if (r.members.size() > 8) names += ", ... " + std::to_string(r.members.size() - 8) + " more";
  return "rank " + std::to_string(world.rank) + " of " + std::to_string(world.size) + " met rank 0 at " +
         world.master.str() + ": " + std::to_string(r.nprocs) + " processes on " + std::to_string(r.nnodes) +
         (r.nnodes == 1 ? " host, " : " hosts, ") + std::to_string(r.nranks) + " GPUs (" + names + ")";
}

Json rendezvous_json(const World& world, const RendezvousResult& r) {
  Json members = Json::array();
  for (const auto& m : r.members) members.push_back({{"rank", m.rank}, {"node", m.node}, {"host", m.host}, {"gpus", m.gpus}});
  return {{"rank", world.rank}, {"world_size", world.size}, {"master", world.master.str()}, {"hosts", r.nnodes},
          {"gpus", r.nranks}, {"members", members}};
}

// --- the sweep ----------------------------------------------------------------------------------

namespace {

// The communicators of this process, one per local GPU, destroyed together.
struct Comms {
  std::vector<Nccl::Comm> comms;
  std::vector<Stream> streams;
  int first_rank = 0;
  int nranks = 0;
  ~Comms() {
    for (auto c : comms)
      if (c) nccl().comm_destroy(c);
  }
};

const Nccl& nccl_or_throw() {
  const Nccl& n = nccl();
  if (!n.ok())
    throw Error(ExitCode::kNotCompiledIn, "NCCL is not loadable: " + n.why,
                "install NCCL (libnccl.so.2) or put it on LD_LIBRARY_PATH");
  return n;
}

// NCCL reads NCCL_ALGO once, at its first communicator in the process: set it before that.
std::string apply_algo(bool ring) {
  if (ring) ::setenv("NCCL_ALGO", "Ring", /*overwrite=*/1);
  const char* algo = std::getenv("NCCL_ALGO");
  return algo ? std::string("NCCL_ALGO=") + algo : "NCCL_ALGO unset (NCCL picks)";
}

void sync_all(const CudaRuntime& rt, const Comms& c) {
  for (size_t g = 0; g < c.streams.size(); ++g) {
    check_cuda(rt.set_device(static_cast<int>(g)), "gpu " + std::to_string(g) + ": cudaSetDevice");
    check_cuda(rt.stream_synchronize(c.streams[g].get()), "gpu " + std::to_string(g) + ": cudaStreamSynchronize");
  }
}

void launch(const Nccl& nc, const Comms& c, Collective op, const std::vector<DeviceBuffer>& send,
            const std::vector<DeviceBuffer>& recv, uint64_t count) {
  check_nccl(nc.group_start(), "ncclGroupStart");
  for (size_t g = 0; g < c.comms.size(); ++g) {
    int rc = 0;
    switch (op) {
      case Collective::kAllReduce:
        rc = nc.all_reduce(send[g].data(), recv[g].data(), count, kNcclFloat32, kNcclSum, c.comms[g], c.streams[g].get());
        break;
      case Collective::kAllGather:
        rc = nc.all_gather(send[g].data(), recv[g].data(), count, kNcclFloat32, c.comms[g], c.streams[g].get());
        break;
      case Collective::kReduceScatter:
        rc = nc.reduce_scatter(send[g].data(), recv[g].data(), count, kNcclFloat32, kNcclSum, c.comms[g],
                               c.streams[g].get());
        break;
    }
    check_nccl(rc, std::string("nccl ") + collective(op).name + " on gpu " + std::to_string(g));
  }
  check_nccl(nc.group_end(), std::string("ncclGroupEnd (") + collective(op).name + ")");
}

std::vector<SweepPoint> sweep(const Comms& c, Collective op, const std::vector<uint64_t>& sizes, int warmup,
                              int iters) {
  const CudaRuntime& rt = cuda_or_throw();
  const Nccl& nc = nccl_or_throw();
  const int n = c.nranks;
  const int local = static_cast<int>(c.comms.size());
  uint64_t max_send = 0, max_recv = 0;
  for (const uint64_t b : sizes) {
    const uint64_t count = nccl_count(op, b, n);
    const uint64_t send = op == Collective::kReduceScatter ? count * n : count;
    const uint64_t recv = op == Collective::kAllGather ? count * n : count;
    max_send = std::max(max_send, send * sizeof(float));
    max_recv = std::max(max_recv, recv * sizeof(float));
  }
  std::vector<DeviceBuffer> send, recv;
  for (int g = 0; g < local; ++g) {
    const std::string where = "gpu " + std::to_string(g);
    check_cuda(rt.set_device(g), where + ": cudaSetDevice");
    send.emplace_back(max_send, where);
    recv.emplace_back(max_recv, where);
  }
  std::vector<float> host;
  std::vector<SweepPoint> out;
  for (const uint64_t b : sizes) {
    SweepPoint p;
    p.count = nccl_count(op, b, n);
    p.bytes = nccl_bytes(op, p.count, n);
    if (p.count == 0) continue;  // too small to give every rank an element
    const uint64_t send_count = op == Collective::kReduceScatter ? p.count * n : p.count;
    const uint64_t recv_count = op == Collective::kAllGather ? p.count * n : p.count;
    for (int g = 0; g < local; ++g) {
      host.resize(send_count);
      for (uint64_t i = 0; i < send_count; ++i) host[i] = nccl_fill(c.first_rank + g, i);
      check_cuda(rt.set_device(g), "gpu " + std::to_string(g) + ": cudaSetDevice");
      check_cuda(rt.memcpy(send[g].data(), host.data(), send_count * sizeof(float), kHostToDevice),
                 "gpu " + std::to_string(g) + ": cudaMemcpy (fill)");
    }
    for (int i = 0; i < warmup; ++i) launch(nc, c, op, send, recv, p.count);
    sync_all(rt, c);
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) launch(nc, c, op, send, recv, p.count);
    sync_all(rt, c);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count() / std::max(iters, 1);
    p.time_us = seconds * 1e6;
    p.algbw = algbw_gbps(p.bytes, seconds);
    p.busbw = busbw_gbps(op, p.bytes, seconds, n);
    for (int g = 0; g < local && p.ok; ++g) {
      host.resize(recv_count);
      check_cuda(rt.set_device(g), "gpu " + std::to_string(g) + ": cudaSetDevice");
      check_cuda(rt.memcpy(host.data(), recv[g].data(), recv_count * sizeof(float), kDeviceToHost),
                 "gpu " + std::to_string(g) + ": cudaMemcpy (check)");
      const int rank = c.first_rank + g;
      for (uint64_t i = 0; i < recv_count; ++i) {
        const float want = nccl_expected(op, n, rank, p.count, i);
        if (host[i] != want) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "rank %d element %llu is %g, expected %g", rank,
                        static_cast<unsigned long long>(i), static_cast<double>(host[i]), static_cast<double>(want));
          p.ok = false;
          p.wrong = buf;
          break;
        }
      }
    }
    out.push_back(p);
  }
  return out;
}

// The rows of one scope: per collective, busbw at the largest size, the sweep as data.
// rendezvous: nccl_inter's (rendezvous_json), kept in every row's data; null for nccl_intra.
std::vector<Measurement> report(const Comms& c, const Context& ctx, const std::string& scope, const std::string& algo,
                                const Json& rendezvous = nullptr) {
  const auto& sizes = ctx.nccl_sizes.empty() ? nccl_default_sizes() : ctx.nccl_sizes;
  std::vector<Measurement> out;
  for (const auto& d : collectives()) {
    const auto points = sweep(c, d.op, sizes, ctx.nccl_warmup, ctx.nccl_iters);
    Json data = {{"scope", scope}, {"nranks", c.nranks}, {"factor", d.factor}, {"algo", algo},
                 {"sweep", Json::array()}};
    if (!rendezvous.is_null()) data["rendezvous"] = rendezvous;
    const SweepPoint* bad = nullptr;
    for (const auto& p : points) {
      data["sweep"].push_back({{"bytes", p.bytes}, {"count", p.count}, {"time_us", p.time_us},
                               {"algbw_gbps", p.algbw}, {"busbw_gbps", p.busbw}, {"ok", p.ok}});
      if (!p.ok && !bad) bad = &p;
    }
    if (points.empty()) {
      out.push_back({d.name, std::nullopt, scope + ": no size in the sweep gives each of " + std::to_string(c.nranks) +
                                               " ranks an element", Status::kSkipped, data});
      continue;
    }
    const SweepPoint& last = points.back();
    char detail[512];
    std::snprintf(detail, sizeof detail, "%s, %d ranks: busbw at %s = algbw %.1f GB/s x %s; %s; data %s",
                  scope.c_str(), c.nranks, format_bytes(last.bytes).c_str(), last.algbw, d.factor, algo.c_str(),
                  bad ? ("WRONG at " + format_bytes(bad->bytes) + ": " + bad->wrong).c_str()
                      : ("checked at " + std::to_string(points.size()) + " sizes").c_str());
    std::string text = detail;
    std::optional<Status> verdict;
    if (bad) verdict = Status::kFail;
    else if (c.nranks == 1) {
      // busbw's factor is 0 for one rank: nothing crossed a link, so no threshold can judge it.
      text += "; 1 rank: busbw is 0 by the factor, no link measured, not judged";
      verdict = Status::kPass;
    }
    out.push_back({d.name, last.busbw, text, verdict, data});
  }
  return out;
}

std::vector<Measurement> skipped_all(const std::string& why) {
  std::vector<Measurement> out;
  for (const auto& d : collectives()) out.push_back({d.name, std::nullopt, why, Status::kSkipped});
  return out;
}

std::vector<Measurement> failed_all(const std::string& why) {
  std::vector<Measurement> out;
  for (const auto& d : collectives()) out.push_back({d.name, std::nullopt, why, Status::kFail});
  return out;
}

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

Descriptor nccl_descriptor(const std::string& name, const std::string& measures) {
  Descriptor d{name, measures, {}};
  for (const auto& c : collectives()) d.metrics.push_back({c.name, "GB/s", Bound::kAtLeast, "min_busbw_gbps"});
  return d;
}

}  // namespace

Probe nccl_intra_probe() {
  Probe p;
  p.descriptor = nccl_descriptor("nccl_intra",
                                 "NCCL busbw over this node's GPUs in one process (ncclCommInitAll), sizes swept, "
                                 "data checked; the largest size judged");
  p.run = [](const Context& ctx) {
    std::vector<Measurement> skip;
    const int n = cuda_devices_or_skip(ctx, "all_reduce", &skip);
    if (n == 0) {
      auto out = skipped_all(skip.front().detail);
      for (auto& m : out) m.verdict = skip.front().verdict;
      return out;
    }
    const Nccl& nc = nccl_or_throw();
    cuda_or_throw();
    const std::string algo = apply_algo(ctx.nccl_ring);
    Comms c;
    c.nranks = n;
    c.comms.assign(static_cast<size_t>(n), nullptr);
    std::vector<int> devs(static_cast<size_t>(n));
    for (int g = 0; g < n; ++g) devs[static_cast<size_t>(g)] = g;
    check_nccl(nc.comm_init_all(c.comms.data(), n, devs.data()), "ncclCommInitAll over " + std::to_string(n) + " GPUs");
    for (int g = 0; g < n; ++g) {
      check_cuda(cudart().set_device(g), "gpu " + std::to_string(g) + ": cudaSetDevice");
      c.streams.emplace_back("gpu " + std::to_string(g));
    }
    return report(c, ctx, "intra-node (" + std::to_string(n) + " GPUs, 1 process)", algo);
  };
  return p;
}

Probe nccl_inter_probe() {
  Probe p;
  p.descriptor = nccl_descriptor("nccl_inter",
                                 "NCCL busbw over every GPU of the job's ranks, one process per node as the "
                                 "cluster probe job starts them (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; "
                                 "ncclUniqueId from rank 0 over TCP), sizes swept, data checked");
  p.run = [](const Context& ctx) {
    if (!ctx.world)
      return skipped_all("skipped: not launched as ranks (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT unset): "
                         "'verlctl probe' on a running cluster starts it on every node as ranks; by hand, start "
                         "'verlctl probe --local --only nccl_inter' on every node with the four set");
    const World& world = *ctx.world;
    std::vector<Measurement> skip;
    const int n = cuda_devices_or_skip(ctx, "all_reduce", &skip);
    // Every process joins the rendezvous, a GPU-less one too, so that no rank waits for it; one
    // that cannot take part (NCCL missing, GPUs the spec promised absent) stops them all.
    const bool has_gpus = n > 0;
    bool fine = true;
    std::string why;
    if (!has_gpus) {
      why = skip.front().detail;
      fine = skip.front().verdict == Status::kSkipped;
    } else if (!nccl().ok()) {
      fine = false;
      why = "NCCL is not loadable: " + nccl().why;
    }
    const std::string algo = has_gpus && fine ? apply_algo(ctx.nccl_ring) : "";
    const std::string host = this_host();
    const RendezvousResult r = rendezvous(
        world, RendezvousMember{world.rank, ctx.node.empty() ? host : ctx.node, host, has_gpus && fine ? n : 0}, fine,
        why,
        [] {
          NcclUniqueId id{};
          check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId");
          return id;
        },
        ctx.rendezvous_timeout);
    const std::string met = describe_rendezvous(world, r);
    const Json rv = rendezvous_json(world, r);
    auto with_rendezvous = [&](std::vector<Measurement> rows) {
      for (auto& m : rows) m.data = Json{{"scope", "rendezvous"}, {"rendezvous", rv}};
      return rows;
    };
    if (!r.go) return with_rendezvous(failed_all("nccl rendezvous: " + r.why_not + "; " + met));
    if (!has_gpus) return with_rendezvous(skipped_all(why + "; " + met));
    const Nccl& nc = nccl();
    Comms c;
    c.nranks = r.nranks;
    c.first_rank = r.first_rank;
    c.comms.assign(static_cast<size_t>(n), nullptr);
    check_nccl(nc.group_start(), "ncclGroupStart");
    for (int g = 0; g < n; ++g) {
      check_cuda(cudart().set_device(g), "gpu " + std::to_string(g) + ": cudaSetDevice");
      check_nccl(nc.comm_init_rank(&c.comms[static_cast<size_t>(g)], r.nranks, r.id, r.first_rank + g),
                 "ncclCommInitRank rank " + std::to_string(r.first_rank + g) + " of " + std::to_string(r.nranks));
    }
    check_nccl(nc.group_end(), "ncclGroupEnd (ncclCommInitRank)");
    for (int g = 0; g < n; ++g) {
      check_cuda(cudart().set_device(g), "gpu " + std::to_string(g) + ": cudaSetDevice");
      c.streams.emplace_back("gpu " + std::to_string(g));
    }
    const std::string scope = r.nnodes > 1    ? "inter-node (" + std::to_string(r.nnodes) + " hosts, " +
                                                  std::to_string(r.nprocs) + " processes)"
                              : r.nprocs > 1 ? "one host, " + std::to_string(r.nprocs) + " processes"
                                             : "one process on one host (WORLD_SIZE=1)";
    return report(c, ctx, scope, algo, rv);
  };
  return p;
}

}  // namespace verl::probes
