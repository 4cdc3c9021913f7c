// The head: the cluster's HTTP API (cpp-httplib), its node registry and its jobs (docs/API.md is
// the contract). Every request must carry "Authorization: Bearer <token>"; one without it, or
// with another token, is answered 401 before any handler runs.
//
//   nodes:  POST /api/nodes/register, /api/nodes/<id>/heartbeat (task reports -> orders),
//           /api/nodes/<id>/leave; GET /api/nodes, /api/cluster; POST /api/shutdown
//   jobs:   POST/GET /api/jobs, GET /api/jobs/<id>, POST /api/jobs/<id>/stop,
//           GET/POST /api/jobs/<id>/logs, /metrics; POST /api/jobs/<id>/results
//
// A sweeper thread marks nodes lost when their heartbeats stop for heartbeat_timeout, fails the
// jobs that ran on them and places waiting jobs (job_controller.h). After a shutdown request the
// head waits until no node is alive any more (each agent says it leaves) or shutdown_grace has
// passed, then wait() returns. Jobs live in the same state.db as the registry and survive a
// restart of the head; the registry does not (agents register again).
//
// Thread-safe; start() once, stop() (or the destructor) ends the server and the sweeper.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/gpu_sampler.h"
#include "launcher/job_controller.h"
#include "launcher/job_store.h"
#include "launcher/node_registry.h"
#include "launcher/wire.h"

namespace httplib {
struct Request;
struct Response;
class Server;
}  // namespace httplib

namespace verl::launcher {

int64_t now_ms();  // wall clock, milliseconds since the epoch

struct HeadOptions {
  std::string cluster_name = "local";
  std::string backend = "local";
  std::string bind_host = "127.0.0.1";
  int port = 0;                           // 0: any free port (tests); port() says which
  std::string token;                      // required, non-empty
  std::string db_path = ":memory:";
  std::vector<std::string> expected_nodes;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds sweep_interval{200};
  std::chrono::milliseconds shutdown_grace{5000};
  // A request (line, headers and body) must arrive within request_timeout of its start; one
  // still arriving after slow_request_after is slow, and half the workers at most wait for
  // slow ones (http_server.h).
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds slow_request_after{1000};
  int store_port = 6379;  // head.store_port: each job's rank 0 binds it (docs/API.md, rendezvous)
  nlohmann::ordered_json spec_env = nlohmann::ordered_json::object();  // the spec's env, for every rank
  nlohmann::ordered_json container = nullptr;  // the spec's container section (ControllerOptions)
  // The probe servers cli/cmd_head.cc runs beside the head, {tcp, time} ports, shown as
  // GET /api/cluster's probe_ports (null: none run).
  std::optional<wire::ProbePorts> probe_ports;
};

class Head {
 public:
  explicit Head(HeadOptions options);
  ~Head();
  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  // Binds and starts serving. Throws verl::Error naming host:port when it cannot bind.
  void start();
  int port() const { return port_; }
  // Blocks until a shutdown request has drained (see above) or *stop becomes true; polls *stop.
  void wait(const std::atomic<bool>* stop = nullptr);
  void stop();

  // One sweep now (the sweeper thread calls it too).
  void sweep();
  bool shutting_down() const { return shutting_down_; }
  NodeRegistry& registry() { return registry_; }
  JobStore& jobs() { return jobs_; }

 private:
  struct Server;
  void install_routes();
  void install_job_routes();
  void install_page_routes(httplib::Server& http);  // GET /metrics, /dashboard (head_pages.cc)
  std::optional<JobRecord> job_of(const httplib::Request& req, httplib::Response& res);
  nlohmann::ordered_json scaling_of(const JobRecord& job, int64_t now_ms);
  nlohmann::ordered_json nccl_of(const JobRecord& job);
  void sweeper();
  HeadOptions options_;
  NodeRegistry registry_;
  JobStore jobs_;
  std::unique_ptr<JobController> controller_;
  std::mutex samples_mu_;
  // A heartbeat's GPU samples, as numbers (a JSON object per GPU was ~4 KiB a heartbeat: 2.4 GiB
  // for 1,000 nodes x 600; issue 18). JSON again only when asked for (samples_json).
  struct GpuSamples {
    int64_t time_ms = 0;
    std::vector<GpuSample> gpus;
  };
  static nlohmann::ordered_json samples_json(const GpuSamples& s);
  std::map<std::string, std::deque<GpuSamples>> gpu_samples_;  // node name -> last 600
  // GET /api/jobs's answer, built once per JobStore::version() (the writers bump it).
  std::mutex jobs_answer_mu_;
  uint64_t jobs_answer_version_ = 0;
  std::shared_ptr<const std::string> jobs_answer_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  int64_t started_ms_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> shutdown_ms_{0};
  std::atomic<bool> drained_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread listen_thread_, sweep_thread_;
};

}  // namespace verl::launcher
