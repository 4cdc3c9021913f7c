#include "common/ports.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"

namespace verl {
namespace {

// Binds addr:port as a server would; true when the bind succeeds.
bool can_bind(const char* addr, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, addr, &a.sin_addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(Ports, FreeTcpPortCanBeBoundRightAfter) {
  const int port = free_tcp_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_TRUE(can_bind("127.0.0.1", port)) << port;
}

TEST(Ports, FreeTcpPortOnAnotherLoopbackAddress) {
  const int port = free_tcp_port("127.0.0.2");
  EXPECT_TRUE(can_bind("127.0.0.2", port)) << port;
}

TEST(Ports, FreeTcpPortNamesAnAddressThatIsNotOne) {
  try {
    free_tcp_port("localhost:80");
    FAIL() << "expected verl::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("localhost:80"), std::string::npos) << e.what();
  }
}

TEST(Ports, FreeTcpPortOnAnAddressNotOfThisMachineThrows) {
  // 192.0.2.0/24 is TEST-NET-1: never assigned to an interface, so bind fails (EADDRNOTAVAIL).
  EXPECT_THROW(free_tcp_port("192.0.2.1"), Error);
}

}  // namespace
}  // namespace verl
