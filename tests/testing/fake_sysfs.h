// A fake sysfs tree in a temp dir, laid out as the kernel lays out /sys: class/infiniband/
// <dev>/ports/<n>/{state,link_layer,rate,gids/<i>,gid_attrs/types/<i>} and
// bus/pci/drivers/nvidia/<pci address>/class. Removed when the object goes. For node_facts,
// nccl_env and `verlctl env`, which take the sysfs root as a parameter.
#pragma once

#include <filesystem>
#include <string>

#include "tests/testing/temp_dir.h"

namespace verl::testing {

class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& tag) : dir_("sysfs_" + tag) {}

  std::string root() const { return dir_.str(); }

  // state: "4: ACTIVE", "1: DOWN"; link_layer: InfiniBand | Ethernet.
  void port(const std::string& dev, int port, const std::string& state, const std::string& link_layer,
            const std::string& rate = "200 Gb/sec (4X HDR)");
  // type empty: no types file for the slot (an unreadable one).
  void gid(const std::string& dev, int port, int index, const std::string& gid, const std::string& type);
  // pci_class: 0x030200 (3D controller, a GPU), 0x068000 (an NVSwitch bridge).
  void nvidia_device(const std::string& pci_address, const std::string& pci_class);
  // Any file below the root, with a newline after text as sysfs writes its values.
  void file(const std::string& relative, const std::string& text);

 private:
  std::filesystem::path port_dir(const std::string& dev, int port) const;
  TempDir dir_;
};

// An IPv4-mapped GID as sysfs writes it for a.b.c.d.
std::string ipv4_gid(int a, int b, int c, int d);
inline const char* kLinkLocalGid = "fe80:0000:0000:0000:ba59:9fff:fe1c:4b6a";
inline const char* kZeroGid = "0000:0000:0000:0000:0000:0000:0000:0000";

}  // namespace verl::testing
