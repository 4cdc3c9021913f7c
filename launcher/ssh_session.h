// The SSH transport: one authenticated connection to one host, on libssh. This is the only file
// that includes libssh; every libssh failure leaves it as a verl::Error that names
// user@host:port and the stage it happened in (connecting, verifying the host key,
// authenticating, running a command, uploading a file) with a hint.
//
// Host keys are checked against target.known_hosts (and the system's /etc/ssh/ssh_known_hosts):
// an unknown key is refused unless host_keys is kAcceptNew, which appends it to known_hosts; a
// changed key is always refused, naming the file and the line that holds the old key.
// Authentication: the ssh-agent first when $SSH_AUTH_SOCK is set, then target.identity_file;
// with neither, the agent and ~/.ssh/id_*. ~/.ssh/config is not read: the cluster spec says
// everything.
//
// Timeouts: connect() gives up after connect_timeout (TCP connect, banner, key exchange and
// authentication together; exit 124 when the time ran out, 4 when the host refused); exec()
// after its timeout (command_timeout by default; exit 124). Long sessions send a keepalive
// request every keepalive seconds while a command runs, and the socket has TCP keepalive at the
// same interval while it idles.
//
// A session is used by one thread at a time; different sessions may be used from different
// threads at once.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace verl::launcher {

struct SshTarget {
  std::string host;
  int port = 22;
  std::string user;           // empty: this process's user
  std::string identity_file;  // empty: ssh-agent and ~/.ssh/id_*
  std::string known_hosts;    // the file host keys are checked against (and added to)
  enum class HostKeys { kStrict, kAcceptNew } host_keys = HostKeys::kStrict;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds command_timeout{60000};
  std::chrono::seconds keepalive{15};  // 0: none

  // user@host:port, as every message names the target.
  std::string label() const;
};

struct ExecResult {
  int exit_status = -1;
  std::string out, err;
};

class SshSession {
 public:
  // Connects, verifies the host key and authenticates. Throws verl::Error: 4 (refused,
  // unknown or changed host key, authentication denied), 124 (no answer within
  // connect_timeout), 3 (an identity file that cannot be read).
  static std::unique_ptr<SshSession> connect(const SshTarget& target);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  const SshTarget& target() const { return target_; }

  // Runs command in the remote user's shell and waits for it; its stdin is input, then EOF
  // (input carries what must not show in the remote command line, a token). A non-zero exit
  // status is returned, not thrown. Throws verl::Error: 124 past the timeout (the command is
  // sent SIGTERM and its channel closed), 4 when the connection breaks. what names the command
  // in messages ("starting the agent").
  ExecResult exec(const std::string& command, const std::string& what,
                  std::optional<std::chrono::milliseconds> timeout = std::nullopt, const std::string& input = {});

  // Writes data (or the file at local_path) to remote_path with mode, atomically: a temporary
  // name in the same directory, then a rename over remote_path. The directory must exist.
  void upload_data(const std::string& data, const std::string& remote_path, mode_t mode);
  void upload_file(const std::string& local_path, const std::string& remote_path, mode_t mode);

 private:
  struct Impl;
  explicit SshSession(SshTarget target);
  void upload(const std::string& what, const std::string& data, const std::string& remote_path, mode_t mode);

  SshTarget target_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace verl::launcher
