// Picking a TCP port nobody listens on, for the servers that verlctl smoke and the tests start
// on one machine. Thread-safe (no shared state).
#pragma once

#include <string>

namespace verl {

// A port on ipv4 (a loopback address: "127.0.0.1", or "127.0.0.2" to keep clear of tests that
// ctest runs in parallel) that was free a moment ago: bound to port 0, read back, closed. Another
// process may take it before the caller binds it; callers that cannot retry should bind with
// SO_REUSEADDR right away. Throws verl::Error naming the address when no port can be had.
int free_tcp_port(const std::string& ipv4 = "127.0.0.1");

}  // namespace verl
