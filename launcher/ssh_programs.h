// The ssh backend's remote programs: templates/ssh/*.sh rendered into the one-line shell
// commands that run on a node over SSH (tmpl::render_line), and that `verlctl up --dry-run`
// shows. Arguments called *_shell are shell words already (process::quote'd, or a remote path's
// "$HOME"/... form); every other value is quoted here. Functions only; thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace verl::launcher::ssh_programs {

// templates/ssh/proc_ticks.sh: the shell function t PID, a pid's start time as
// process_start_ticks() reads it (empty when gone or a zombie).
std::string ticks_fn();

// templates/ssh/start.sh: starts the agent detached and prints pid= and ticks=.
//   cd_shell     the directory to cd to first; empty: none (it runs inside sync())
//   env          NAME=value entries given to the agent through env
//   agent_shell  the agent's command line
std::string start(const std::string& cd_shell, const std::vector<std::string>& env, const std::string& agent_shell);

// templates/ssh/sync.sh: the syncing stage's one command (its stdin: the token, then the spec).
struct Sync {
  std::string dir_shell;      // the node's directory
  std::string bin_dir_shell;  // <remote_dir>/bin, made too; empty: not (copy_binary never)
  std::string exe_shell;      // the node's verlctl
  CopyBinary copy = CopyBinary::kAuto;
  std::string version, size;  // auto: this verlctl's --version line and size in bytes
  std::string module_shell;   // auto: the node's trainer module; empty when this build has none
  std::string module_size;    // auto: this trainer module's size in bytes
  std::string start;          // start() without cd_shell: run when the node's verlctl will do
};
std::string sync(const Sync& s);

// templates/ssh/check.sh: prints running while pid has start_ticks, else gone and the last
// line of log_shell.
std::string check(pid_t pid, int64_t start_ticks, const std::string& log_shell);

// templates/ssh/stop.sh: stop_recorded()'s protocol on a node; prints gone or running.
std::string stop(pid_t pid, int64_t start_ticks, std::chrono::milliseconds grace);

}  // namespace verl::launcher::ssh_programs
