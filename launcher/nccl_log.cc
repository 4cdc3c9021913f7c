#include "launcher/nccl_log.h"

#include <regex>
#include <sstream>

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

// The message of an INFO line: what follows "NCCL INFO ", or nullptr.
const char* info_message(const std::string& line) {
  const auto at = line.find("NCCL INFO ");
  return at == std::string::npos ? nullptr : line.c_str() + at + 10;
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::string s = list;
  if (!s.empty() && (s[0] == '=' || s[0] == '^')) s.erase(0, 1);
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

std::string NcclNetDevice::label() const { return port > 0 ? name + ":" + std::to_string(port) : name; }

NcclChoice parse_nccl_info(const std::vector<std::string>& lines) {
  // NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
  // (a rail or plane id may follow the port: [0]mlx5_0:1:0/IB; with no device: "Using [RO]; OOB ...")
  static const std::regex kIbDevice(R"(\[(\d+)\]([^\s:\[\]]+):(\d+)(?::\d*)*/(\w+))");
  // NET/Socket : Using [0]eth0:10.0.0.1<0> [1]ib0:fe80::1%ib0<0>
  static const std::regex kSocketDevice(R"(\[(\d+)\]([^\s:\[\]]+):(\S+))");
  // Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA ; ... via NET/Socket/0 ; NET/IB/1(3)
  static const std::regex kNetChannel(R"(^Channel \d+/\d+ : .* via NET/([^/\s]+)/(\d+)(\(\d+\))?(\S*))");
  // Channel 00/64 : 0 1 2 3   (a ring's order, src/init.cc)
  static const std::regex kRingChannel(R"(^Channel \d+/\d+ :(?: \d+)+\s*$)");
  static const std::regex kCollChannels(R"(^(\d+) coll channels, )");
  static const std::regex kNNodes(R"(^comm \S+ rank \d+ nRanks \d+ nNodes (\d+) )");
  static const std::regex kAssigned(R"(^Assigned NET plugin (\S+) to comm)");
  NcclChoice c;
  std::vector<NcclNetDevice> ib, socket;
  for (const auto& line : lines) {
    const char* m = info_message(line);
    if (!m) continue;
    std::string msg(m);
    while (!msg.empty() && (msg.back() == ' ' || msg.back() == '\r')) msg.pop_back();
    std::smatch g;
    if (msg.rfind("Using network ", 0) == 0) {
      c.network = msg.substr(14);
    } else if (std::regex_search(msg, g, kAssigned)) {
      c.network = g[1];
    } else if (msg.rfind("NET/IB : Using", 0) == 0) {
      const auto semi = msg.find(';');
      const std::string list = msg.substr(14, semi == std::string::npos ? std::string::npos : semi - 14);
      ib.clear();
      for (std::sregex_iterator it(list.begin(), list.end(), kIbDevice), end; it != end; ++it)
        ib.push_back({std::stoi((*it)[1]), (*it)[2], std::stoi((*it)[3]), (*it)[4]});
    } else if (msg.rfind("NET/Socket : Using", 0) == 0) {
      const std::string list = msg.substr(18);
      socket.clear();
      for (std::sregex_iterator it(list.begin(), list.end(), kSocketDevice), end; it != end; ++it)
        socket.push_back({std::stoi((*it)[1]), (*it)[2], 0, (*it)[3]});
    } else if (std::regex_search(msg, g, kNetChannel)) {
      ++c.net_channels;
      if (c.network.empty()) c.network = g[1];
      c.used.insert(std::stoi(g[2]));
      if (g[4].str().find("GDRDMA") != std::string::npos) c.gdr = true;
    } else if (std::regex_match(msg, kRingChannel)) {
      c.rings = true;
    } else if (std::regex_search(msg, g, kCollChannels)) {
      c.coll_channels = std::stoi(g[1]);
    } else if (std::regex_search(msg, g, kNNodes)) {
      c.nnodes = std::stoi(g[1]);
    } else if (msg.rfind("Connected all rings", 0) == 0) {
      c.rings = true;
    } else if (msg.rfind("Connected all trees", 0) == 0 || msg.rfind("Trees [", 0) == 0) {
      c.trees = true;
    }
  }
  // The devices of the network NCCL assigned (an IB plugin that found no device still logs its
  // "Using" line before NCCL falls back to sockets).
  c.devices = c.network == "Socket" ? socket : c.network == "IB" ? ib : (!ib.empty() ? ib : socket);
  return c;
}

Json nccl_diagnosis(const std::string& node, const NcclChoice& c, const NcclExpectation& expect) {
  Json devices = Json::array(), used = Json::array(), algorithms = Json::array();
  for (const auto& d : c.devices) devices.push_back(d.label());
  for (int i : c.used) {
    std::string label = "#" + std::to_string(i);
    for (const auto& d : c.devices)
      if (d.index == i) label = d.label();
    used.push_back(label);
  }
  if (c.rings) algorithms.push_back("ring");
  if (c.trees) algorithms.push_back("tree");
  Json r = {{"node", node},     {"network", c.network}, {"devices", devices},     {"used", used},
            {"gdr", c.gdr},     {"channels", c.net_channels}, {"coll_channels", c.coll_channels},
            {"algorithms", algorithms}};
  auto verdict = [&](const char* status, const std::string& reason, const std::string& try_this = {}) {
    r["status"] = status;
    r["reason"] = reason;
    if (!try_this.empty()) r["try"] = try_this;
    return r;
  };
  if (!c.seen())
    return verdict("skip", "no NCCL INFO lines in the node's rank logs (a CPU job, or submitted without --nccl-debug)");
  // Even on one node: NCCL picks its network at start, so sockets there mean that IB is not usable.
  if (c.network == "Socket" && expect.has_ib)
    return verdict("warn", "fell back to TCP sockets although the node has ACTIVE InfiniBand/RoCE ports",
                   "check NCCL_IB_DISABLE and NCCL_IB_HCA in 'verlctl env' and the spec's env, that the ranks "
                   "see /dev/infiniband (containers), and the 'NET/IB' lines of the rank log");
  if (c.nnodes == 1 && c.net_channels == 0)
    return verdict("pass", "one node: NCCL needed no network (NVLink, PCIe P2P or shared memory within the node)");
  if (c.network == "Socket") {
    std::string on;
    for (const auto& u : used) on += (on.empty() ? "" : ", ") + u.get<std::string>();
    return verdict("pass", "NET/Socket on " + (on.empty() ? std::string("?") : on) +
                               " (the node has no ACTIVE InfiniBand/RoCE ports)");
  }
  if (c.network == "IB" && !expect.ib_hca.empty()) {
    const auto allowed = split_names(expect.ib_hca);
    for (int i : c.used) {
      std::string name, label;
      for (const auto& d : c.devices)
        if (d.index == i) name = d.name, label = d.label();
      bool ok = name.empty();
      for (const auto& a : allowed) ok = ok || a == label || a == name;
      if (!ok)
        return verdict("warn",
                       "used " + label + ", not one of the HCAs 'verlctl env' computed (NCCL_IB_HCA=" + expect.ib_hca + ")",
                       "an env.NCCL_IB_HCA in the spec, or NCCL's own choice, overrode it: check that the HCA is the "
                       "one on the GPUs' PCIe switch ('verlctl env' on the node says why it picked its list)");
    }
  }
  std::string via = c.network.empty() ? "NCCL" : "NET/" + c.network;
  if (!used.empty()) {
    std::string list;
    for (const auto& u : used) list += (list.empty() ? "" : ", ") + u.get<std::string>();
    via += " on " + list;
  }
  if (c.gdr) via += " with GPUDirect RDMA";
  return verdict("pass", via);
}

}  // namespace verl::launcher
