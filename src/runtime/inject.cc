// The entry point of libemo_inject.so. `emo trace` runs the user's program with
// CUDA_INJECTION64_PATH pointing at this library; the CUDA driver loads it while initializing
// and calls InitializeInjection. Whatever happens here, the program must go on: every failure
// is one line on stderr and a success return, so the driver carries on untraced.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "emo/runtime/inject_config.h"
#include "tracer.h"

namespace {

emo::runtime::Tracer* g_session = nullptr;

void ShutdownAtExit() {
  if (g_session != nullptr) g_session->Shutdown("exit");
}

int Initialize() {
  std::vector<std::string> warnings;
  const emo::runtime::InjectConfig config =
      emo::runtime::ReadInjectConfig([](const char* name) { return std::getenv(name); }, &warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "emo trace: %s\n", w.c_str());
  // Never deleted once started: CUPTI may call into it from another thread while the process
  // exits. A session that failed to start left nothing that can reach it.
  auto* session = new emo::runtime::Tracer();
  std::string error;
  if (!session->Start(config, &error)) {
    std::fprintf(stderr, "emo trace: %s; the program runs on untraced\n", error.c_str());
    delete session;
    return 1;
  }
  g_session = session;
  if (std::atexit(ShutdownAtExit) != 0) {
    std::fprintf(stderr, "emo trace: cannot register the exit handler; the trace will have no end chunk\n");
  }
  return 1;
}

}  // namespace

// Called by the CUDA driver once, during cuInit. Returns 1 (success) in every case so the
// program continues, traced or not.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> called{false};
  if (called.exchange(true)) return 1;
  // No exception may leave into the driver's C frames.
  try {
    return Initialize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "emo trace: setup failed (%s); the program runs on untraced\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "emo trace: setup failed; the program runs on untraced\n");
  }
  return 1;
}
