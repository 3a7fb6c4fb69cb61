// The entry points of libemo_inject.so.
//
// InitializeInjection: `emo trace` runs the user's program with CUDA_INJECTION64_PATH pointing
// at this library; the CUDA driver loads it while initializing and calls InitializeInjection.
// Whatever happens here, the program must go on: every failure is one line on stderr and a
// success return, so the driver carries on untraced.
//
// emo_trace_begin / emo_trace_end: a program that has loaded the library itself (Python's
// `with emo.trace(path):`, through ctypes) traces a block of its code, with CUDA already running.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <sstream>
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

// Block sessions: at most one open at a time; a finished one is kept until the next begins
// (nothing reaches it then: its callbacks were unsubscribed and its threads joined).
std::mutex g_block_mutex;
emo::runtime::Tracer* g_block = nullptr;
bool g_block_open = false;

void EndBlockAtExit() {
  std::lock_guard<std::mutex> lock(g_block_mutex);
  if (g_block_open) g_block->Shutdown("exit");
  g_block_open = false;
}

// Copies `text` into the caller's buffer, cut to fit and always terminated.
void Put(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

// "NAME=VALUE" lines into a map; false (and `error`) for a line without '='.
bool ParseSettings(const char* settings, std::map<std::string, std::string>* values, std::string* error) {
  std::istringstream in(settings != nullptr ? settings : "");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "setting '" + line + "' is not NAME=VALUE";
      return false;
    }
    (*values)[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return true;
}

int BeginBlock(const char* settings, char* out, size_t out_size) {
  std::lock_guard<std::mutex> lock(g_block_mutex);
  if (g_session != nullptr) {
    Put("this process is already traced from its start (emo trace or emo run)", out, out_size);
    return -1;
  }
  if (g_block_open) {
    Put("a block of this process is already being traced; blocks cannot nest", out, out_size);
    return -1;
  }
  std::map<std::string, std::string> values;
  std::string error;
  if (!ParseSettings(settings, &values, &error)) {
    Put(error, out, out_size);
    return -1;
  }
  std::vector<std::string> warnings;
  const emo::runtime::InjectConfig config = emo::runtime::ReadInjectConfig(
      [&values](const char* name) -> const char* {
        const auto it = values.find(name);
        return it == values.end() ? nullptr : it->second.c_str();
      },
      &warnings);
  // A value the caller chose that cannot be used is an error here, not a default.
  if (!warnings.empty()) {
    Put(warnings.front(), out, out_size);
    return -1;
  }
  delete g_block;
  g_block = new emo::runtime::Tracer();
  if (!g_block->Start(config, &error, emo::runtime::Tracer::Begin::kBlock)) {
    delete g_block;
    g_block = nullptr;
    Put(error, out, out_size);
    return -1;
  }
  g_block_open = true;
  static const bool at_exit = std::atexit(EndBlockAtExit) == 0;
  if (!at_exit) std::fprintf(stderr, "emo trace: cannot register the exit handler; a block left open at exit has no end chunk\n");
  Put(g_block->path(), out, out_size);
  return 0;
}

int EndBlock(const char* reason, char* out, size_t out_size) {
  std::lock_guard<std::mutex> lock(g_block_mutex);
  if (!g_block_open) {
    Put("no block is being traced", out, out_size);
    return -1;
  }
  g_block->Shutdown(reason != nullptr && *reason != '\0' ? reason : "block_end");
  g_block_open = false;
  Put(g_block->path(), out, out_size);
  return 0;
}

// Runs `f`, turning an exception into a failure with its message: none may leave into C.
template <typename F>
int Guarded(char* out, size_t out_size, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    Put(std::string("internal error: ") + e.what(), out, out_size);
  } catch (...) {
    Put("internal error", out, out_size);
  }
  return -1;
}

}  // namespace

// Starts tracing a block of this process, whose CUDA may already be running. `settings` holds
// "NAME=VALUE" lines with the variables `emo trace` sets for a program (EMO_TRACE_OUT,
// EMO_TRACE_MODE, EMO_TRACE_WARMUP, EMO_TRACE_ITERATIONS, EMO_TRACE_BUFFER_MIB, EMO_TRACE_ANCHOR,
// EMO_TRACE_NVTX_REGEX; docs/runtime.md); the process environment is not read for them. Returns
// 0 with the file's path in `out`, or -1 with the reason.
extern "C" __attribute__((visibility("default"))) int emo_trace_begin(const char* settings, char* out,
                                                                      size_t out_size) {
  return Guarded(out, out_size, [&] { return BeginBlock(settings, out, out_size); });
}

// Ends the block begun by emo_trace_begin and completes its file (`reason` becomes end.reason;
// "block_end" when empty). Returns 0 with the file's path in `out`, or -1 when no block is open.
extern "C" __attribute__((visibility("default"))) int emo_trace_end(const char* reason, char* out, size_t out_size) {
  return Guarded(out, out_size, [&] { return EndBlock(reason, out, out_size); });
}

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
