#include "tests/testing/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace verl::testing {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("verl_" + tag + "_XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno) + " (is TMPDIR writable?)");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path TempDir::write(const fs::path& relative, const std::string& text) const {
  const fs::path p = path_ / relative;
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + p.string());
  return p;
}

std::string TempDir::script(const fs::path& relative, const std::string& body) const {
  const fs::path p = write(relative, "#!/bin/sh\n" + body + "\n");
  fs::permissions(p, fs::perms::owner_all);
  return p.string();
}

TempHome::TempHome() {
  if (const char* old = std::getenv("VERLCTL_HOME")) {
    had_old_ = true;
    old_ = old;
  }
  ::setenv("VERLCTL_HOME", home_.c_str(), 1);
}

TempHome::~TempHome() {
  if (had_old_) ::setenv("VERLCTL_HOME", old_.c_str(), 1);
  else ::unsetenv("VERLCTL_HOME");
}

}  // namespace verl::testing
