// A fresh directory of a test's own under the temp dir (mkdtemp: unique per process and per
// object), removed with everything in it when the object goes.
#pragma once

#include <filesystem>
#include <string>

namespace verl::testing {

class TempDir {
 public:
  // tag: the start of the directory's name, to tell whose it is (verl_<tag>_XXXXXX).
  explicit TempDir(const std::string& tag = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::filesystem::path& relative) const { return path_ / relative; }

  // Writes text to path()/relative (its directories made first); returns the file's path.
  std::filesystem::path write(const std::filesystem::path& relative, const std::string& text) const;
  // A shell script at path()/relative: "#!/bin/sh\n" + body + "\n", executable by its owner.
  std::string script(const std::filesystem::path& relative, const std::string& body) const;

 private:
  std::filesystem::path path_;
};

// Sets VERLCTL_HOME for the object's life to a path of its own that does not exist yet (a
// dry run must not create it; verlctl makes it when it needs it), then puts back what was there.
class TempHome {
 public:
  TempHome();
  ~TempHome();
  TempHome(const TempHome&) = delete;
  TempHome& operator=(const TempHome&) = delete;
  const std::filesystem::path& path() const { return home_; }

 private:
  TempDir dir_{"home"};
  std::filesystem::path home_ = dir_ / "verlctl";
  bool had_old_ = false;
  std::string old_;
};

}  // namespace verl::testing
