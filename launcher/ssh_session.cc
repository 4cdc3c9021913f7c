// libssh behind SshSession (see ssh_session.h). libssh reports errors as strings on the session;
// fail() turns each into a verl::Error naming the target and the stage.
#include "launcher/ssh_session.h"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/server.h>  // ssh_send_keepalive: declared with the server API, usable by clients
#include <libssh/sftp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"

namespace verl::launcher {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
constexpr size_t kSftpChunk = 192 * 1024;

// Appends to known_hosts from several threads (parallel fan-out) one at a time.
std::mutex& known_hosts_mutex() {
  static std::mutex m;
  return m;
}

std::string local_user() {
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return "root";
}

// How known_hosts names a host: "host" on port 22, "[host]:port" otherwise.
std::string known_hosts_name(const SshTarget& t) {
  return t.port == 22 ? t.host : "[" + t.host + "]:" + std::to_string(t.port);
}

// Lines of file (1-based) whose host patterns name the target in plain text; hashed lines
// (|1|...) cannot be matched without the key, ssh-keygen -R finds those.
std::vector<int> known_hosts_lines(const std::string& file, const SshTarget& t) {
  std::vector<int> out;
  std::ifstream in(file);
  std::string line;
  const std::string name = known_hosts_name(t);
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream fields(line);
    std::string hosts;
    fields >> hosts;
    if (hosts.empty() || hosts[0] == '#') continue;
    if (hosts[0] == '@') fields >> hosts;  // @cert-authority / @revoked markers
    std::stringstream patterns(hosts);
    std::string p;
    while (std::getline(patterns, p, ','))
      if (p == name) out.push_back(n);
  }
  return out;
}

std::string fingerprint(ssh_session s) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(s, &key) != SSH_OK) return "(no key)";
  unsigned char* hash = nullptr;
  size_t len = 0;
  std::string out = "(unknown)";
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
    char* hex = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
    if (hex) out = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + hex;
    ssh_string_free_char(hex);
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  return out;
}

void set_tcp_keepalive(socket_t fd, std::chrono::seconds every) {
  if (fd < 0 || every.count() <= 0) return;
  const int on = 1, idle = static_cast<int>(every.count()), count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

std::string SshTarget::label() const {
  return (user.empty() ? local_user() : user) + "@" + host + ":" + std::to_string(port);
}

struct SshSession::Impl {
  ssh_session s = nullptr;
  Clock::time_point last_keepalive = Clock::now();
  ~Impl() {
    if (s) {
      ssh_disconnect(s);
      ssh_free(s);
    }
  }
};

SshSession::SshSession(SshTarget target) : target_(std::move(target)), impl_(std::make_unique<Impl>()) {}
SshSession::~SshSession() = default;

std::unique_ptr<SshSession> SshSession::connect(const SshTarget& target_in) {
  static std::once_flag init;
  std::call_once(init, [] { ssh_init(); });
  SshTarget target = target_in;
  if (target.user.empty()) target.user = local_user();
  std::unique_ptr<SshSession> session(new SshSession(target));
  const std::string label = target.label();
  ssh_session s = ssh_new();
  if (!s) throw Error(ExitCode::kFailure, label + ": connecting: libssh cannot make a session", "out of memory?");
  session->impl_->s = s;
  auto fail = [&](ExitCode code, const std::string& stage, const std::string& what, const std::string& hint) -> Error {
    return Error(code, label + ": " + stage + ": " + what, hint);
  };

  const int port = target.port;
  const long timeout_s = std::max<long>(1, static_cast<long>((target.connect_timeout.count() + 999) / 1000));
  const int no = 0;
  ssh_options_set(s, SSH_OPTIONS_HOST, target.host.c_str());
  ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  ssh_options_set(s, SSH_OPTIONS_USER, target.user.c_str());
  ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no);
  const std::string known = files::expand_home(target.known_hosts);
  ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, known.c_str());

  // Connect without blocking so that the deadline holds for every step, a host that accepts
  // TCP but never sends its banner included.
  const auto start = Clock::now();
  const auto deadline = start + target.connect_timeout;
  ssh_set_blocking(s, 0);
  for (;;) {
    const int rc = ssh_connect(s);
    if (rc == SSH_OK) break;
    if (rc == SSH_ERROR) {
      const std::string why = ssh_get_error(s);
      if (Clock::now() >= deadline || why.find("imeout") != std::string::npos)
        throw fail(ExitCode::kTimedOut, "connecting", "no answer within " + format_seconds_shortest(target.connect_timeout) + " (" + why + ")",
                   "is sshd running there and reachable? ssh.connect_timeout_s sets the limit");
      throw fail(ExitCode::kUnreachable, "connecting", why,
                 "check that sshd runs on " + target.host + " port " + std::to_string(port) +
                     " (nodes[].port / ssh.port) and that this machine can reach it");
    }
    if (Clock::now() >= deadline)
      throw fail(ExitCode::kTimedOut, "connecting",
                 "no SSH answer within " + format_seconds_shortest(target.connect_timeout) +
                     " (the port accepts connections but sends no SSH banner)",
                 "is it an SSH server? is the host overloaded? ssh.connect_timeout_s sets the limit");
    const socket_t fd = ssh_get_fd(s);
    if (fd >= 0) {
      pollfd p{fd, POLLIN | POLLOUT, 0};
      ::poll(&p, 1, 20);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // The blocking steps that follow (key exchange replies, authentication) get the same limit.
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout_s);
  ssh_set_blocking(s, 1);
  set_tcp_keepalive(ssh_get_fd(s), target.keepalive);

  // The host key.
  const std::string stage_key = "verifying the host key";
  const ssh_known_hosts_e state = ssh_session_is_known_server(s);
  if (state == SSH_KNOWN_HOSTS_CHANGED || state == SSH_KNOWN_HOSTS_OTHER) {
    std::string where;
    for (int line : known_hosts_lines(known, target)) where += (where.empty() ? " line " : ", ") + std::to_string(line);
    throw fail(ExitCode::kUnreachable, stage_key,
               "WARNING: THE HOST KEY HAS CHANGED (server offers " + fingerprint(s) + "); " + known +
                   (where.empty() ? "" : where) + " holds " +
                   (state == SSH_KNOWN_HOSTS_OTHER ? "a key of another type" : "another key") + " for " +
                   known_hosts_name(target) + ". Someone may be intercepting the connection; refusing",
               "if the host was reinstalled, remove the old entry (" + known + (where.empty() ? "" : where) +
                   ") with: ssh-keygen -R '" + known_hosts_name(target) + "' -f " + known +
                   "; --accept-new-host-keys never replaces a changed key");
  }
  if (state == SSH_KNOWN_HOSTS_UNKNOWN || state == SSH_KNOWN_HOSTS_NOT_FOUND) {
    if (target.host_keys != SshTarget::HostKeys::kAcceptNew)
      throw fail(ExitCode::kUnreachable, stage_key,
                 "the host key " + fingerprint(s) + " is unknown (not in " + known + ")",
                 "check the fingerprint with the host's admin, then rerun with --accept-new-host-keys, or add it: "
                 "ssh-keyscan -p " + std::to_string(port) + " " + target.host + " >> " + known);
    std::lock_guard<std::mutex> lock(known_hosts_mutex());
    std::error_code ec;
    const fs::path parent = fs::path(known).parent_path();
    if (!parent.empty() && !fs::exists(parent, ec)) files::make_dirs(parent.string(), 0700);
    if (ssh_session_update_known_hosts(s) != SSH_OK)
      throw fail(ExitCode::kFailure, stage_key, "cannot add the host key to " + known + ": " + ssh_get_error(s),
                 "check that " + known + " is writable (ssh.known_hosts)");
    log::Info() << label << ": added host key " << fingerprint(s) << " to " << known;
  } else if (state == SSH_KNOWN_HOSTS_ERROR) {
    throw fail(ExitCode::kFailure, stage_key, std::string("cannot check the host key: ") + ssh_get_error(s),
               "check that " + known + " is readable (ssh.known_hosts)");
  }

  // Authentication: agent, then the identity file, then libssh's defaults.
  const std::string stage_auth = "authenticating";
  std::string tried;
  bool ok = false;
  if (const char* sock = std::getenv("SSH_AUTH_SOCK"); sock && *sock) {
    ok = ssh_userauth_agent(s, nullptr) == SSH_AUTH_SUCCESS;
    tried += "ssh-agent ($SSH_AUTH_SOCK)";
  }
  if (!ok && !target.identity_file.empty()) {
    const std::string path = files::expand_home(target.identity_file);
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK)
      throw fail(ExitCode::kInvalidConfig, stage_auth, "cannot read the private key " + path + " (ssh.identity_file)",
                 "does the file exist, is it readable, is it a private key without a passphrase? "
                 "a key with a passphrase needs ssh-agent (ssh-add " + path + ")");
    ok = ssh_userauth_publickey(s, nullptr, key) == SSH_AUTH_SUCCESS;
    ssh_key_free(key);
    tried += std::string(tried.empty() ? "" : ", ") + "the key " + path;
  }
  if (!ok && target.identity_file.empty()) {
    ok = ssh_userauth_publickey_auto(s, nullptr, nullptr) == SSH_AUTH_SUCCESS;
    tried += std::string(tried.empty() ? "" : ", ") + "~/.ssh/id_*";
  }
  if (!ok)
    throw fail(ExitCode::kUnreachable, stage_auth,
               "the server refused " + tried + (ssh_get_error(s)[0] ? std::string(" (") + ssh_get_error(s) + ")" : ""),
               "add the public key to ~" + target.user + "/.ssh/authorized_keys on " + target.host +
                   " (ssh-copy-id" + (target.identity_file.empty() ? "" : " -i " + target.identity_file) + " -p " +
                   std::to_string(port) + " " + target.user + "@" + target.host + "), or set ssh.identity_file / ssh.user");
  log::Debug() << label << ": connected in "
               << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() << " ms";
  return session;
}

ExecResult SshSession::exec(const std::string& command, const std::string& what,
                            std::optional<std::chrono::milliseconds> timeout, const std::string& input) {
  const std::string label = target_.label();
  ssh_session s = impl_->s;
  const auto limit = timeout.value_or(target_.command_timeout);
  const auto deadline = Clock::now() + limit;
  auto broken = [&](const std::string& why) {
    return Error(ExitCode::kUnreachable, label + ": " + what + ": " + why + ": " + ssh_get_error(s),
                 "the connection broke; is the host still up?");
  };
  ssh_channel ch = ssh_channel_new(s);
  if (!ch) throw broken("cannot open a channel");
  struct Guard {
    ssh_channel ch;
    ~Guard() {
      ssh_channel_close(ch);
      ssh_channel_free(ch);
    }
  } guard{ch};
  if (ssh_channel_open_session(ch) != SSH_OK) throw broken("cannot open a session channel");
  if (ssh_channel_request_exec(ch, command.c_str()) != SSH_OK) throw broken("cannot start the command");
  // stdin: input, then EOF. Blocking writes: the session has the connect timeout as its limit.
  for (size_t off = 0; off < input.size();) {
    const int n = ssh_channel_write(ch, input.data() + off, static_cast<uint32_t>(std::min<size_t>(input.size() - off, 32768)));
    if (n == SSH_ERROR) throw broken("writing its input");
    off += static_cast<size_t>(n);
  }
  ssh_channel_send_eof(ch);

  ExecResult r;
  char buf[16384];
  for (;;) {
    bool got = false;
    for (int is_err = 0; is_err < 2; ++is_err) {
      const int n = ssh_channel_read_nonblocking(ch, buf, sizeof buf, is_err);
      if (n == SSH_ERROR) throw broken("reading its output");
      if (n > 0) {
        (is_err ? r.err : r.out).append(buf, static_cast<size_t>(n));
        got = true;
      }
    }
    if (got) continue;
    if (ssh_channel_is_eof(ch) || ssh_channel_is_closed(ch)) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      ssh_channel_request_send_signal(ch, "TERM");
      throw Error(ExitCode::kTimedOut, label + ": " + what + ": no end within " + format_seconds_shortest(limit),
                  "the host may be overloaded; ssh.command_timeout_s sets the limit");
    }
    if (target_.keepalive.count() > 0 && now - impl_->last_keepalive >= target_.keepalive) {
      ssh_send_keepalive(s);
      impl_->last_keepalive = now;
    }
    // Wait for the next packet (or 100 ms) on the socket.
    const int waited = ssh_channel_poll_timeout(ch, 100, 0);
    if (waited == SSH_ERROR) throw broken("waiting for its output");
  }
  r.exit_status = ssh_channel_get_exit_status(ch);
  impl_->last_keepalive = Clock::now();
  return r;
}

void SshSession::upload_data(const std::string& data, const std::string& remote_path, mode_t mode) {
  upload("uploading " + remote_path, data, remote_path, mode);
}

void SshSession::upload_file(const std::string& local_path, const std::string& remote_path, mode_t mode) {
  upload("uploading " + local_path + " to " + remote_path, files::read_file(local_path), remote_path, mode);
}

void SshSession::upload(const std::string& what, const std::string& data, const std::string& remote_path, mode_t mode) {
  const std::string label = target_.label();
  ssh_session s = impl_->s;
  auto fail = [&](const std::string& why) {
    return Error(ExitCode::kFailure, label + ": " + what + ": " + why + ": " + ssh_get_error(s),
                 "check that the remote directory exists and is writable, and that sshd offers the sftp subsystem");
  };
  sftp_session sftp = sftp_new(s);
  if (!sftp) throw fail("cannot start SFTP");
  struct Guard {
    sftp_session sftp;
    ~Guard() { sftp_free(sftp); }
  } guard{sftp};
  if (sftp_init(sftp) != SSH_OK) throw fail("cannot start SFTP");
  static std::atomic<unsigned> counter{0};
  const std::string tmp = remote_path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  sftp_file f = sftp_open(sftp, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (!f) throw fail("cannot create " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    // One request per chunk, each waiting for its status: big chunks (OpenSSH takes messages up
    // to 256 KiB) keep the round trips few.
    const size_t n = std::min<size_t>(kSftpChunk, data.size() - off);
    const ssize_t w = sftp_write(f, data.data() + off, n);
    if (w <= 0) {
      sftp_close(f);
      sftp_unlink(sftp, tmp.c_str());
      throw fail("cannot write " + tmp);
    }
    off += static_cast<size_t>(w);
  }
  if (sftp_extension_supported(sftp, "fsync@openssh.com", "1")) sftp_fsync(f);
  if (sftp_close(f) != SSH_OK) {
    sftp_unlink(sftp, tmp.c_str());
    throw fail("cannot close " + tmp);
  }
  // The server's umask may have narrowed the mode; say it exactly.
  if (sftp_chmod(sftp, tmp.c_str(), mode) != SSH_OK) {
    sftp_unlink(sftp, tmp.c_str());
    throw fail("cannot chmod " + tmp);
  }
  // SFTP v3's rename refuses an existing target, and libssh 0.10 has no call for OpenSSH's
  // posix-rename; then the remote mv, a rename(2) within one directory, replaces it atomically.
  if (sftp_rename(sftp, tmp.c_str(), remote_path.c_str()) == SSH_OK) return;
  const ExecResult mv = exec(process::quote_argv({"mv", "-f", "--", tmp, remote_path}), what);
  if (mv.exit_status != 0) {
    sftp_unlink(sftp, tmp.c_str());
    throw Error(ExitCode::kFailure, label + ": " + what + ": cannot rename " + tmp + " to " + remote_path + ": " + mv.err,
                "check that the remote directory is writable");
  }
}

}  // namespace verl::launcher
