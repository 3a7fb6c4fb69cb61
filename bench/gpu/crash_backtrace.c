// Preloaded into a program that crashes (LD_PRELOAD), prints the C stack of the thread that got
// SIGSEGV, SIGABRT or SIGBUS to stderr, then lets the signal kill the program as before. Frames in
// libraries without symbols print as file(+offset): `addr2line -f -C -e LIB OFFSET` on an
// unstripped copy of the same build names them (bench/gpu/detach_diag.sh, case backtrace).
//
//   gcc -O1 -shared -fPIC bench/gpu/crash_backtrace.c -o libcrash_backtrace.so
//   LD_PRELOAD=$PWD/libcrash_backtrace.so PROGRAM...
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_crash(int sig) {
  static const char head[] = "crash_backtrace: signal ";
  char line[64];
  void* frames[64];
  const int n = backtrace(frames, 64);
  (void)!write(2, head, sizeof(head) - 1);
  line[0] = (char)('0' + sig / 10);
  line[1] = (char)('0' + sig % 10);
  line[2] = '\n';
  (void)!write(2, line, 3);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc_s now, not inside the handler of a corrupted heap
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGABRT, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}
