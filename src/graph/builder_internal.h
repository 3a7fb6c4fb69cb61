// Internal state shared by the graph builder's rule files (not a public header).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
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
  void AddSyncEdges();
  void AddStreamWaitEdges(uint32_t sync_row);
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
};

}  // namespace emo::graph
