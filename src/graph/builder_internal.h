// Internal state shared by the graph builder's rule files (not a public header).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "emo/graph/graph.h"
#include "emo/graph/graph_builder.h"

namespace emo::graph {

class GraphBuilder {
 public:
  GraphBuilder(const trace::Trace& t, const GraphOptions& o) : t_(t), o_(o) {}
  Result<Graph> Build();

 private:
  // graph_builder.cc
  void AddNodes();
  void AddLaunchEdges();
  void AddStreamOrderEdges();
  // Sets the graph's queued_stream_gap (GraphOptions::queued_lead_ns).
  void MeasureQueuedStreamGap();
  void AddCrossThreadEdges();
  // Cross-thread hand-offs (graph_builder.cc): API calls sorted by end time, the waker of a
  // thread that slept in (lo, hi], and the CPU interval nodes that split at a wake-up.
  void ApiCallsByEnd();
  trace::CpuEventId WakerOf(uint32_t thread, TimeNs lo, TimeNs hi) const;
  // The interval [lo, hi] of `thread` after node `prev`; when it slept and another thread woke
  // it, a wake-up whose end the waker's call constrains.
  NodeId AddInterval(uint32_t thread, NodeId prev, TimeNs lo, TimeNs hi);
  // The thread's recorded work before its first API call.
  NodeId AddLeadingInterval(uint32_t thread, TimeNs lo, TimeNs hi);
  void AddContentionEdges();
  void AssignDelays();
  void BuildAdjacency();
  Status TopologicalSort();
  std::string DescribeCycle(const std::vector<uint32_t>& indegree) const;
  NodeId NewNode(NodeKind kind, uint32_t ref, uint32_t resource, TimeNs start, TimeNs end);
  void AddEdge(NodeId src, NodeId dst, EdgeKind kind, Constraint c, TimeNs min_delay);

  // sync_rules.cc
  // A cudaEventRecord that a wait consumes: when it was called and, when the trace says, the
  // stream it recorded (-1: the last op launched before it on another stream stands in).
  struct EventRecord {
    TimeNs time = -1;
    int64_t stream = -1;
  };
  void AddSyncEdges();
  void AddStreamWaitEdges(uint32_t sync_row);
  // The record an unresolved Stream Wait Event row consumes, and the rule that found it.
  EventRecord FindWaitRecord(uint32_t sync_row, TimeNs wait_time, trace::CpuEventId wait_call,
                             Diag* rule);
  // Record found by FIFO among the cudaEventRecord calls before the wait on its thread.
  EventRecord FifoRecord(const std::vector<uint32_t>& calls,
                         std::vector<uint32_t>::const_iterator pos) const;
  // The cuda_event row of (device, event id) with the largest correlation below `correlation`
  // (Kineto's own pairing), or -1.
  int64_t CudaEventBefore(int32_t device, int64_t event_id, int64_t correlation) const;
  // The start of the API call with that correlation, or `fallback` when it is not in the trace.
  TimeNs CallTime(int64_t correlation, TimeNs fallback) const;
  trace::StreamId StreamOn(int32_t device, int64_t stream) const;
  void AddHostSyncEdgesFromRecords();
  void AddHostSyncEdgesFromCalls();
  // Adds a host-sync edge op -> call when consistent with the measured run; returns whether added.
  bool AddHostSync(trace::GpuOpId op, trace::CpuEventId call);
  NodeId NextOnThread(NodeId api) const;

  // Launch-order lookups.
  // The last op on `stream` launched strictly before time t, or invalid.
  trace::GpuOpId LastLaunchedBefore(trace::StreamId stream, TimeNs t) const;
  // The first op on `stream` launched at or after time t, or invalid.
  trace::GpuOpId FirstLaunchedAfter(trace::StreamId stream, TimeNs t) const;
  trace::CpuEventId ApiByCorrelation(int64_t correlation) const;
  std::string_view ApiName(trace::CpuEventId ev) const { return t_.Name(t_.cpu.name[ev.value()]); }

  const trace::Trace& t_;
  GraphOptions o_;
  Graph g_;

  std::unordered_map<int64_t, uint32_t> api_by_corr_;
  std::vector<TimeNs> launch_time_;                       // by GpuOpId
  std::vector<trace::CpuEventId> launcher_;               // by GpuOpId
  std::vector<std::vector<uint32_t>> stream_ops_;         // by StreamId: ops in launch order
  std::vector<std::vector<TimeNs>> stream_launch_times_;  // parallel to stream_ops_
  std::vector<std::vector<uint32_t>> thread_api_;         // by ThreadId: API calls in order
  std::vector<std::vector<trace::StreamId>> device_streams_;  // by device index
  std::unordered_map<uint32_t, uint32_t> next_on_thread_;    // API node -> following interval
  std::vector<std::vector<TimeNs>> points_;                  // RecordedCpuPoints, by ThreadId
  std::vector<uint32_t> calls_by_end_;                       // API CpuEventIds by end time
  std::vector<TimeNs> call_ends_;                            // parallel to calls_by_end_
  struct Wake {
    NodeId woken;              // the interval that slept (end constraint) or starts (start constraint)
    trace::CpuEventId waker;   // the other thread's call that woke it
    Constraint constraint;     // kEndToEnd: an interval that slept; kEndToStart: a thread's first work
  };
  std::vector<Wake> wakes_;

  // Event-wait pairing state (sync_rules.cc).
  std::map<std::pair<int32_t, int64_t>, std::vector<uint32_t>> cuda_events_by_id_;  // by corr
  std::vector<std::vector<uint32_t>> records_before_;  // by thread, parallel to thread_api_:
                                                       // cudaEventRecord calls before each call
  struct IdWait {
    uint32_t records_before = 0;  // records the thread had called by that wait
    EventRecord record;           // what it consumed
  };
  std::map<std::pair<uint32_t, int64_t>, IdWait> last_wait_by_id_;  // (thread, event id)
  std::unordered_set<uint32_t> repeat_waits_;  // wait calls that consumed no new record
};

}  // namespace emo::graph
