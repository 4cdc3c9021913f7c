// The one HTTP client of the head's API, used by the agent and by up/down/status. It sends the
// bearer token on every request and turns transport failures into verl::Error(unreachable)
// naming the address, so that callers never see httplib. One HeadClient per thread.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common/error.h"

namespace verl::launcher {

struct HeadAddress {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string str() const;  // host:port ([v6]:port)
  std::string url() const;  // http://host:port
  // "host:port"; throws verl::Error(usage) naming the text when it is not one.
  static HeadAddress parse(const std::string& text);
};

// A request's outcome: the head's answer, or why the head could not be reached at all
// (status 0; unreachable says why: connection refused, timed out, ...).
struct HeadResponse {
  int status = 0;               // 0: no answer
  nlohmann::ordered_json body;  // null when the body is not JSON
  std::string unreachable;      // empty when the head answered
  bool answered() const { return status != 0; }
  bool ok() const { return status >= 200 && status < 300; }
  // What went wrong, for a log line: "HTTP 503", or why there is no answer.
  std::string problem() const { return answered() ? "HTTP " + std::to_string(status) : unreachable; }
};

// The head could not be reached at all (exit 4). cause() is the transport's reason alone
// ("connection refused or host unreachable"), for callers that word their own message around it
// instead of taking what() apart.
class HeadUnreachable : public Error {
 public:
  HeadUnreachable(const HeadAddress& address, std::string cause)
      : Error(ExitCode::kUnreachable, "cannot reach the head at " + address.url() + ": " + cause,
              "is the cluster up? 'verlctl status' shows it, 'verlctl up' starts it"),
        cause_(std::move(cause)) {}
  const std::string& cause() const { return cause_; }

 private:
  std::string cause_;
};

class HeadClient {
 public:
  // An empty token sends no Authorization header (what the tests of the head's 401 need).
  HeadClient(HeadAddress address, std::string token,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));
  ~HeadClient();
  HeadClient(const HeadClient&) = delete;
  HeadClient& operator=(const HeadClient&) = delete;

  const HeadAddress& address() const { return address_; }
  // Keeps the connection open between requests (off by default: a CLI makes a few requests).
  // The agent's heartbeats and log POSTs reuse one: 1,000 agents opening a connection per
  // request cost the head an accept and a worker hand-off each (bench/head_scale).
  void set_keep_alive(bool on);

  // The answer whatever its status, or (status 0) why the head could not be reached at all.
  HeadResponse try_request(const std::string& method, const std::string& path, const nlohmann::ordered_json* body);
  // A 2xx answer's body. Throws HeadUnreachable (a verl::Error, 4) naming the address when the
  // head cannot be reached; failure (1) with the head's message for any other status (401: the token).
  nlohmann::ordered_json get(const std::string& path);
  nlohmann::ordered_json post(const std::string& path, const nlohmann::ordered_json& body);

 private:
  nlohmann::ordered_json checked(const std::string& method, const std::string& path,
                                 const nlohmann::ordered_json* body);
  HeadAddress address_;
  std::string token_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace verl::launcher
