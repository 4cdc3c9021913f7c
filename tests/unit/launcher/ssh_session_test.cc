// The SSH transport against real OpenSSH servers on loopback addresses
// (scripts/services/sshd-loopback.sh, started and stopped here): commands, exit status and
// timeouts, atomic SFTP uploads, host key checks (unknown, accept-new, changed), a wrong key, a
// refused connection, and a listener that never answers. A test that cannot start sshd fails.
#include "launcher/ssh_session.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/files.h"
#include "common/ports.h"
#include "common/process.h"

namespace verl::launcher {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A TCP socket listening on addr:port (port 0: any free one) that never accepts: the kernel
// completes the handshake, nothing ever answers.
struct Listener {
  int fd = -1;
  int port = 0;
  explicit Listener(const char* addr, int want_port = 0) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(want_port));
    ::inet_pton(AF_INET, addr, &a.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
      ::close(fd);
      fd = -1;
      return;
    }
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
};

class SshSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("verl_sshd_" + std::to_string(::getpid())));
    port_ = free_tcp_port("127.0.0.2");  // 127.0.0.2: clear of the tests ctest runs in parallel
    ::unsetenv("SSH_AUTH_SOCK");  // authenticate with the test key only
    process::Options o;
    o.timeout = 60s;
    const auto r = process::run({"bash", std::string(VERL_SOURCE_DIR) + "/scripts/services/sshd-loopback.sh", "start", "2",
                                 dir_->string(), std::to_string(port_)},
                                o);
    started_ = r.exit_code == 0 && !r.timed_out;
    start_output_ = r.out + r.err;
  }
  static void TearDownTestSuite() {
    process::run({"bash", std::string(VERL_SOURCE_DIR) + "/scripts/services/sshd-loopback.sh", "stop", "2", dir_->string()});
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  void SetUp() override { ASSERT_TRUE(started_) << "sshd-loopback.sh start failed:\n" << start_output_; }

  static SshTarget target(int host = 1) {
    SshTarget t;
    t.host = "127.0.0." + std::to_string(host + 1);
    t.port = port_;
    t.user = "root";
    t.identity_file = (*dir_ / "id_ed25519").string();
    t.known_hosts = (*dir_ / "known_hosts").string();
    t.connect_timeout = 10s;
    t.command_timeout = 20s;
    return t;
  }
  static std::string key_of(int host) {
    std::ifstream in(*dir_ / ("host-" + std::to_string(host)) / "ssh_host_ed25519_key.pub");
    std::string type, key;
    in >> type >> key;
    return type + " " + key;
  }
  static std::string name_of(int host) { return "[127.0.0." + std::to_string(host + 1) + "]:" + std::to_string(port_); }

  static fs::path* dir_;
  static int port_;
  static bool started_;
  static std::string start_output_;
};
fs::path* SshSessionTest::dir_ = nullptr;
int SshSessionTest::port_ = 0;
bool SshSessionTest::started_ = false;
std::string SshSessionTest::start_output_;

ExitCode code_of(const std::function<void()>& f, std::string* message) {
  try {
    f();
  } catch (const Error& e) {
    *message = std::string(e.what()) + "\nhint: " + e.hint();
    return e.code();
  }
  *message = "(no error)";
  return ExitCode::kOk;
}

TEST_F(SshSessionTest, ExecReturnsOutputErrorsAndExitStatus) {
  auto s = SshSession::connect(target());
  const auto r = s->exec("echo out; echo err >&2; exit 3", "a test command");
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  // The session is reusable, and quoting survives the remote shell.
  const std::string odd = "it's a \"b\" $HOME `x`";
  EXPECT_EQ(s->exec(process::quote_argv({"printf", "%s", odd}), "printf").out, odd);
  // stdin is at EOF: a command reading it ends.
  EXPECT_EQ(s->exec("cat; echo done", "cat").out, "done\n");
}

// Input reaches the command's stdin whole (more than one channel write), then EOF; the shell's
// read builtin takes exactly one line of it, as the ssh backend's sync command relies on.
TEST_F(SshSessionTest, ExecFeedsItsInputThenEof) {
  auto s = SshSession::connect(target());
  std::string big;
  for (int i = 0; big.size() < 200000; ++i) big += "line " + std::to_string(i) + "\n";
  const auto r = s->exec("IFS= read -r first && printf '%s|' \"$first\" && wc -c", "reading stdin", std::nullopt,
                         "secret-token\n" + big);
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "secret-token|" + std::to_string(big.size()) + "\n");
}

TEST_F(SshSessionTest, ExecPastItsTimeoutIsTimedOutNamingTheHost) {
  auto s = SshSession::connect(target());
  const auto t0 = Clock::now();
  std::string msg;
  EXPECT_EQ(code_of([&] { s->exec("sleep 30", "sleeping", 700ms); }, &msg), ExitCode::kTimedOut) << msg;
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_NE(msg.find("root@127.0.0.2:" + std::to_string(port_) + ": sleeping"), std::string::npos) << msg;
}

TEST_F(SshSessionTest, UploadIsAtomicWithItsModeAndReplacesTheOldFile) {
  auto s = SshSession::connect(target());
  const fs::path dest = *dir_ / "upload" / "token";
  fs::create_directories(dest.parent_path());
  s->upload_data("first\n", dest.string(), 0600);
  EXPECT_EQ(files::read_file(dest.string()), "first\n");
  s->upload_data("second\n", dest.string(), 0640);  // over an existing file
  EXPECT_EQ(files::read_file(dest.string()), "second\n");
  struct stat st {};
  ASSERT_EQ(::stat(dest.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // A big file (several SFTP writes) arrives whole.
  const fs::path big = *dir_ / "big.bin";
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  files::write_atomic(big.string(), data, 0755);
  s->upload_file(big.string(), (dest.parent_path() / "bin").string(), 0755);
  EXPECT_EQ(files::read_file((dest.parent_path() / "bin").string()), data);
  for (const auto& e : fs::directory_iterator(dest.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "a temporary file is left: " << e.path();
  std::string msg;
  EXPECT_NE(code_of([&] { s->upload_data("x", (*dir_ / "no" / "such" / "dir" / "f").string(), 0600); }, &msg),
            ExitCode::kOk);
  EXPECT_NE(msg.find("uploading"), std::string::npos) << msg;
}

TEST_F(SshSessionTest, UnknownHostKeyIsRefusedWithTheWaysToAddIt) {
  SshTarget t = target();
  t.known_hosts = (*dir_ / "empty_known_hosts").string();
  files::write_atomic(t.known_hosts, "", 0600);
  std::string msg;
  EXPECT_EQ(code_of([&] { SshSession::connect(t); }, &msg), ExitCode::kUnreachable) << msg;
  EXPECT_NE(msg.find("verifying the host key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--accept-new-host-keys"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ssh-keyscan"), std::string::npos) << msg;
  EXPECT_EQ(files::read_file(t.known_hosts), "") << "a refused key must not be written";
}

TEST_F(SshSessionTest, AcceptNewAddsTheKeyToKnownHosts) {
  SshTarget t = target(2);
  t.known_hosts = (*dir_ / "new" / "known_hosts").string();  // not there yet, nor its directory
  t.host_keys = SshTarget::HostKeys::kAcceptNew;
  SshSession::connect(t);
  const std::string written = files::read_file(t.known_hosts);
  EXPECT_NE(written.find(name_of(2)), std::string::npos) << written;
  // Now known: a strict connection succeeds.
  t.host_keys = SshTarget::HostKeys::kStrict;
  EXPECT_EQ(SshSession::connect(t)->exec("echo ok", "echo").out, "ok\n");
}

TEST_F(SshSessionTest, ChangedHostKeyIsRefusedNamingFileAndLineEvenWithAcceptNew) {
  SshTarget t = target(1);
  t.known_hosts = (*dir_ / "changed_known_hosts").string();
  // Line 2 claims host 1 has host 2's key.
  files::write_atomic(t.known_hosts, "# other hosts\n" + name_of(1) + " " + key_of(2) + "\n", 0600);
  for (auto mode : {SshTarget::HostKeys::kStrict, SshTarget::HostKeys::kAcceptNew}) {
    t.host_keys = mode;
    std::string msg;
    EXPECT_EQ(code_of([&] { SshSession::connect(t); }, &msg), ExitCode::kUnreachable) << msg;
    EXPECT_NE(msg.find("HOST KEY HAS CHANGED"), std::string::npos) << msg;
    EXPECT_NE(msg.find(t.known_hosts + " line 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ssh-keygen -R"), std::string::npos) << msg;
  }
  EXPECT_EQ(files::read_file(t.known_hosts), "# other hosts\n" + name_of(1) + " " + key_of(2) + "\n");
}

TEST_F(SshSessionTest, WrongIdentityIsRefusedWhileAuthenticating) {
  SshTarget t = target();
  t.identity_file = (*dir_ / "wrong_ed25519").string();
  std::string msg;
  EXPECT_EQ(code_of([&] { SshSession::connect(t); }, &msg), ExitCode::kUnreachable) << msg;
  EXPECT_NE(msg.find("authenticating"), std::string::npos) << msg;
  EXPECT_NE(msg.find("wrong_ed25519"), std::string::npos) << msg;
  EXPECT_NE(msg.find("authorized_keys"), std::string::npos) << msg;
  t.identity_file = (*dir_ / "no_such_key").string();
  EXPECT_EQ(code_of([&] { SshSession::connect(t); }, &msg), ExitCode::kInvalidConfig) << msg;
  EXPECT_NE(msg.find("ssh.identity_file"), std::string::npos) << msg;
}

TEST_F(SshSessionTest, RefusedConnectionIsUnreachableAtOnce) {
  SshTarget t = target();
  t.host = "127.0.0.9";  // nothing listens there
  const auto t0 = Clock::now();
  std::string msg;
  EXPECT_EQ(code_of([&] { SshSession::connect(t); }, &msg), ExitCode::kUnreachable) << msg;
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_NE(msg.find("root@127.0.0.9:" + std::to_string(port_) + ": connecting"), std::string::npos) << msg;
}

TEST_F(SshSessionTest, ListenerThatNeverAnswersTimesOutWithinTheConnectTimeout) {
  Listener silent("127.0.0.9");
  ASSERT_GE(silent.fd, 0);
  SshTarget t = target();
  t.host = "127.0.0.9";
  t.port = silent.port;
  t.connect_timeout = 1500ms;
  const auto t0 = Clock::now();
  std::string msg;
  EXPECT_EQ(code_of([&] { SshSession::connect(t); }, &msg), ExitCode::kTimedOut) << msg;
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 4s) << "the connect timeout must hold while waiting for the banner";
  EXPECT_NE(msg.find("127.0.0.9:" + std::to_string(silent.port) + ": connecting"), std::string::npos) << msg;
}

}  // namespace
}  // namespace verl::launcher
