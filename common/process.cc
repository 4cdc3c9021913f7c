#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "common/error.h"

extern char** environ;

namespace verl::process {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> merged_env(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string s(*e);
    auto eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s;
  }
  for (const auto& s : extra) {
    auto eq = s.find('=');
    env[s.substr(0, eq)] = s;
  }
  std::vector<std::string> out;
  for (auto& [k, v] : env) out.push_back(v);
  return out;
}

Result decode(int status) {
  Result r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.exit_code = 128 + r.signal;
  }
  return r;
}

// Forks argv into a new process group with the given fds for 0/1/2 (-1: inherit).
// The exec error comes back through a CLOEXEC pipe so a missing program is an Error, not 127.
pid_t fork_exec(const std::vector<std::string>& argv, const Options& o, int in_fd, int out_fd, int err_fd) {
  if (argv.empty()) throw Error(ExitCode::kFailure, "process::run called with an empty argv", "this is a bug");
  std::vector<std::string> env = merged_env(o.env);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) throw Error(ExitCode::kFailure, std::string("pipe: ") + strerror(errno));
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw Error(ExitCode::kFailure, std::string("fork: ") + strerror(errno), "is the process table full?");
  if (pid == 0) {
    if (o.parent_death != Options::ParentDeath::kIgnore) {
      prctl(PR_SET_PDEATHSIG, o.parent_death == Options::ParentDeath::kKill ? SIGKILL : SIGTERM);
      if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    }
    if (o.group == Options::Group::kNewSession) setsid();
    else setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    if (in_fd >= 0) dup2(in_fd, 0);
    if (out_fd >= 0) dup2(out_fd, 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) {
      int e = errno;
      (void)!write(errpipe[1], &e, sizeof e);
      _exit(127);
    }
    execvpe(cargv[0], cargv.data(), cenv.data());
    int e = errno;
    (void)!write(errpipe[1], &e, sizeof e);
    _exit(127);
  }
  if (o.group == Options::Group::kNewGroup) setpgid(pid, pid);  // both sides: the group exists before either returns
  close(errpipe[1]);
  int child_errno = 0;
  ssize_t n = read(errpipe[0], &child_errno, sizeof child_errno);
  close(errpipe[0]);
  if (n == sizeof child_errno) {
    waitpid(pid, nullptr, 0);
    throw Error(ExitCode::kFailure,
                "cannot run '" + argv[0] + "'" + (o.cwd.empty() ? "" : " in " + o.cwd) + ": " + strerror(child_errno),
                "check that it is installed and on PATH");
  }
  return pid;
}

void kill_group(pid_t pid, int sig) {
  if (pid > 0) ::kill(-pid, sig);
}

// Waits for pid with a deadline by polling; returns the status when it ended.
std::optional<int> wait_until(pid_t pid, std::optional<Clock::time_point> deadline) {
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, deadline ? WNOHANG : 0);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (deadline && Clock::now() >= *deadline) return std::nullopt;
    if (deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

Result run(const std::vector<std::string>& argv, const Options& o) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0) throw Error(ExitCode::kFailure, "pipe failed");
  if (o.capture && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0))
    throw Error(ExitCode::kFailure, "pipe failed");
  pid_t pid;
  try {
    pid = fork_exec(argv, o, in[0], out[1], err[1]);
  } catch (...) {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
    throw;
  }
  close(in[0]);
  if (o.capture) {
    close(out[1]);
    close(err[1]);
  }
  // Feed stdin and drain stdout/stderr together so neither side can block the other.
  std::string to_write = o.stdin_data;
  size_t written = 0;
  if (to_write.empty()) {
    close(in[1]);
    in[1] = -1;
  } else {
    fcntl(in[1], F_SETFL, O_NONBLOCK);
  }
  Result result;
  const auto deadline = o.timeout ? std::optional<Clock::time_point>(Clock::now() + *o.timeout) : std::nullopt;
  bool killed = false;
  Clock::time_point kill_at{};
  while (o.capture ? (out[0] >= 0 || err[0] >= 0) : false) {
    std::vector<pollfd> fds;
    if (out[0] >= 0) fds.push_back({out[0], POLLIN, 0});
    if (err[0] >= 0) fds.push_back({err[0], POLLIN, 0});
    if (in[1] >= 0) fds.push_back({in[1], POLLOUT, 0});
    int wait_ms = 100;
    poll(fds.data(), fds.size(), wait_ms);
    for (const auto& p : fds) {
      if (p.fd == in[1] && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t n = write(in[1], to_write.data() + written, to_write.size() - written);
        if (n > 0) written += n;
        if (n < 0 && errno != EAGAIN) written = to_write.size();
        if (written >= to_write.size()) {
          close(in[1]);
          in[1] = -1;
        }
        continue;
      }
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = read(p.fd, buf, sizeof buf);
      std::string& sink = (p.fd == out[0]) ? result.out : result.err;
      if (n > 0) {
        sink.append(buf, n);
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        int& fd = (p.fd == out[0]) ? out[0] : err[0];
        close(fd);
        fd = -1;
      }
    }
    if (deadline && !killed && Clock::now() >= *deadline) {
      kill_group(pid, SIGTERM);
      killed = true;
      kill_at = Clock::now() + o.grace;
    }
    if (killed && Clock::now() >= kill_at) kill_group(pid, SIGKILL);
  }
  if (in[1] >= 0) close(in[1]);
  std::optional<int> status;
  if (deadline && !killed) {
    status = wait_until(pid, *deadline);
    if (!status) {
      kill_group(pid, SIGTERM);
      killed = true;
      status = wait_until(pid, Clock::now() + o.grace);
    }
  } else if (killed) {
    status = wait_until(pid, kill_at);
  }
  if (!status) {
    kill_group(pid, SIGKILL);
    status = wait_until(pid, std::nullopt);
  }
  Result r = decode(status.value_or(0));
  result.exit_code = r.exit_code;
  result.signal = r.signal;
  result.timed_out = killed;
  kill_group(pid, SIGKILL);  // whatever of the group is left (a backgrounded grandchild)
  return result;
}

Child Child::spawn(const std::vector<std::string>& argv, const Options& o, const std::string& stdout_path,
                   const std::string& stderr_path) {
  auto open_log = [](const std::string& path) {
    if (path.empty()) return -1;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(ExitCode::kFailure, "cannot open log " + path + ": " + strerror(errno), "check the directory");
    return fd;
  };
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out_fd = open_log(stdout_path);
  int err_fd = stderr_path == stdout_path ? out_fd : open_log(stderr_path);
  Child c;
  try {
    c.pid_ = fork_exec(argv, o, devnull, out_fd, err_fd);
  } catch (...) {
    for (int fd : {devnull, out_fd, err_fd})
      if (fd >= 0) close(fd);
    throw;
  }
  close(devnull);
  if (out_fd >= 0) close(out_fd);
  if (err_fd >= 0 && err_fd != out_fd) close(err_fd);
  return c;
}

Child::Child(Child&& other) noexcept : pid_(other.pid_), done_(std::move(other.done_)) { other.pid_ = -1; }

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !done_) stop();
    pid_ = other.pid_;
    done_ = std::move(other.done_);
    other.pid_ = -1;
  }
  return *this;
}

Child::~Child() {
  if (pid_ > 0 && !done_) stop();
}

bool Child::running() { return pid_ > 0 && !done_ && !wait(std::chrono::milliseconds(0)); }

std::optional<Result> Child::wait(std::optional<std::chrono::milliseconds> timeout) {
  if (done_) return done_;
  if (pid_ <= 0) return std::nullopt;
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + *timeout;
  auto status = wait_until(pid_, deadline);
  if (!status) return std::nullopt;
  done_ = decode(*status);
  kill_group(pid_, SIGKILL);  // the leader is gone; take what it left in its group too
  return done_;
}

EscalatingStop::Step EscalatingStop::poll(Clock::time_point now) {
  switch (sent_) {
    case Sent::kNothing:
      sent_ = Sent::kTerm;
      due_ = now + grace_;
      return Step::kTerm;
    case Sent::kTerm:
      if (now < due_) return Step::kWait;
      sent_ = Sent::kKill;
      if (kill_wait_) due_ = now + *kill_wait_;
      return Step::kKill;
    case Sent::kKill:
      if (!kill_wait_ || now < due_) return Step::kWait;
      sent_ = Sent::kGaveUp;
      return Step::kStillThere;
    case Sent::kGaveUp:
      break;
  }
  return Step::kStillThere;
}

std::optional<std::chrono::milliseconds> EscalatingStop::wait_left(Clock::time_point now) const {
  if (sent_ == Sent::kNothing || sent_ == Sent::kGaveUp) return std::chrono::milliseconds(0);
  if (sent_ == Sent::kKill && !kill_wait_) return std::nullopt;
  return std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(due_ - now));
}

bool stop_escalating(const std::function<void(int sig)>& signal,
                     const std::function<bool(std::optional<std::chrono::milliseconds> timeout)>& gone,
                     std::chrono::milliseconds grace, std::optional<std::chrono::milliseconds> kill_wait) {
  EscalatingStop stop(grace, kill_wait);
  for (;;) {
    switch (stop.poll(EscalatingStop::Clock::now())) {
      case EscalatingStop::Step::kTerm: signal(SIGTERM); break;
      case EscalatingStop::Step::kKill: signal(SIGKILL); break;
      case EscalatingStop::Step::kWait: break;
      case EscalatingStop::Step::kStillThere: return false;
    }
    if (gone(stop.wait_left(EscalatingStop::Clock::now()))) return true;
  }
}

Result Child::stop(std::chrono::milliseconds grace) {
  if (done_) return *done_;
  const pid_t pid = pid_;
  stop_escalating([pid](int sig) { kill_group(pid, sig); },
                  [this](std::optional<std::chrono::milliseconds> t) { return wait(t).has_value(); }, grace, std::nullopt);
  return done_.value_or(Result{});
}

void Child::signal(int sig) {
  if (pid_ > 0 && !done_) kill_group(pid_, sig);
}

pid_t Child::release() {
  const pid_t pid = pid_;
  pid_ = -1;
  return pid;
}

std::string quote(const std::string& arg) {
  if (arg.empty()) return "''";
  bool safe = true;
  for (char c : arg)
    if (!(isalnum(static_cast<unsigned char>(c)) || std::strchr("@%+=:,./-_", c))) safe = false;
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string quote_argv(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + quote(a);
  return out;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string path(buf, n);
  // Replaced while it runs: the kernel names the old file "<path> (deleted)". Two nodes of one
  // machine (or of one shared home) that `up` copies verlctl to in parallel each rename a copy
  // over the other's, and an upgrade does the same; the file now at <path> is the one to run.
  static const std::string kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    const std::string now = path.substr(0, path.size() - kDeleted.size());
    if (::access(now.c_str(), X_OK) == 0) return now;
  }
  return path;
}

}  // namespace verl::process
