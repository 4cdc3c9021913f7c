#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"

namespace verl::files {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("verl_files_" + name + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

mode_t mode_of(const std::string& p) {
  struct stat st{};
  stat(p.c_str(), &st);
  return st.st_mode & 0777;
}

TEST(Files, WriteAtomicReplacesAndLeavesNoTemp) {
  auto dir = fresh_dir("atomic");
  auto f = dir + "/state.json";
  write_atomic(f, "old");
  write_atomic(f, "new", 0600);
  EXPECT_EQ(read_file(f), "new");
  EXPECT_EQ(mode_of(f), 0600u);
  int n = 0;
  for (auto& e : fs::directory_iterator(dir)) (void)e, ++n;
  EXPECT_EQ(n, 1);
}

TEST(Files, WriteAtomicIntoMissingDirNamesIt) {
  try {
    write_atomic("/no/such/dir/x", "y");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/dir/x"), std::string::npos);
  }
}

TEST(Files, StateDirIsPrivate) {
  auto dir = fresh_dir("home");
  setenv("VERLCTL_HOME", (dir + "/vh").c_str(), 1);
  auto s = state_dir("local");
  EXPECT_EQ(s, dir + "/vh/local");
  EXPECT_EQ(mode_of(s), 0700u);
  EXPECT_EQ(mode_of(dir + "/vh"), 0700u);
  unsetenv("VERLCTL_HOME");
}

TEST(Files, StateDirRejectsPathsAsNames) {
  EXPECT_THROW(state_dir("../etc", false), Error);
  EXPECT_THROW(state_dir("", false), Error);
}

TEST(Files, ReadFirstLineReturnsTheLineWithoutItsNewline) {
  const std::string dir = fresh_dir("first_line");
  write_atomic(dir + "/version", "535.104.05\nsecond line\n");
  EXPECT_EQ(read_first_line(dir + "/version"), "535.104.05");
  write_atomic(dir + "/no_newline", "only");
  EXPECT_EQ(read_first_line(dir + "/no_newline"), "only");
}

TEST(Files, ReadFirstLineOfAMissingFileIsEmpty) {
  EXPECT_EQ(read_first_line(fresh_dir("first_line_missing") + "/absent"), "");
}

}  // namespace
}  // namespace verl::files
