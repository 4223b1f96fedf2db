#include "trainer/base/crash_report.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "absl/debugging/symbolize.h"

namespace cohort {
namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

// Only async-signal-safe calls from here on: write(2), no allocation, no stdio.
void Say(const char* text) {
  for (size_t left = std::strlen(text); left > 0;) {
    const ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void SayHex(uintptr_t value) {
  char digits[2 + 2 * sizeof(value) + 1];
  char* p = digits + sizeof(digits) - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0);
  *--p = 'x';
  *--p = '0';
  Say(p);
}

void OnCrash(int signo) {
  Say("*** SIG");
  Say(sigabbrev_np(signo));
  Say(" received: the process crashed; its stack, innermost first:\n");
  // backtrace() unwinds by the code's unwind tables (through the C library and the signal's
  // frame too), and Symbolize names each frame from the program's symbols.
  // Frames 0 and 1 are this handler and the signal's return trampoline; frame 2 is where the
  // signal came, the others return addresses.
  void* frames[64];
  const int depth = backtrace(frames, 64);
  for (int i = 2; i < depth; ++i) {
    char name[1024];
    Say("    @ ");
    SayHex(reinterpret_cast<uintptr_t>(frames[i]));
    Say("  ");
    // A return address points after its call: look up the call itself.
    const uintptr_t pc = reinterpret_cast<uintptr_t>(frames[i]) - (i > 2 ? 1 : 0);
    Say(absl::Symbolize(reinterpret_cast<void*>(pc), name, sizeof(name)) ? name : "(unknown)");
    Say("\n");
  }
  // Dies of the signal as it would have (SA_RESETHAND restored the default answer).
  raise(signo);
}

}  // namespace

void ReportCrashes(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  // The first backtrace() loads the unwinder (it allocates): not in a crash.
  void* frame;
  backtrace(&frame, 1);
  struct sigaction action = {};
  action.sa_handler = OnCrash;
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  for (const int signo : kCrashSignals) sigaction(signo, &action, nullptr);
}

}  // namespace cohort
