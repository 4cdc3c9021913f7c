// What NCCL chose on each node, read back from the ranks' logs of a job submitted with
// `verlctl submit --nccl-debug` (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET), and whether that
// is what the node should use: a node with ACTIVE InfiniBand/RoCE ports whose ranks fell back to
// TCP sockets, or used another HCA than `verlctl env` computed (NCCL_IB_HCA), gets a warning.
//
// The lines are NCCL's INFO lines, "<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <message>"
// (src/debug.cc), with these messages (NCCL 2.28's format strings):
//   "Using network %s"                                       (src/init.cc)
//   "NET/IB : Using [%d]%s:%d/%s ... ; OOB %s:%s"            (src/transport/net_ib/init.cc: device, port, IB|RoCE)
//   "NET/Socket : Using [%d]%s:%s ..."                       (src/transport/net_socket.cc: interface, address)
//   "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s" (src/transport/net.cc: network, device index, /GDRDMA)
//   "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p channels per peer" (src/init.cc)
//   "Connected all rings, ..." / "Connected all trees"       (src/transport/generic.cc)
//   "comm %p rank %d nRanks %d nNodes %d ..."                (src/init.cc)
// Other lines are ignored, so a whole rank log can be passed in.
//
// Pure functions; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace verl::launcher {

struct NcclNetDevice {
  int index = 0;
  std::string name;  // mlx5_0 | eth0
  int port = 0;      // IB port; 0 for a socket interface
  std::string link;  // IB | RoCE (IB); the address (Socket)
  std::string label() const;  // "mlx5_0:1" | "eth0"
};

struct NcclChoice {
  std::string network;                 // "IB", "Socket", another plugin's name; "" when not said
  std::vector<NcclNetDevice> devices;  // the network's "Using" list
  std::set<int> used;                  // device indices the NET channels named
  int net_channels = 0;                // Channel ... via NET lines
  bool gdr = false;                    // a NET channel with /GDRDMA
  int coll_channels = -1;              // "%d coll channels"
  int nnodes = -1;                     // "nNodes %d"
  bool rings = false, trees = false;   // "Connected all rings" / "Connected all trees"
  bool seen() const { return !network.empty() || !devices.empty() || net_channels > 0 || coll_channels >= 0; }
};

// Reads NCCL's INFO lines out of a node's log lines.
NcclChoice parse_nccl_info(const std::vector<std::string>& lines);

// What the node should use: whether it has ACTIVE IB/RoCE ports, and the HCAs `verlctl env`
// computed for it (NCCL_IB_HCA, "=mlx5_0:1,mlx5_1:1"; empty: not set).
struct NcclExpectation {
  bool has_ib = false;
  std::string ib_hca;
};

// {node, network, devices: ["mlx5_0:1"], used: ["mlx5_0:1"], gdr, channels, coll_channels,
//  algorithms: ["ring", "tree"], status: pass|warn|skip, reason, try?}
nlohmann::ordered_json nccl_diagnosis(const std::string& node, const NcclChoice& choice, const NcclExpectation& expect);

}  // namespace verl::launcher
