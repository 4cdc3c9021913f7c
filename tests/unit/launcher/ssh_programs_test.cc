// The ssh backend's remote programs (templates/ssh/, launcher/ssh_programs.h) run here, on this
// machine's /proc, against what the C++ side does with the same inputs: the start time that
// process_start_ticks() reads, and the stop protocol of stop_recorded() (process::stop_escalating).
#include "launcher/ssh_programs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/error.h"
#include "common/process.h"
#include "common/strings.h"
#include "common/template.h"
#include "launcher/cluster_state.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Runs a remote program with this machine's sh, as sshd's shell would run it.
std::string sh(const std::string& program) {
  process::Options o;
  o.timeout = 30s;
  return trim(process::run({"/bin/sh", "-c", program}, o).out);
}

// A process in its own group that we start and reap ourselves (the Child gives it up).
struct Victim {
  pid_t pid = -1;
  explicit Victim(const std::vector<std::string>& argv) {
    auto c = process::Child::spawn(argv);
    pid = c.release();
    // Wait until it runs what it was started for (the start time is set at fork already).
    usleep(100000);
  }
  ~Victim() {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ProcessRecord record(int64_t ticks_offset = 0) const {
    ProcessRecord p;
    p.pid = pid;
    p.start_ticks = process_start_ticks(pid).value_or(-1) + ticks_offset;
    return p;
  }
  bool alive() const { return process_start_ticks(pid).has_value(); }  // a zombie has ended
};

std::string shell_ticks(pid_t pid) { return sh(ssh_programs::ticks_fn() + "; t " + std::to_string(pid)); }

TEST(SshPrograms, TicksFunctionReadsWhatProcessStartTicksReads) {
  Victim v({"sleep", "30"});
  ASSERT_TRUE(process_start_ticks(v.pid));
  EXPECT_EQ(shell_ticks(v.pid), std::to_string(*process_start_ticks(v.pid)));
  EXPECT_EQ(shell_ticks(::getpid()), std::to_string(*process_start_ticks(::getpid())));
  // A command name with ") " and spaces in it: both parse after the last ") ".
  const testing::TempDir tmp("ticks");
  const fs::path dir = tmp.path();
  const fs::path odd = dir / "a) R 1 (b";
  fs::create_symlink("/bin/sleep", odd);
  {
    Victim w({odd.string(), "30"});
    ASSERT_TRUE(process_start_ticks(w.pid));
    EXPECT_EQ(shell_ticks(w.pid), std::to_string(*process_start_ticks(w.pid)));
    // Ended but not reaped (a zombie): nothing from either.
    ::kill(w.pid, SIGKILL);
    for (int i = 0; i < 200 && process_start_ticks(w.pid); ++i) usleep(10000);
    EXPECT_FALSE(process_start_ticks(w.pid));
    EXPECT_EQ(shell_ticks(w.pid), "");
  }
  EXPECT_EQ(shell_ticks(999999999), "");
}

TEST(SshPrograms, CheckSaysRunningOnlyForTheRecordedStartTime) {
  Victim v({"sleep", "30"});
  const ProcessRecord p = v.record();
  EXPECT_EQ(sh(ssh_programs::check(p.pid, p.start_ticks, "/dev/null")), "running");
  EXPECT_TRUE(is_same_process(p));
  const ProcessRecord reused = v.record(1);
  EXPECT_EQ(sh(ssh_programs::check(reused.pid, reused.start_ticks, "/dev/null")), "gone");
  EXPECT_FALSE(is_same_process(reused));
}

// The shell stop and stop_recorded() on the same kinds of process: the same answer, and the
// same effect on the process.
TEST(SshPrograms, StopAgreesWithStopRecorded) {
  struct Case {
    std::string what;
    std::vector<std::string> argv;
    int64_t ticks_offset;  // != 0: a reused pid, which must not be signalled
    bool survives;
  };
  const std::vector<Case> cases = {
      {"a plain process", {"sleep", "30"}, 0, false},
      {"one that ignores SIGTERM", {"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}, 0, false},
      {"another process with the pid (another start time)", {"sleep", "30"}, 1, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    bool cpp_gone = false, shell_gone = false, cpp_survived = false, shell_survived = false;
    {
      Victim v(c.argv);
      const ProcessRecord p = v.record(c.ticks_offset);
      cpp_gone = stop_recorded(p, 300ms);
      cpp_survived = v.alive();
    }
    {
      Victim v(c.argv);
      const ProcessRecord p = v.record(c.ticks_offset);
      shell_gone = sh(ssh_programs::stop(p.pid, p.start_ticks, 300ms)) == "gone";
      shell_survived = v.alive();
    }
    EXPECT_TRUE(cpp_gone);  // gone, or not the recorded process: either way not it any more
    EXPECT_EQ(shell_gone, cpp_gone);
    EXPECT_EQ(cpp_survived, c.survives);
    EXPECT_EQ(shell_survived, cpp_survived);
  }
}

TEST(SshPrograms, StopStepsAreTheCppProtocolsTimes) {
  const std::string s = ssh_programs::stop(42, 7, 1000ms);
  EXPECT_NE(s.find("kill -TERM -42 42 2>/dev/null; wait_gone 20;"), std::string::npos) << s;
  EXPECT_NE(s.find("kill -KILL -42 42 2>/dev/null; wait_gone " + std::to_string(process::kStopKillWait.count() / 50) + ";"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("sleep 0.05;"), std::string::npos) << s;
  EXPECT_NE(ssh_programs::stop(42, 7, 10ms).find("wait_gone 1;"), std::string::npos);
}

TEST(SshPrograms, StartQuotesEveryValue) {
  const std::string s = ssh_programs::start("'/a b'", {"X=it's", "Y=1"}, "verlctl agent");
  EXPECT_EQ(s.rfind("cd '/a b' || exit 1; setsid nohup env 'X=it'\\''s' Y=1 verlctl agent </dev/null >>agent.log 2>&1 & pid=$!; t() {", 0),
            0u)
      << s;
  EXPECT_EQ(ssh_programs::start("", {}, "verlctl agent").rfind("setsid nohup verlctl agent </dev/null", 0), 0u);
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;
}

TEST(TemplateRenderLine, JoinsLinesDropsCommentsAndKeepsValuesAsTheyAre) {
  const tmpl::Template t{"t.sh", "# a comment {{not_rendered}}\na {{x}}{{#y}}\n  && b{{/y}}\n\n  c\n"};
  EXPECT_EQ(tmpl::render_line(t, {{"x", "1\n2"}, {"y", true}}), "a 1\n2 && b c");
  EXPECT_EQ(tmpl::render_line(t, {{"x", "1"}, {"y", false}}), "a 1 c");
  try {
    tmpl::render_line({"t.sh", "# c\n\nfoo {{nope}}\n"}, nlohmann::ordered_json::object());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.sh:3: unknown placeholder 'nope'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace verl::launcher
