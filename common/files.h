// Files and the state directory. Everything verlctl persists (state files, tokens, checkpoint
// markers) is written with write_atomic(): a temp file in the same directory, fsync, rename —
// a crash leaves either the old content or the new, never half of either.
//
// State lives under $VERLCTL_HOME/<cluster>/ (default ~/.verlctl/<cluster>/), mode 0700;
// secrets (the head's token) are 0600.
#pragma once

#include <string>
#include <sys/types.h>

namespace verl::files {

// Writes data to path atomically with the given mode. Throws verl::Error naming the path.
void write_atomic(const std::string& path, const std::string& data, mode_t mode = 0644);

// Reads a whole file. Throws verl::Error naming the path when it cannot be read.
std::string read_file(const std::string& path);

// The first line of a small file (sysfs, /proc) without its newline; "" when the file is missing
// or unreadable, because such files are optional facts (a driver version), not errors.
std::string read_first_line(const std::string& path);

// Creates dir and its parents; the last component gets mode (chmod'ed even if it existed).
void make_dirs(const std::string& dir, mode_t mode = 0755);

// ~ and ~/x expanded with $HOME.
std::string expand_home(const std::string& path);

// The root of all clusters' state ($VERLCTL_HOME or ~/.verlctl) and one cluster's directory,
// created with 0700 when create is true.
std::string state_root();
std::string state_dir(const std::string& cluster, bool create = true);

}  // namespace verl::files
