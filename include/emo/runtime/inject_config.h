// Configuration of the CUPTI injection library (libemo_inject.so), read from the environment
// that `emo trace` sets for the traced program. Pure: no CUDA, no I/O; the environment comes
// in through a getter so tests can give their own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace emo::runtime {

// What the injection records: `kTrace` adds CUPTI activity records inside the window;
// `kMonitor` records only iterations, NVTX ranges, energy and power.
enum class TraceMode { kTrace, kMonitor };

// One integer tunable: its environment variable, unit, bounds, default and a line of doc
// (docs/runtime.md lists the same table).
struct IntOption {
  const char* env;
  const char* unit;
  int64_t min;
  int64_t max;
  int64_t fallback;
  const char* doc;
};

inline constexpr IntOption kWarmupOption{
    "EMO_TRACE_WARMUP", "iterations", 0, 1000000, 5, "iterations of the loop left untraced before the window"};
inline constexpr IntOption kIterationsOption{"EMO_TRACE_ITERATIONS",           "iterations", 1, 1000000, 5,
                                             "iterations traced in the window"};
inline constexpr IntOption kBufferPoolOption{
    "EMO_TRACE_BUFFER_MIB",
    "MiB",
    8,
    65536,
    256,
    "memory for CUPTI activity buffers; when all are in use CUPTI drops records"};

inline constexpr IntOption kAnchorOption{
    "EMO_TRACE_ANCHOR", "(0 or 1)", 0, 1, 1,
    "1: once the loop is found (and its window traced), follow iterations by NVTX ranges or by one host sync or "
    "copy per iteration, with the per-launch callbacks off; 0: follow every kernel launch to the end"};

inline constexpr IntOption kQuietOption{
    "EMO_TRACE_QUIET_MS", "ms", 0, 600000, 0,
    "benchmarks only (bench/gpu/detach_stress.sh): once settled after the window, this long as always, then "
    "this long with CUPTI detached and NVML paused, then attached again, once a run (0: never)"};

inline constexpr const char* kOutputEnv = "EMO_TRACE_OUT";
// Where the quiet phases' marks go (lines "<phase> <CLOCK_MONOTONIC ns>"), written at the end.
inline constexpr const char* kQuietLogEnv = "EMO_TRACE_QUIET_LOG";
inline constexpr const char* kModeEnv = "EMO_TRACE_MODE";
inline constexpr const char* kNvtxRegexEnv = "EMO_TRACE_NVTX_REGEX";
inline constexpr const char* kDefaultOutput = "emo_trace_%r.emotrace";
inline constexpr const char* kDefaultNvtxRegex = R"(ProfilerStep#\d+|[Ss]tep|[Ii]ter)";

// The injection's settings, defaults filled in.
struct InjectConfig {
  std::string output_pattern = kDefaultOutput;
  TraceMode mode = TraceMode::kTrace;
  int64_t warmup = kWarmupOption.fallback;
  int64_t iterations = kIterationsOption.fallback;
  int64_t buffer_pool_mib = kBufferPoolOption.fallback;
  int64_t anchor = kAnchorOption.fallback;
  int64_t quiet_ms = kQuietOption.fallback;
  std::string quiet_log;
  std::string nvtx_regex = kDefaultNvtxRegex;
};

// Reads the settings through `getenv` (nullptr for an unset variable). A value that does not
// parse, is out of bounds, or (for the regex) does not compile keeps its default and adds one
// line to `warnings` naming the variable, the value and the default used.
InjectConfig ReadInjectConfig(const std::function<const char*(const char*)>& getenv,
                              std::vector<std::string>* warnings);

// The output path for this process: `%r` becomes `rank` (the caller passes RANK, or
// "pid<PID>" when unset), `%p` the pid, `%h` the host name, `%%` a percent sign; any other
// character is kept.
std::string ExpandOutputPath(std::string_view pattern, std::string_view rank, int64_t pid, std::string_view host);

// "trace" or "monitor".
const char* TraceModeName(TraceMode mode);

}  // namespace emo::runtime
