#include "common/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace verl {

int free_tcp_port(const std::string& ipv4) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, ipv4.c_str(), &a.sin_addr) != 1)
    throw Error(ExitCode::kUsage, "free_tcp_port: '" + ipv4 + "' is not an IPv4 address", "pass one such as 127.0.0.1");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  socklen_t len = sizeof a;
  int port = 0;
  int err = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    err = errno;
  else
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  if (port == 0)
    throw Error(ExitCode::kFailure, "no free TCP port on " + ipv4 + ": " + std::strerror(err),
                "is the machine out of ports, or is " + ipv4 + " not a local address?");
  return port;
}

}  // namespace verl
