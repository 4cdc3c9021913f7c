// What one node's network and accelerators look like, as far as the NCCL environment and the
// container run line depend on it: its InfiniBand/RoCE ports (state, link layer, rate, GID
// table), its NVIDIA GPUs, its interface addresses, and the local address the kernel sends
// from to reach the head.
//
// Everything that touches the OS sits behind NodeFactsReader, so that tests can fake it whole
// or in part (a SystemReader on a fake sysfs tree in a temp dir, with a fake network). read_*
// functions never throw: what cannot be read counts as absent, and a head without a route
// lands in NodeFacts::notes so that `verlctl env` can say why a value is missing.
// Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace verl::launcher {

struct Gid {
  int index = 0;
  std::string gid;   // as sysfs writes it: "0000:0000:0000:0000:0000:ffff:0a00:0005"
  std::string type;  // "RoCE v2", "IB/RoCE v1"; empty when unreadable
};

struct HcaPort {
  std::string device;      // mlx5_0
  int port = 0;            // 1-based, as in sysfs
  std::string state;       // "4: ACTIVE"
  std::string link_layer;  // InfiniBand | Ethernet (RoCE)
  std::string rate;        // "200 Gb/sec (4X HDR)"
  std::vector<Gid> gids;   // the non-zero entries of ports/N/gids, by index

  bool active() const;  // state says ACTIVE
  bool roce() const;    // link_layer is Ethernet
  std::string name() const;  // "mlx5_0:1"
};

struct InterfaceAddress {
  std::string name;     // eth0, lo
  std::string address;  // numeric, as inet_ntop writes it
  bool loopback = false;
  bool up = false;
};

struct NodeFacts {
  std::string sysfs_root;            // where ports and GPUs were read ("/sys")
  std::vector<HcaPort> hca_ports;    // sorted by device, then port
  int gpus = 0;                      // NVIDIA display/3D controllers bound to the nvidia driver
  std::vector<InterfaceAddress> interfaces;
  std::string head;                  // the head address the route was looked up for
  std::string head_source_address;   // the local address that reaches the head; empty: unknown
  std::vector<std::string> notes;    // what could not be read, and why
};

// source_address_to's answer: the address, or why there is none.
struct SourceAddress {
  std::string address;  // empty: unknown
  std::string why;
};

class NodeFactsReader {
 public:
  virtual ~NodeFactsReader() = default;
  virtual std::string sysfs_root() const = 0;
  virtual std::vector<HcaPort> hca_ports() const = 0;
  virtual int gpu_count() const = 0;
  virtual std::vector<InterfaceAddress> interfaces() const = 0;
  // The local address the kernel would send from to reach host (a name or a numeric address);
  // an empty address with why filled in when host does not resolve or has no route (an outcome
  // read_node_facts notes, not an error).
  virtual SourceAddress source_address_to(const std::string& host) const = 0;
  virtual std::string hostname() const = 0;
};

// The real machine: ports and GPUs under sysfs_root (normally /sys), interfaces from
// getifaddrs(), the route to the head from a connected (never sending) UDP socket.
class SystemReader : public NodeFactsReader {
 public:
  explicit SystemReader(std::string sysfs_root = "/sys") : root_(std::move(sysfs_root)) {}
  std::string sysfs_root() const override { return root_; }
  std::vector<HcaPort> hca_ports() const override;
  int gpu_count() const override;
  std::vector<InterfaceAddress> interfaces() const override;
  SourceAddress source_address_to(const std::string& host) const override;
  std::string hostname() const override;

 private:
  std::string root_;
};

// Everything the reader knows, with the route looked up for head.
NodeFacts read_node_facts(const NodeFactsReader& reader, const std::string& head);

// The ports under <sysfs_root>/class/infiniband/*/ports/*; zero GIDs (unused slots) left out.
// A sysfs/procfs file's content without trailing newlines, spaces and NULs; "" if unreadable.
std::string read_trimmed(const std::string& path);
std::vector<HcaPort> read_hca_ports(const std::string& sysfs_root);
// Entries of <sysfs_root>/bus/pci/drivers/nvidia whose PCI class is a display controller
// (0x03xxxx): GPUs, not the NVSwitches that the same driver binds on HGX boards.
int count_nvidia_gpus(const std::string& sysfs_root);

// host names this machine: a loopback address or "localhost", this machine's hostname (short
// or full), or one of its interface addresses.
bool is_this_machine(const std::string& host, const std::vector<InterfaceAddress>& interfaces,
                     const std::string& hostname);
bool is_loopback_address(const std::string& host);  // 127.0.0.0/8, ::1, localhost
// host is a loopback address, or a name that resolves to loopback addresses only (a name that
// does not resolve: nullopt, not known).
std::optional<bool> reaches_loopback(const std::string& host);

// Whether agents reach the head: a head that listens on loopback (head.bind_host 127.0.0.1,
// the default) is reached only from its own machine, and a head address on loopback leads
// every agent to its own machine. agent_host: where an agent runs (empty: not known, as for a
// slurm allocation's nodes); head_host: the address it dials (head.host, or where the backend
// put the head); bind_host: head.bind_host; agent: the agent's place in the spec, for the
// message ("nodes[2].host 10.0.0.3"). Throws verl::Error(invalid config, 3) naming the key to
// change with a hint; a host that does not resolve is not judged.
void check_head_reach(const std::string& bind_host, const std::string& head_host, const std::string& agent_host,
                      const std::string& agent);

}  // namespace verl::launcher
