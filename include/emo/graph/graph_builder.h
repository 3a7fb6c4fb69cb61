// Builds the dependency Graph of one rank's Trace (BRIEF stage 2; research §7).
#pragma once

#include "emo/base/status.h"
#include "emo/graph/graph.h"
#include "emo/trace/trace.h"

namespace emo::graph {

// Tunables of the graph rules. Each is a physical minimum used for constraints that were not
// binding in the measured run (the binding constraint of a node always carries its observed gap).
struct GraphOptions {
  // Minimum launch latency, API call start -> GPU op start, when the stream is idle (ns).
  TimeNs launch_latency_floor_ns = 2000;
  // The GPU's own gap between two ops of one stream when the second was already queued (its
  // launch call ended at least `queued_lead_ns` before the first op ended): measured per trace
  // as the median over its queued pairs, when it has at least `queued_min_pairs` of them
  // (Graph::queued_stream_gap_ns). Reported only: a non-binding stream-order edge still has no
  // minimum delay, so a replay in which a slower op makes the next one wait starts it at once.
  TimeNs queued_lead_ns = 10000;
  size_t queued_min_pairs = 20;
  // Minimum CPU cost of a blocking call that had to wait (ns); its wait comes from edges.
  TimeNs blocking_call_floor_ns = 2000;
  // A sync edge whose source ends later than this after the blocking call returned is
  // inconsistent with the measured run and dropped (clock skew tolerance, ns).
  TimeNs skew_tolerance_ns = 1000;
  // A thread that recorded nothing for longer than this slept: when an API call of another
  // thread ended meanwhile, the latest such call woke it and a cross-thread edge joins them
  // (a thread's first recorded work, likewise, follows the last call of another thread) (ns).
  TimeNs cross_thread_idle_ns = 50000;
  // A GPU op that started more than `contention_gap_ns` after all its dependencies were met,
  // within `contention_window_ns` after an op of another stream on the same device ended (or
  // while that op was in the last `contention_tail_fraction` of its run), waited for that op
  // to free the SMs: a contention edge joins them.
  TimeNs contention_gap_ns = 5000;
  TimeNs contention_window_ns = 20000;
  double contention_tail_fraction = 0.2;
};

// Builds the graph. The Trace must outlive the Graph (the graph refers to its tables).
// Fails only on a trace the graph cannot represent (e.g. a ROCm trace: kUnsupported).
Result<Graph> BuildGraph(const trace::Trace& trace, const GraphOptions& options = {});

}  // namespace emo::graph
