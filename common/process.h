// The one process module: every child process verlctl starts goes through here. Commands are
// argv vectors, never shell strings built by concatenation; the one place that does build a
// shell string (a command for a remote shell) is quote_argv(), which quotes every argument.
//
// Children start in their own process group so that a timeout or stop() reaches the whole
// tree (a trainer's workers, an ssh's remote shell) and leaves no orphans. A Child is owned by
// one thread; run() is thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace verl::process {

struct Options {
  std::vector<std::string> env;     // NAME=value entries added to (or replacing in) our environ
  std::string cwd;                  // empty: ours
  std::string stdin_data;           // written to the child's stdin, which is then closed
  std::optional<std::chrono::milliseconds> timeout;  // run(): kill the group when exceeded
  std::chrono::milliseconds grace{2000};             // SIGTERM -> SIGKILL wait on timeout/stop
  bool capture = true;              // false: the child inherits our stdout/stderr
  // kNewSession: setsid() instead of setpgid(), for a daemon that must outlive our terminal and
  // session (SIGHUP on logout); it still leads its own process group, so stop() works the same.
  enum class Group { kNewGroup, kNewSession } group = Group::kNewGroup;
  // The child gets SIGKILL (kKill) when the thread that spawned it dies (PR_SET_PDEATHSIG), so
  // that an agent killed with -9 leaves no trainer rank running on. kTerm sends SIGTERM instead,
  // for a client that passes signals on to what it runs elsewhere and could not pass SIGKILL
  // (a docker/podman client proxies SIGTERM into its container). Spawn from a long-lived thread.
  enum class ParentDeath { kIgnore, kKill, kTerm } parent_death = ParentDeath::kIgnore;
};

struct Result {
  int exit_code = -1;   // the exit status, or 128+signal when killed by a signal
  int signal = 0;       // the signal that ended it, 0 if it exited
  bool timed_out = false;
  std::string out, err;
};

// Runs argv to completion. Throws verl::Error when argv[0] cannot be executed (naming it).
Result run(const std::vector<std::string>& argv, const Options& options = {});

// A running child in its own process group.
class Child {
 public:
  // Starts argv; output is inherited unless stdout_path/stderr_path name files to append to.
  static Child spawn(const std::vector<std::string>& argv, const Options& options = {},
                     const std::string& stdout_path = {}, const std::string& stderr_path = {});
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  ~Child();  // stops the group if still running: a Child never outlives its owner silently

  pid_t pid() const { return pid_; }
  bool running();
  // Waits up to timeout (forever when absent); nullopt when still running afterwards.
  std::optional<Result> wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // SIGTERM to the group, then SIGKILL after grace (stop_escalating, waiting for the SIGKILL's
  // end as long as it takes); returns how it ended.
  Result stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  // Sends sig to the child's process group: a stop that does not block sends EscalatingStop's
  // steps with it (the agent's tasks). Nothing once it has been reaped.
  void signal(int sig);
  // Gives the child up: it runs on (a daemon), is neither stopped nor reaped by this Child, and
  // its pid is returned. Whoever signals it later must check it is still the same process.
  pid_t release();

 private:
  Child() = default;
  pid_t pid_ = -1;
  std::optional<Result> done_;
};

// How long a stop waits for a process to go after SIGKILL before it says the process is still
// there (stop_escalating's kill_wait for a process that is not our child).
inline constexpr std::chrono::milliseconds kStopKillWait{2000};

// The stop protocol, the one definition of its steps: SIGTERM, up to grace for the process to
// go, then SIGKILL and up to kill_wait (forever when nullopt) for it to go; after that it is still
// there. A stop is polled with the time now (injected: tests need no sleeps) while the process is
// not gone, and each poll says what to do. A caller that must not block (the agent's poll loop)
// polls it on its own ticks; stop_escalating() below is the blocking form, written in terms of it.
class EscalatingStop {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Step {
    kTerm,        // the first poll: send SIGTERM
    kKill,        // once the grace has passed since the SIGTERM: send SIGKILL
    kWait,        // nothing to send now: wait (wait_left()) for the process to go
    kStillThere,  // kill_wait has passed since the SIGKILL: the process is still there (every poll from now on)
  };
  EscalatingStop(std::chrono::milliseconds grace, std::optional<std::chrono::milliseconds> kill_wait)
      : grace_(grace), kill_wait_(kill_wait) {}
  // What to do at now, the process not yet gone.
  Step poll(Clock::time_point now);
  // How long from now until a poll can return something other than kWait: zero when one can
  // now, nullopt when none ever will (waiting forever for the SIGKILL's end).
  std::optional<std::chrono::milliseconds> wait_left(Clock::time_point now) const;
  std::chrono::milliseconds grace() const { return grace_; }

 private:
  enum class Sent { kNothing, kTerm, kKill, kGaveUp } sent_ = Sent::kNothing;
  std::chrono::milliseconds grace_;
  std::optional<std::chrono::milliseconds> kill_wait_;
  Clock::time_point due_{};  // when the next step is due (after kTerm; after kKill with a kill_wait)
};

// The stop protocol, blocking: EscalatingStop's steps, signal(sig) sending sig (to a group, to a
// pid: the caller's choice), gone(timeout) waiting up to timeout (forever when nullopt) and saying
// whether the process is gone. true: it is gone. The protocol's users: Child::stop (its own
// child, reaped by waitpid; kill_wait forever), launcher::stop_recorded (a recorded pid that must
// still have its recorded start time; kill_wait kStopKillWait), the agent's stop of a task
// (launcher/agent.cc: EscalatingStop polled on its ticks, a container task's container killed at
// the SIGKILL step; kill_wait forever), and as a shell program templates/ssh/stop.sh (the same
// steps on a remote node; it says so).
bool stop_escalating(const std::function<void(int sig)>& signal,
                     const std::function<bool(std::optional<std::chrono::milliseconds> timeout)>& gone,
                     std::chrono::milliseconds grace, std::optional<std::chrono::milliseconds> kill_wait);

// Quotes one argument for a POSIX shell: abc -> abc, a b -> 'a b', it's -> 'it'\''s'.
std::string quote(const std::string& arg);
// Joins argv into one shell command line, every argument quoted.
std::string quote_argv(const std::vector<std::string>& argv);

// Absolute path of the running executable (/proc/self/exe); when that file was replaced while it
// runs, the path of the file now in its place.
std::string self_exe();

}  // namespace verl::process
