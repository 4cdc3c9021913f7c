#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace verl::files {
namespace fs = std::filesystem;

void write_atomic(const std::string& path, const std::string& data, mode_t mode) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0)
    throw Error(ExitCode::kFailure, "cannot write " + path + ": " + strerror(errno),
                "check that " + dir.string() + " exists and is writable");
  auto fail = [&](const char* what) {
    int e = errno;
    close(fd);
    unlink(tmpl.c_str());
    throw Error(ExitCode::kFailure, std::string(what) + " " + path + ": " + strerror(e), "is the disk full?");
  };
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    off += n;
  }
  if (fchmod(fd, mode) != 0) fail("cannot chmod");
  if (fsync(fd) != 0) fail("cannot fsync");
  close(fd);
  if (rename(tmpl.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmpl.c_str());
    throw Error(ExitCode::kFailure, "cannot rename into " + path + ": " + strerror(e), "");
  }
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);  // make the rename itself durable
    close(dfd);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ExitCode::kFailure, "cannot read " + path + ": " + strerror(errno), "check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void make_dirs(const std::string& dir, mode_t mode) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ExitCode::kFailure, "cannot create directory " + dir + ": " + ec.message(), "check permissions");
  if (chmod(dir.c_str(), mode) != 0)
    throw Error(ExitCode::kFailure, "cannot chmod " + dir + ": " + strerror(errno), "check ownership");
}

std::string expand_home(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  const char* home = std::getenv("HOME");
  if (!home) return path;
  if (path.size() == 1) return home;
  if (path[1] == '/') return std::string(home) + path.substr(1);
  return path;
}

std::string state_root() {
  if (const char* h = std::getenv("VERLCTL_HOME"); h && *h) return h;
  return expand_home("~/.verlctl");
}

std::string state_dir(const std::string& cluster, bool create) {
  if (cluster.empty() || cluster.find('/') != std::string::npos || cluster == "." || cluster == "..")
    throw Error(ExitCode::kUsage, "'" + cluster + "' is not a cluster name", "names are single path components like 'local'");
  std::string root = state_root();
  std::string dir = root + "/" + cluster;
  if (create) {
    make_dirs(root, 0700);
    make_dirs(dir, 0700);
  }
  return dir;
}

}  // namespace verl::files
