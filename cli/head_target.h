// How the job commands (submit, jobs, status JOB, logs, stop) find a cluster's head: by its
// name (the state directory `verlctl up` wrote: the head's address and the token), or by
// --address HOST:PORT / $VERLCTL_ADDRESS with the token from --token-file / $VERLCTL_TOKEN (a
// head on another machine). No cluster is exit 4 with the hint to bring one up.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "launcher/head_client.h"

namespace verl::cli {

struct TargetArgs {
  std::string name = "local";
  // The name was chosen (--name given, or set by the command itself, as smoke and up's
  // preflight do): $VERLCTL_ADDRESS, meant for the default, must not redirect it.
  bool by_name = false;
  std::string address;
  std::string token_file;
};

// Adds --name, --address, --token-file to cmd.
void add_target_options(CLI::App* cmd, TargetArgs& args);

struct HeadTarget {
  std::string cluster;  // the name, or the address when given by address
  launcher::HeadAddress address;
  std::string token;
};

// Whether args name a head by address (--address, or $VERLCTL_ADDRESS unless a name was chosen)
// rather than a cluster's state directory.
bool targets_address(const TargetArgs& args);

// Throws verl::Error: unreachable (4) when there is no such cluster or it is down; usage (2)
// for an address without a token.
HeadTarget find_head(const TargetArgs& args);

// A client of the target with the given timeout.
std::unique_ptr<launcher::HeadClient> connect(const HeadTarget& target,
                                              std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace verl::cli
