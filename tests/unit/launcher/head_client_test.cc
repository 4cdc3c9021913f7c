#include "launcher/head_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/error.h"
#include "common/ports.h"

namespace verl::launcher {
namespace {

TEST(HeadClient, NoHeadIsHeadUnreachableWithTheCauseApart) {
  const HeadAddress address{"127.0.0.1", free_tcp_port()};  // nobody listens there
  HeadClient client(address, "token", std::chrono::milliseconds(1000));
  try {
    client.get("/api/cluster");
    FAIL() << "expected HeadUnreachable";
  } catch (const HeadUnreachable& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnreachable);
    EXPECT_EQ(e.cause(), "connection refused or host unreachable");
    EXPECT_EQ(std::string(e.what()), "cannot reach the head at " + address.url() + ": " + e.cause());
    EXPECT_FALSE(e.hint().empty());
  }
}

}  // namespace
}  // namespace verl::launcher
