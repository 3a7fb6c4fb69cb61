#include "emo/base/diagnostics.h"

#include "emo/base/check.h"

namespace emo {
namespace {

constexpr std::array<DiagnosticSpec, static_cast<size_t>(Diag::kCount)> kDiagnosticSpecs = {{
    {Diag::kJsonEventSkipped, "json_event_skipped", Severity::kWarning,
     "traceEvents element that is not an object or has no 'ph'"},
    {Diag::kEventMissingField, "event_missing_field", Severity::kWarning,
     "complete event without ts, dur or name; skipped"},
    {Diag::kBadTimestamp, "bad_timestamp", Severity::kWarning,
     "ts or dur is not a number; event skipped"},
    {Diag::kNegativeDuration, "negative_duration", Severity::kWarning,
     "dur < 0; clamped to 0"},
    {Diag::kGpuOpDropped, "gpu_op_dropped", Severity::kError,
     "kernel/memcpy/memset event with a missing or unreadable ts or dur (a string, NaN, ...): left out of the "
     "graph, so the GPU work it stood for is missing"},
    {Diag::kUnknownCategory, "unknown_category", Severity::kInfo,
     "event category EMO does not use; ignored"},
    {Diag::kPythonFunctionIgnored, "python_function_ignored", Severity::kInfo,
     "python_function events (with_stack) are not graph nodes"},
    {Diag::kCudaEventIgnored, "cuda_event_ignored", Severity::kInfo,
     "cuda_event record (Kineto >= 2025-11) without event_id, correlation or device; skipped"},
    {Diag::kGpuOpMissingStream, "gpu_op_missing_stream", Severity::kError,
     "GPU op without args.device/args.stream; skipped"},
    {Diag::kGpuOpMissingCorrelation, "gpu_op_missing_correlation", Severity::kWarning,
     "GPU op without a correlation id; placed on its stream only"},
    {Diag::kGpuOpUnlaunched, "gpu_op_unlaunched", Severity::kWarning,
     "GPU op whose launch call is not in the trace; ordered by its stream only"},
    {Diag::kLaunchUnmatched, "launch_unmatched", Severity::kInfo,
     "launch call whose GPU op is not in the trace window"},
    {Diag::kNegativeLaunchLatency, "negative_launch_latency", Severity::kInfo,
     "GPU op starts before its launch call returns/starts (clock skew); latency clamped to 0"},
    {Diag::kStreamOverlap, "stream_overlap", Severity::kInfo,
     "consecutive ops on one stream overlap; replay keeps FIFO order"},
    {Diag::kCpuOverlapNotNested, "cpu_overlap_not_nested", Severity::kInfo,
     "CPU events on one thread overlap without nesting"},
    {Diag::kSyncUnresolved, "sync_unresolved", Severity::kWarning,
     "cuda_sync wait with wait_on_stream = -1 (CUDA >= 12.9 Kineto); fallback rules used"},
    {Diag::kWaitEdgeExact, "wait_edge_exact", Severity::kInfo,
     "cross-stream edge from resolved wait_on_stream / record correlation"},
    {Diag::kWaitEdgeEventId, "wait_edge_event_id", Severity::kInfo,
     "unresolved wait paired by its event id with the cuda_event record of that id (its "
     "cudaEventRecord call and recorded stream)"},
    {Diag::kWaitEdgeEventIdRepeat, "wait_edge_event_id_repeat", Severity::kInfo,
     "unresolved wait on the event id of an earlier wait of its thread, no cudaEventRecord "
     "called between: the same record"},
    {Diag::kWaitEdgeRecordPair, "wait_edge_record_pair", Severity::kInfo,
     "fallback (a): no record carries an event id; wait paired with the cudaEventRecord calls "
     "before it on the same thread, first in first out"},
    {Diag::kWaitEdgeLastLaunch, "wait_edge_last_launch", Severity::kInfo,
     "fallback (a'): source = last op launched on another stream before the wait"},
    {Diag::kWaitEdgeNone, "wait_edge_none", Severity::kWarning,
     "stream wait whose source could not be found; no edge"},
    {Diag::kWaitEdgeIdleStream, "wait_edge_idle_stream", Severity::kInfo,
     "stream wait on an event recorded (exactly known) on a stream that had nothing launched "
     "before the record in the trace: nothing to wait for, no edge"},
    {Diag::kSyncEdgeContext, "sync_edge_context", Severity::kInfo,
     "device/context sync waits for the last op of every stream"},
    {Diag::kSyncEdgeStream, "sync_edge_stream", Severity::kInfo,
     "stream sync waits for the stream's last launched op"},
    {Diag::kSyncEdgeEvent, "sync_edge_event", Severity::kInfo,
     "event sync waits for the recorded op"},
    {Diag::kSyncEdgeBlockingCall, "sync_edge_blocking_call", Severity::kInfo,
     "blocking call without a sync record (synchronous memcpy, value read) waits for its op"},
    {Diag::kGpuContentionEdge, "gpu_contention_edge", Severity::kInfo,
     "an op started only when an op of another stream ended (SMs shared): edge between them"},
    {Diag::kContentionEdgeDropped, "contention_edge_dropped", Severity::kInfo,
     "a contention edge that would have closed a cycle (clock skew); dropped"},
    {Diag::kCudaGraphKernels, "cuda_graph_kernels", Severity::kInfo,
     "kernels launched by cudaGraphLaunch (one correlation, many kernels)"},
    {Diag::kCollectiveKernels, "collective_kernels", Severity::kInfo,
     "NCCL kernels carrying collective metadata"},
    {Diag::kFlowMismatch, "flow_mismatch", Severity::kInfo,
     "ac2g flow endpoint disagrees with the correlation join"},
    {Diag::kIterationMarkerMissing, "iteration_marker_missing", Severity::kWarning,
     "no iteration marker matched; the whole trace is one iteration"},
    {Diag::kIterationPartial, "iteration_partial", Severity::kInfo,
     "iteration cut by the trace window; not used for the steady state"},
    {Diag::kCpuBoundOnlyWhenTraced, "cpu_bound_only_when_traced", Severity::kWarning,
     "the traced critical path is mostly CPU, the corrected one is not: the GPU idled waiting for "
     "launches the profiler slowed; slack seen in the raw trace is not in the real run"},
    {Diag::kIterationTooShort, "iteration_too_short", Severity::kError,
     "the steady iteration lasts under 10 us: shorter than clock-switch and measurement resolution; what-if "
     "and planning are refused"},
    {Diag::kTraceTruncated, "trace_truncated", Severity::kWarning,
     "the EMO trace ends early (program killed, crashed or disk full): read up to its last whole chunk"},
    {Diag::kRecordsDropped, "records_dropped", Severity::kError,
     "activity records the tracer lost (CUPTI's buffers or EMO's buffer pool were full): the graph misses "
     "events; raise EMO_TRACE_BUFFER_MIB or trace fewer iterations"},
    {Diag::kEmoRecordSkipped, "emo_record_skipped", Severity::kInfo,
     "EMO trace records of a type this reader does not know (a newer writer), or damaged (a size past "
     "their chunk, a time before the clock's epoch or past 2^62 ns), skipped"},
    {Diag::kDuplicateEvent, "duplicate_event", Severity::kWarning,
     "a GPU op or CUDA API call identical to an earlier one (same correlation, times, name, stream or thread: "
     "the same event written twice, as when traces are concatenated); the copy is dropped"},
}};

constexpr bool SpecsInOrder() {
  for (size_t i = 0; i < kDiagnosticSpecs.size(); ++i) {
    if (static_cast<size_t>(kDiagnosticSpecs[i].id) != i) return false;
  }
  return true;
}
static_assert(SpecsInOrder(), "kDiagnosticSpecs must follow the Diag enum order");

}  // namespace

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

const DiagnosticSpec& SpecOf(Diag d) {
  EMO_CHECK(d < Diag::kCount);
  return kDiagnosticSpecs[static_cast<size_t>(d)];
}

void Diagnostics::Merge(const Diagnostics& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

std::vector<Diagnostics::Row> Diagnostics::Rows() const {
  std::vector<Row> rows;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] == 0) continue;
    const auto& s = kDiagnosticSpecs[i];
    rows.push_back({s.name, s.severity, counts_[i], s.description});
  }
  return rows;
}

}  // namespace emo
