// The immutable dependency graph of one rank's trace (BRIEF stage 2).
//
// Nodes are CPU intervals between API calls (fixed duration: a GPU clock does not change CPU
// work), CUDA API calls, and GPU ops. Every node has a start and an end; an edge constrains
// one of them:
//   kEndToStart   start(v) >= end(u) + delay     thread order, stream FIFO, event waits
//   kStartToStart start(v) >= start(u) + delay   launch (API call -> GPU op)
//   kEndToEnd     end(v)   >= end(u) + delay     GPU op -> blocking sync call
// A node's end is max(start + duration, its kEndToEnd constraints): a blocking call's
// duration is its own CPU cost and its wait comes from the edges, never a fixed weight.
//
// Edge delays are set so that replaying the measured durations reproduces the measured
// schedule: of a node's incoming constraints the binding one (latest source) carries the
// observed gap, the others their physical minimum (GraphBuilder documents the rule).
// Results of analyses (durations, start times, slack) live in separate node-indexed vectors.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "emo/base/diagnostics.h"
#include "emo/base/ids.h"
#include "emo/base/units.h"
#include "emo/trace/trace.h"

namespace emo::graph {

using NodeId = Id<struct NodeTag>;

enum class NodeKind : uint8_t {
  kCpuInterval,  // CPU work between two API calls of one thread (fixed duration)
  kApiCall,      // a CUDA runtime/driver call (blocking calls wait through kEndToEnd edges)
  kGpuOp,        // kernel, memcpy or memset on a stream
};
std::string_view NodeKindName(NodeKind k);

enum class EdgeKind : uint8_t {
  kThreadOrder,   // consecutive items of one CPU thread
  kLaunch,        // API call -> the GPU op(s) it launched (one correlation may launch many)
  kStreamOrder,   // FIFO order on one stream
  kEventWait,     // cross-stream: recorded op -> first op enqueued after the wait
  kHostSync,      // GPU op -> blocking API call end
  kCrossThread,   // a thread woken by another thread's call
  kGpuContention, // an op that started only when another stream's op freed the GPU
  kCount
};
std::string_view EdgeKindName(EdgeKind k);

enum class Constraint : uint8_t { kEndToStart, kStartToStart, kEndToEnd };

struct Edge {
  NodeId src;
  NodeId dst;
  EdgeKind kind;
  Constraint constraint;
  TimeNs delay;
};

// Where a GPU op / CPU node lives: a thread (CPU nodes) or a stream (GPU ops).
struct NodeTable {
  std::vector<NodeKind> kind;
  std::vector<uint32_t> ref;       // CpuEventId (API call), GpuOpId, or the preceding API's
                                   // CpuEventId for a CPU interval (invalid at thread start)
  std::vector<uint32_t> resource;  // ThreadId for CPU nodes, StreamId for GPU ops
  std::vector<TimeNs> start;       // measured
  std::vector<TimeNs> end;         // measured
  std::vector<TimeNs> duration;    // measured duration used by replay (own cost for blocking calls)
  std::vector<bool> is_root;       // no predecessors: starts at its measured time
  size_t size() const { return kind.size(); }
};

// The dependency graph. Build it with BuildGraph (graph_builder.h).
class Graph {
 public:
  const NodeTable& nodes() const { return nodes_; }
  size_t num_nodes() const { return nodes_.size(); }
  size_t num_edges() const { return edges_.size(); }
  const std::vector<Edge>& edges() const { return edges_; }
  // Incoming / outgoing edges of v (indices into edges()).
  std::span<const uint32_t> InEdges(NodeId v) const;
  std::span<const uint32_t> OutEdges(NodeId v) const;
  // Nodes in an order where every edge goes forward.
  const std::vector<NodeId>& TopologicalOrder() const { return topo_; }
  // The node of a GPU op / API call, or invalid.
  NodeId NodeOfGpuOp(trace::GpuOpId op) const { return gpu_node_[op.value()]; }
  NodeId NodeOfCpuEvent(trace::CpuEventId ev) const { return cpu_node_[ev.value()]; }
  const trace::Trace& trace() const { return *trace_; }
  // Edge counts per kind and rule outcomes (fallback rules used, edges dropped as inconsistent).
  const Diagnostics& diagnostics() const { return diagnostics_; }
  uint64_t EdgeCount(EdgeKind k) const { return edge_counts_[static_cast<size_t>(k)]; }
  // The median gap between two ops of one stream when the second was already queued
  // (GraphOptions::queued_lead_ns), -1 with fewer than GraphOptions::queued_min_pairs such pairs;
  // and how many pairs the trace has.
  TimeNs queued_stream_gap_ns() const { return queued_stream_gap_ns_; }
  size_t queued_stream_gap_pairs() const { return queued_stream_gap_pairs_; }

 private:
  friend class GraphBuilder;
  const trace::Trace* trace_ = nullptr;
  NodeTable nodes_;
  std::vector<Edge> edges_;
  std::vector<uint32_t> in_offsets_, in_index_, out_offsets_, out_index_;
  std::vector<NodeId> topo_;
  std::vector<NodeId> gpu_node_;  // by GpuOpId
  std::vector<NodeId> cpu_node_;  // by CpuEventId (API calls only)
  Diagnostics diagnostics_;
  TimeNs queued_stream_gap_ns_ = -1;
  size_t queued_stream_gap_pairs_ = 0;
  uint64_t edge_counts_[static_cast<size_t>(EdgeKind::kCount)] = {};
};

}  // namespace emo::graph
