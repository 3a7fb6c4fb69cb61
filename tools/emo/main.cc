// emo: energy-minimal clocks for GPU AI workloads. Thin CLI: each subcommand parses its flags
// and calls one library entry point (see cmd_*.cc; the command table is in cli_app.cc).
#include <malloc.h>

#include <string>
#include <vector>

#include "cli_app.h"

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // `emo optimize` replays the whole graph hundreds of times, each with node-sized vectors (35 MB
  // at 10 M trace events). Above glibc's largest mmap threshold (32 MiB) every one was a fresh
  // mmap, paged in and zeroed again: 180 s of CPU on a 10 M-event trace against 34 s with freed
  // blocks kept in the heap for reuse, for 6 % more peak memory (BENCHMARKS.md, Order 12).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  return emo::cli::RunEmo(std::vector<std::string>(argv + 1, argv + argc));
}
