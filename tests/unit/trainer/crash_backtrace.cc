// Not a test: a fatal-signal handler for the trainer test binary, so that a crash on a machine
// without gdb (the GPU machine) still says where it happened: the faulting instruction and
// address with the library and symbol dladdr finds for it, then the backtrace (symbolise the
// +offsets with addr2line -e <library>). It re-raises the signal, so the test still fails with
// its original cause.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace {

void say(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void describe(const char* what, void* address) {
  char line[512];
  Dl_info info{};
  if (::dladdr(address, &info) && info.dli_fname) {
    const auto base = reinterpret_cast<char*>(info.dli_fbase);
    std::snprintf(line, sizeof line, "%s %p = %s+%#lx (%s)\n", what, address, info.dli_fname,
                  static_cast<unsigned long>(static_cast<char*>(address) - base),
                  info.dli_sname ? info.dli_sname : "?");
  } else {
    std::snprintf(line, sizeof line, "%s %p (no library)\n", what, address);
  }
  say(line);
}

void on_fatal_signal(int sig, siginfo_t* si, void* context) {
  say("\n*** fatal signal in verl_trainer_tests\n");
  describe("fault address", si->si_addr);
#if defined(__x86_64__)
  auto* uc = static_cast<ucontext_t*>(context);
  describe("instruction", reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]));
  // A call through a null pointer leaves RIP at 0; the caller's return address is on the stack.
  if (uc->uc_mcontext.gregs[REG_RIP] == 0)
    describe("called from", *reinterpret_cast<void**>(uc->uc_mcontext.gregs[REG_RSP]));
#else
  (void)context;
#endif
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  for (int i = 0; i < n; ++i) describe("  frame", frames[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

const bool kInstalled = [] {
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
  return true;
}();

}  // namespace
