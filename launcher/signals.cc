#include "launcher/signals.h"

#include <signal.h>

namespace verl::launcher {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

void on_signal(int sig) {
  g_signal = sig;
  g_stop = true;
}

}  // namespace

const std::atomic<bool>& install_stop_flag() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return g_stop;
}

int stop_signal() { return g_signal; }

}  // namespace verl::launcher
