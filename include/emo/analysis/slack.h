// Slack, critical path and per-GPU slack windows over a replayed schedule (BRIEF stage 3).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "emo/analysis/iterations.h"
#include "emo/analysis/replay.h"
#include "emo/graph/graph.h"

namespace emo::analysis {

// Latest finish time of every node such that no node in the window ends after `horizon`.
// Nodes with window[v] == false (outside the analysed iterations) constrain nothing.
// slack(v) = latest_finish[v] - schedule.end[v] (>= 0).
struct SlackResult {
  std::vector<TimeNs> latest_finish;
  std::vector<TimeNs> slack;
};
SlackResult ComputeSlack(const graph::Graph& g, std::span<const TimeNs> durations,
                         const Schedule& s, const std::vector<bool>& window, TimeNs horizon);

enum class PathCategory : uint8_t { kGpuCompute, kCommunication, kCpu, kLaunch, kCount };
// The category a node's own time counts in: GPU compute or communication (NCCL) for GPU ops,
// CPU for the rest.
PathCategory CategoryOf(const graph::Graph& g, graph::NodeId v);

// The critical path ending at `sink`, walked back along binding constraints until `from`.
// It covers [from, until) when every step back finds the constraint that set a node's time;
// where the trace does not say (a thread's first recorded event, an op launched before the
// trace) or the iteration's marker reaches past its last recorded node, the gaps are reported
// with the reason, never hidden.
struct CriticalPath {
  std::vector<graph::NodeId> nodes;  // in time order
  // Time on the path per category (ns): GPU op durations (compute or NCCL communication),
  // CPU intervals and API calls, launch latency and GPU idle gaps on edges.
  TimeNs time[static_cast<size_t>(PathCategory::kCount)] = {};
  // How the walk back ended.
  enum class Stop : uint8_t {
    kComplete,   // it reached `from`
    kRoot,       // at a node with no predecessor in the trace, after `from`
    kNoBinding,  // at a node none of whose constraints set its time (should not happen)
    kExternal,   // at a node whose end was set by its bound from outside the graph (the first
                 // of `nodes`: a collective kernel waiting for another rank)
  };
  Stop stop = Stop::kComplete;
  TimeNs head_gap_ns = 0;  // [from, the path's start): not covered (stop != kComplete)
  TimeNs tail_gap_ns = 0;  // [the sink's end, until): not covered
  TimeNs total() const;    // covered time: the sum over categories
  // Share of the path's time in category c (0..1).
  double Share(PathCategory c) const;
};
// `until` (default: the sink's end) is where the iteration ends; a sink that ends earlier
// leaves a tail gap.
// `end_bounds` are those the schedule was replayed with (Replay), if any: a node whose end one
// of them set ends the walk there (kExternal).
CriticalPath FindCriticalPath(const graph::Graph& g, std::span<const TimeNs> durations,
                              const Schedule& s, graph::NodeId sink, TimeNs from,
                              TimeNs until = INT64_MIN, std::span<const TimeNs> end_bounds = {});
// Why a walk stopped where it did, in words (for reports): names the node and its thread or
// stream.
std::string DescribePathStart(const graph::Graph& g, const CriticalPath& cp);

// HTA-compatible critical path (Holistic Trace Analysis' weighting, for comparing with it) on
// the measured timeline of the nodes in `window`: the longest path where a GPU op weighs its
// duration, a CPU interval only the time inside framework operators (the gaps between
// top-level operators weigh 0), a blocking call 0, a GPU op's launch delay when its stream
// was idle at launch and otherwise the gap after the previous op on its stream (never both),
// and sync edges 0. Sync edges run, as in HTA, from the last op launched on the synced stream(s)
// before the call to the call's end, whether or not that op was still running. The path's
// categories hold HTA's weights, not wall time; EMO's own FindCriticalPath is the one whose
// time adds up to the iteration.
CriticalPath FindHtaCriticalPath(const graph::Graph& g, const std::vector<bool>& window);

// Per device: busy time (union of op intervals) and the part of it where every running op
// has slack above `threshold_ns` (a window where lowering the clock costs no time).
struct GpuSlack {
  int32_t device = 0;
  TimeNs busy_ns = 0;
  TimeNs slack_ns = 0;
  struct Window { TimeNs start, end; };
  std::vector<Window> windows;
};
std::vector<GpuSlack> GpuSlackWindows(const graph::Graph& g, const Schedule& s,
                                      const SlackResult& slack, const std::vector<bool>& window,
                                      TimeNs threshold_ns);

// True for NCCL (communication) kernels, by name.
bool IsCommunicationKernel(std::string_view name);

}  // namespace emo::analysis
