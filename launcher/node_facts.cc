#include "launcher/node_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.h"

namespace verl::launcher {
namespace fs = std::filesystem;
namespace {


std::optional<int> to_int(const std::string& s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), ::isdigit)) return std::nullopt;
  return std::stoi(s);
}

bool zero_gid(const std::string& gid) {
  return gid.empty() || std::all_of(gid.begin(), gid.end(), [](char c) { return c == '0' || c == ':'; });
}

std::string numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::string read_trimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

bool HcaPort::active() const { return state.find("ACTIVE") != std::string::npos; }
bool HcaPort::roce() const { return link_layer == "Ethernet"; }
std::string HcaPort::name() const { return device + ":" + std::to_string(port); }

std::vector<HcaPort> read_hca_ports(const std::string& sysfs_root) {
  std::vector<HcaPort> ports;
  std::error_code ec;
  const fs::path root = fs::path(sysfs_root) / "class/infiniband";
  if (!fs::is_directory(root, ec)) return ports;
  for (const auto& dev : fs::directory_iterator(root, ec)) {
    const fs::path pdir = dev.path() / "ports";
    if (!fs::is_directory(pdir, ec)) continue;
    for (const auto& p : fs::directory_iterator(pdir, ec)) {
      const auto number = to_int(p.path().filename().string());
      if (!number) continue;
      HcaPort port;
      port.device = dev.path().filename().string();
      port.port = *number;
      port.state = read_trimmed(p.path() / "state");
      port.link_layer = read_trimmed(p.path() / "link_layer");
      port.rate = read_trimmed(p.path() / "rate");
      std::error_code gec;
      for (const auto& g : fs::directory_iterator(p.path() / "gids", gec)) {
        const auto index = to_int(g.path().filename().string());
        if (!index) continue;
        Gid gid{*index, read_trimmed(g.path()), {}};
        if (zero_gid(gid.gid)) continue;
        // Reading the type of an unused slot fails with EINVAL on a real kernel: empty then.
        gid.type = read_trimmed(p.path() / "gid_attrs/types" / g.path().filename());
        port.gids.push_back(gid);
      }
      std::sort(port.gids.begin(), port.gids.end(), [](const Gid& a, const Gid& b) { return a.index < b.index; });
      ports.push_back(std::move(port));
    }
  }
  std::sort(ports.begin(), ports.end(), [](const HcaPort& a, const HcaPort& b) {
    return a.device != b.device ? a.device < b.device : a.port < b.port;
  });
  return ports;
}

int count_nvidia_gpus(const std::string& sysfs_root) {
  static const std::regex kPciAddress(R"([0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])");
  std::error_code ec;
  const fs::path dir = fs::path(sysfs_root) / "bus/pci/drivers/nvidia";
  if (!fs::is_directory(dir, ec)) return 0;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!std::regex_match(e.path().filename().string(), kPciAddress)) continue;
    if (read_trimmed(e.path() / "class").rfind("0x03", 0) == 0) ++n;
  }
  return n;
}

bool is_loopback_address(const std::string& host) {
  if (lower(host) == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

std::optional<bool> reaches_loopback(const std::string& host) {
  if (is_loopback_address(host)) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  bool all = true;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET)
      all = all && (ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    else if (a->ai_family == AF_INET6)
      all = all && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
  }
  freeaddrinfo(res);
  return all;
}

void check_head_reach(const std::string& bind_host, const std::string& head_host, const std::string& agent_host,
                      const std::string& agent) {
  const bool bind_loopback = reaches_loopback(bind_host).value_or(false);
  const std::optional<bool> head_loopback = reaches_loopback(head_host);
  // Only a loopback end needs to know where the agent is (a name may take a DNS lookup).
  const bool ask = !agent_host.empty() && (bind_loopback || head_loopback == true);
  const std::optional<bool> agent_here = ask ? reaches_loopback(agent_host) : std::nullopt;
  const std::string fix_host = "head.host to an address of this machine that " + agent_host + " reaches";
  if (bind_loopback && (head_loopback == false || agent_here == false)) {
    const std::string why = head_loopback == false
                                ? "the agents dial the head at " + head_host + ", where it would not listen"
                                : agent + " is another machine, and its agent could not reach a head that listens on loopback";
    throw Error(ExitCode::kInvalidConfig, "head.bind_host is " + bind_host + ", a loopback address, but " + why,
                "set head.bind_host=0.0.0.0 (or to the address the agents dial)" +
                    std::string(head_loopback == true ? ", and " + fix_host : ""));
  }
  if (agent_here == false && head_loopback == true)
    throw Error(ExitCode::kInvalidConfig,
                "head.host is " + head_host + ", a loopback address, but " + agent +
                    " is another machine: its agent would dial its own loopback, not the head",
                "set " + fix_host);
}

bool is_this_machine(const std::string& host, const std::vector<InterfaceAddress>& interfaces,
                     const std::string& hostname) {
  if (host.empty()) return false;
  if (is_loopback_address(host)) return true;
  const std::string h = lower(host);
  const std::string me = lower(hostname);
  if (!me.empty()) {
    if (h == me) return true;
    const std::string short_me = me.substr(0, me.find('.'));
    if (h == short_me || h.substr(0, h.find('.')) == me) return true;
  }
  for (const auto& i : interfaces)
    if (lower(i.address) == h) return true;
  return false;
}

std::vector<HcaPort> SystemReader::hca_ports() const { return read_hca_ports(root_); }
int SystemReader::gpu_count() const { return count_nvidia_gpus(root_); }

std::vector<InterfaceAddress> SystemReader::interfaces() const {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    out.push_back({i->ifa_name, numeric(i->ifa_addr), (i->ifa_flags & IFF_LOOPBACK) != 0, (i->ifa_flags & IFF_UP) != 0});
  }
  freeifaddrs(list);
  return out;
}

SourceAddress SystemReader::source_address_to(const std::string& host) const {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  // Port 9 (discard): connect() on a UDP socket only looks the route up, it sends nothing.
  const int rc = getaddrinfo(host.c_str(), "9", &hints, &res);
  if (rc != 0) return {"", "the head address " + host + " does not resolve: " + gai_strerror(rc)};
  std::string error = "no address of " + host;
  std::optional<std::string> found;
  for (addrinfo* a = res; a && !found; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      found = numeric(reinterpret_cast<sockaddr*>(&local));
    } else {
      error = "no route from this machine to the head " + host + " (" + numeric(a->ai_addr) + "): " +
              std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(res);
  if (!found) return {"", error};
  return {*found, ""};
}

std::string SystemReader::hostname() const {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

NodeFacts read_node_facts(const NodeFactsReader& reader, const std::string& head) {
  NodeFacts f;
  f.sysfs_root = reader.sysfs_root();
  f.hca_ports = reader.hca_ports();
  f.gpus = reader.gpu_count();
  f.interfaces = reader.interfaces();
  f.head = head;
  const SourceAddress route = reader.source_address_to(head);
  if (!route.address.empty()) f.head_source_address = route.address;
  else f.notes.push_back(route.why);
  return f;
}

}  // namespace verl::launcher
