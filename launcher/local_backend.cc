// The local backend: the head and every agent are processes on this machine, started through
// the process module in their own sessions (setsid), so that they outlive `verlctl up` and a
// closed terminal.
#include <cstdio>
#include <map>

#include "common/error.h"
#include "common/log.h"
#include "common/process.h"
#include "launcher/backend.h"
#include "launcher/resources.h"

namespace verl::launcher {
namespace {

class LocalBackend : public OneAtATimeBackend {
 public:
  LocalBackend(ClusterSpec spec, std::string dir, std::string exe)
      : spec_(std::move(spec)), paths_(std::move(dir)), exe_(std::move(exe)) {}

  std::string name() const override { return "local"; }

  LaunchSpec head_spec() const override {
    LaunchSpec s;
    s.role = ProcessRole::kHead;
    s.host = "localhost";
    s.argv = {exe_, "head", "--state-dir", paths_.dir, "--log-level", daemon_log_level()};
    s.log = paths_.head_log();
    return s;
  }

  size_t agent_count() const override { return spec_.nodes.size(); }

  LaunchSpec agent_spec(size_t index) const override {
    LaunchSpec s;
    s.role = ProcessRole::kAgent;
    s.node = node_names(spec_).at(index);
    s.host = "localhost";
    s.argv = agent_command(spec_, paths_, exe_, index).argv();
    s.log = paths_.agent_log(index);
    s.work_dir = paths_.dir;  // the token file's directory
    return s;
  }

  // Every node is this machine: what it has is read here.
  KnownHost known_host(size_t index) const override {
    (void)index;
    const Resources r = detect_resources();
    KnownHost k;
    k.host.gpus = r.gpus > 0;
    k.host.infiniband = !r.ib_ports.empty();
    return k;
  }

  // Every local node is this machine: a declaration of GPUs it lacks fails before anything starts.
  void check_spec() const override {
    std::optional<Resources> here;
    const auto names = node_names(spec_);
    for (size_t i = 0; i < spec_.nodes.size(); ++i) {
      const DeclaredResources& d = spec_.nodes[i].resources;
      if (!d.any()) continue;
      if (!here) here = detect_resources();
      declare(*here, d, names.at(i) + " (nodes[" + std::to_string(i) + "].resources)");
    }
  }

  ProcessRecord start(const LaunchSpec& spec) override {
    process::Options o;
    o.env = spec.env;
    o.group = process::Options::Group::kNewSession;
    auto child = process::Child::spawn(spec.argv, o, spec.log, spec.log);
    ProcessRecord p;
    p.role = spec.role;
    p.node = spec.node;
    p.host = spec.host;
    p.pid = child.pid();
    p.log = spec.log;
    // The child is ours and unreaped, so its /proc entry is there; read the identity right away.
    p.start_ticks = process_start_ticks(p.pid).value_or(0);
    children_.emplace(p.pid, std::move(child));
    return p;
  }

  void detach() override {
    for (auto& [pid, child] : children_) child.release();
    children_.clear();
  }

 private:
  std::optional<std::string> ended_one(const ProcessRecord& p) override {
    auto it = children_.find(p.pid);
    if (it == children_.end()) {
      if (is_same_process(p)) return std::nullopt;
      return std::string("is gone");
    }
    auto r = it->second.wait(std::chrono::milliseconds(0));
    if (!r) return std::nullopt;
    if (r->signal) return "was killed by signal " + std::to_string(r->signal);
    return "exited with code " + std::to_string(r->exit_code);
  }

  bool stop_one(const ProcessRecord& p, std::chrono::milliseconds grace) override {
    auto it = children_.find(p.pid);
    if (it != children_.end()) {
      it->second.stop(grace);
      children_.erase(it);
      return true;
    }
    return stop_recorded(p, grace);
  }

  ClusterSpec spec_;
  StatePaths paths_;
  std::string exe_;
  std::map<pid_t, process::Child> children_;
};

}  // namespace

std::unique_ptr<Backend> make_local_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe) {
  return std::make_unique<LocalBackend>(spec, state_dir, exe);
}

}  // namespace verl::launcher
