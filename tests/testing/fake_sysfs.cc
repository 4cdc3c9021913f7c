#include "tests/testing/fake_sysfs.h"

#include <cstdio>

namespace verl::testing {

namespace fs = std::filesystem;

namespace {
// sysfs ends its values with a newline.
void value(const TempDir& dir, const fs::path& relative, const std::string& text) { dir.write(relative, text + "\n"); }
}  // namespace

fs::path FakeSysfs::port_dir(const std::string& dev, int port) const {
  return fs::path("class/infiniband") / dev / "ports" / std::to_string(port);
}

void FakeSysfs::port(const std::string& dev, int port, const std::string& state, const std::string& link_layer,
                     const std::string& rate) {
  const auto p = port_dir(dev, port);
  fs::create_directories(dir_ / p / "gids");
  fs::create_directories(dir_ / p / "gid_attrs/types");
  value(dir_, p / "state", state);
  value(dir_, p / "link_layer", link_layer);
  value(dir_, p / "rate", rate);
}

void FakeSysfs::gid(const std::string& dev, int port, int index, const std::string& gid, const std::string& type) {
  const auto p = port_dir(dev, port);
  value(dir_, p / "gids" / std::to_string(index), gid);
  if (!type.empty()) value(dir_, p / "gid_attrs/types" / std::to_string(index), type);
}

void FakeSysfs::nvidia_device(const std::string& pci_address, const std::string& pci_class) {
  value(dir_, fs::path("bus/pci/drivers/nvidia") / pci_address / "class", pci_class);
}

void FakeSysfs::file(const std::string& relative, const std::string& text) { value(dir_, relative, text); }

std::string ipv4_gid(int a, int b, int c, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, c, d);
  return buf;
}

}  // namespace verl::testing
