// Runs a user's program under EMO's CUPTI tracer (`emo trace`, `emo monitor`): the program is
// started unmodified with CUDA_INJECTION64_PATH naming libemo_inject.so, which the CUDA driver
// loads when the program initializes CUDA. Plain POSIX; the tracer itself is
// src/runtime/inject_*.cc (built only with CUPTI), configured through EMO_TRACE_* variables.
#pragma once

#include <string>
#include <vector>

#include "emo/base/status.h"

namespace emo::runtime {

struct LaunchOptions {
  std::vector<std::string> command;  // argv of the program; command[0] is looked up in PATH
  // Where each traced process writes: %r = its rank (RANK) or pid<PID>, %p = pid, %h = host.
  std::string output = "emo_trace_%r.emotrace";
  std::string mode = "trace";        // "trace" | "monitor" (no activity records)
  int warmup = 5;                    // iterations before the traced window
  int iterations = 5;                // iterations traced
  int buffer_mib = 256;              // the tracer's activity buffer pool, per process
  std::string nvtx_regex;            // NVTX range names that mark iterations ("" = the tracer's default)
  std::string injection_library;     // "" = FindInjectionLibrary()
  std::vector<std::string> extra_env;  // "NAME=value" set for the program, replacing the caller's
};

struct LaunchResult {
  int exit_code = 0;    // the program's exit status, or 128 + signal when a signal ended it
  int signal = 0;       // the signal that ended it, 0 when it exited
  std::vector<std::string> files;  // traces written by its processes, oldest first
  std::string injection_library;
};

// The tracer library: $EMO_INJECT_LIB, then libemo_inject.so beside the emo executable or in
// ../lib from it, then the build tree's. NotFound names every place looked in.
Result<std::string> FindInjectionLibrary();

// Starts the program with the tracer injected, forwards SIGINT/SIGTERM to it, waits for it, and
// lists the trace files its processes wrote (files matching `output` modified since the start).
// Fails when the program cannot be started; a program that fails is a result, not an error.
Result<LaunchResult> RunUnderTracer(const LaunchOptions& options);

// The files matching an output pattern (%r, %p, %h as above) in its folder whose modification
// time is at or after `since_ns` (realtime), oldest first.
std::vector<std::string> FindOutputs(const std::string& pattern, int64_t since_ns);

}  // namespace emo::runtime
