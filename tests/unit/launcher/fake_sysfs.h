// A fake sysfs tree in a temp dir, laid out as the kernel lays out /sys: class/infiniband/
// <dev>/ports/<n>/{state,link_layer,rate,gids/<i>,gid_attrs/types/<i>} and
// bus/pci/drivers/nvidia/<pci address>/class. Removed when the object goes.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace verl::launcher::testing {

class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& tag) {
    static std::atomic<int> counter{0};
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("verl_sysfs_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakeSysfs() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  std::string root() const { return root_.string(); }

  // state: "4: ACTIVE", "1: DOWN"; link_layer: InfiniBand | Ethernet.
  void port(const std::string& dev, int port, const std::string& state, const std::string& link_layer,
            const std::string& rate = "200 Gb/sec (4X HDR)") {
    const auto p = port_dir(dev, port);
    std::filesystem::create_directories(p / "gids");
    std::filesystem::create_directories(p / "gid_attrs/types");
    write(p / "state", state);
    write(p / "link_layer", link_layer);
    write(p / "rate", rate);
  }
  // type empty: no types file for the slot (an unreadable one).
  void gid(const std::string& dev, int port, int index, const std::string& gid, const std::string& type) {
    const auto p = port_dir(dev, port);
    write(p / "gids" / std::to_string(index), gid);
    if (!type.empty()) write(p / "gid_attrs/types" / std::to_string(index), type);
  }
  // pci_class: 0x030200 (3D controller, a GPU), 0x068000 (an NVSwitch bridge).
  void nvidia_device(const std::string& pci_address, const std::string& pci_class) {
    const auto d = root_ / "bus/pci/drivers/nvidia" / pci_address;
    std::filesystem::create_directories(d);
    write(d / "class", pci_class);
  }
  void file(const std::string& relative, const std::string& text) {
    std::filesystem::create_directories((root_ / relative).parent_path());
    write(root_ / relative, text);
  }

 private:
  std::filesystem::path port_dir(const std::string& dev, int port) const {
    return root_ / "class/infiniband" / dev / "ports" / std::to_string(port);
  }
  static void write(const std::filesystem::path& p, const std::string& text) {
    std::ofstream out(p);
    out << text << "\n";  // sysfs ends its values with a newline
  }
  std::filesystem::path root_;
};

// An IPv4-mapped GID as sysfs writes it for a.b.c.d.
inline std::string ipv4_gid(int a, int b, int c, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, c, d);
  return buf;
}
inline const char* kLinkLocalGid = "fe80:0000:0000:0000:ba59:9fff:fe1c:4b6a";
inline const char* kZeroGid = "0000:0000:0000:0000:0000:0000:0000:0000";

}  // namespace verl::launcher::testing
