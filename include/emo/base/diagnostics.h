// Per-event problems, counted in one declared table (STYLE §7): a malformed or surprising event
// is never fatal; it increments a named counter that the user sees in `analyze --json`.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace emo {

enum class Severity : uint8_t { kInfo, kWarning, kError };
std::string_view SeverityName(Severity s);

// Every diagnostic EMO can count. Add new ones here and in kDiagnosticSpecs (diagnostics.cc).
enum class Diag : uint16_t {
  kJsonEventSkipped,          // an element of traceEvents that is not an object or lacks ph
  kEventMissingField,         // an X event without ts / dur / name
  kBadTimestamp,              // ts or dur not a number
  kNegativeDuration,          // dur < 0 (clamped to 0)
  kGpuOpDropped,              // a kernel/memcpy/memset event dropped: missing or unreadable ts/dur
  kUnknownCategory,           // cat not handled (counted, ignored)
  kPythonFunctionIgnored,     // python_function events (with_stack) are not graph nodes
  kCudaEventIgnored,          // cuda_event record without event_id, correlation or device
  kGpuOpMissingStream,        // kernel/memcpy/memset without args.stream or args.device
  kGpuOpMissingCorrelation,   // GPU op without a correlation id
  kGpuOpUnlaunched,           // GPU op whose correlation names no runtime/driver call
  kLaunchUnmatched,           // launch API call with no GPU op (op outside the trace window)
  kNegativeLaunchLatency,     // GPU op starts before its launch call (clock skew; clamped)
  kStreamOverlap,             // two ops on one stream overlap in time (clamped to FIFO)
  kCpuOverlapNotNested,       // CPU events on one thread overlap without nesting
  kSyncUnresolved,            // cuda_sync with wait_on_* = -1 (CUDA >= 12.9 Kineto)
  kWaitEdgeExact,             // cross-stream edge from resolved wait_on_* fields
  kWaitEdgeEventId,           // unresolved wait paired by event id with a cuda_event record
  kWaitEdgeEventIdRepeat,     // same event id as an earlier wait of the thread, no record between
  kWaitEdgeRecordPair,        // fallback rule (a): cudaEventRecord on the same thread, FIFO
  kWaitEdgeLastLaunch,        // fallback rule (a'): last op launched on another stream
  kWaitEdgeNone,              // stream wait with no source found (no edge made)
  kWaitEdgeIdleStream,        // exact record on a stream with nothing launched before it: no edge
  kSyncEdgeContext,           // device sync → every stream's last op
  kSyncEdgeStream,            // stream sync → the stream's last op
  kSyncEdgeEvent,             // event sync → the recorded op
  kSyncEdgeBlockingCall,      // blocking call without a sync record (memcpy, item())
  kGpuContentionEdge,         // an op waited for another stream's op to free the GPU
  kContentionEdgeDropped,     // a contention edge that would close a cycle
  kCudaGraphKernels,          // kernels launched by cudaGraphLaunch (one correlation, many)
  kCollectiveKernels,         // NCCL kernels with collective metadata
  kFlowMismatch,              // ac2g flow disagrees with the correlation join
  kIterationMarkerMissing,    // no ProfilerStep/regex marker: the whole trace is one iteration
  kIterationPartial,          // iteration cut by the trace window
  kCpuBoundOnlyWhenTraced,    // CPU-bound as traced, GPU-bound once the profiler's overhead is undone
  kIterationTooShort,         // the steady iteration is too short to analyse meaningfully
  kTraceTruncated,            // an EMO trace that ends before the writer's end chunk
  kRecordsDropped,            // activity records the tracer lost (CUPTI or its buffer pool)
  kEmoRecordSkipped,          // an EMO trace record of an unknown type, a bad size or a time outside [0, 2^62] ns
  kDuplicateEvent,            // a GPU op or API call identical to an earlier one (dropped)
  kCount
};

struct DiagnosticSpec {
  Diag id;
  std::string_view name;
  Severity severity;
  std::string_view description;
};

const DiagnosticSpec& SpecOf(Diag d);

// Counters of one run (one trace file or one analysis), indexed by Diag.
class Diagnostics {
 public:
  void Add(Diag d, uint64_t n = 1) { counts_[static_cast<size_t>(d)] += n; }
  uint64_t Count(Diag d) const { return counts_[static_cast<size_t>(d)]; }
  void Merge(const Diagnostics& other);

  struct Row {
    std::string_view name;
    Severity severity;
    uint64_t count;
    std::string_view description;
  };
  // Non-zero counters, in declaration order.
  std::vector<Row> Rows() const;

 private:
  std::array<uint64_t, static_cast<size_t>(Diag::kCount)> counts_{};
};

}  // namespace emo
