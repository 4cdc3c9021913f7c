#include "launcher/head_client.h"

#include <httplib.h>

#include "common/error.h"

namespace verl::launcher {
namespace {

std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "connection refused or host unreachable";
    case httplib::Error::ConnectionTimeout: return "connection timed out";
    case httplib::Error::Read: return "no answer (read failed or timed out)";
    case httplib::Error::Write: return "the request could not be sent";
    case httplib::Error::BindIPAddress: return "cannot bind the local address";
    default: return "HTTP error: " + httplib::to_string(e);
  }
}

}  // namespace

std::string HeadAddress::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string HeadAddress::url() const { return "http://" + str(); }

HeadAddress HeadAddress::parse(const std::string& text) {
  const auto colon = text.rfind(':');
  auto bad = [&] {
    return Error(ExitCode::kUsage, "'" + text + "' is not a head address host:port", "for example 127.0.0.1:8265");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) throw bad();
  HeadAddress a;
  a.host = text.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  try {
    size_t used = 0;
    a.port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || a.port < 1 || a.port > 65535) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  return a;
}

struct HeadClient::Impl {
  explicit Impl(const HeadAddress& a) : client(a.host, a.port) {}
  httplib::Client client;
};

HeadClient::HeadClient(HeadAddress address, std::string token, std::chrono::milliseconds timeout)
    : address_(std::move(address)), token_(std::move(token)), impl_(std::make_unique<Impl>(address_)) {
  impl_->client.set_connection_timeout(timeout);
  impl_->client.set_read_timeout(timeout);
  impl_->client.set_write_timeout(timeout);
  impl_->client.set_keep_alive(false);
  if (!token_.empty()) impl_->client.set_bearer_token_auth(token_.c_str());  // empty: no header at all
}

HeadClient::~HeadClient() = default;

void HeadClient::set_keep_alive(bool on) { impl_->client.set_keep_alive(on); }

HeadResponse HeadClient::try_request(const std::string& method, const std::string& path, const nlohmann::ordered_json* body) {
  httplib::Result res = method == "GET"
                            ? impl_->client.Get(path.c_str())
                            : impl_->client.Post(path.c_str(), body ? body->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) : std::string("{}"),
                                                 "application/json");
  HeadResponse r;
  if (!res) {
    r.unreachable = describe(res.error());
    return r;
  }
  r.status = res->status;
  r.body = nlohmann::ordered_json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (r.body.is_discarded()) r.body = nullptr;
  return r;
}

nlohmann::ordered_json HeadClient::checked(const std::string& method, const std::string& path,
                                           const nlohmann::ordered_json* body) {
  const HeadResponse r = try_request(method, path, body);
  if (!r.answered()) throw HeadUnreachable(address_, r.unreachable);
  if (r.ok()) return r.body;
  std::string message = r.body.is_object() && r.body.contains("error") ? r.body["error"].get<std::string>()
                                                                           : "HTTP " + std::to_string(r.status);
  if (r.status == 401)
    throw Error(ExitCode::kFailure, "the head at " + address_.url() + " rejected the token: " + message,
                "the token is the cluster's <state dir>/token (--token-file, $VERLCTL_TOKEN); another "
                "cluster's head may hold this port: 'verlctl down' and 'verlctl up' again");
  // The head's own hint says what to do about its answer (a job that does not exist, ...).
  const std::string hint = r.body.is_object() && r.body.contains("hint") && r.body["hint"].is_string()
                               ? r.body["hint"].get<std::string>()
                               : r.status == 404 ? "'verlctl jobs' lists the jobs this head knows (ids are job-N)"
                                                  : "";
  throw Error(ExitCode::kFailure,
              "the head at " + address_.url() + " answered " + method + " " + path + " with " +
                  std::to_string(r.status) + ": " + message,
              hint);
}

nlohmann::ordered_json HeadClient::get(const std::string& path) { return checked("GET", path, nullptr); }

nlohmann::ordered_json HeadClient::post(const std::string& path, const nlohmann::ordered_json& body) {
  return checked("POST", path, &body);
}

}  // namespace verl::launcher
