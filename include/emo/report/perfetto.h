// Perfetto-loadable output (Chrome trace JSON) of analysed traces: each rank on its analysis
// timeline, with its CPU threads, iterations, GPU ops, slack and the critical path.
#pragma once

#include <span>
#include <string>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"

namespace emo::report {

struct PerfettoOptions {
  // Nodes of the analysed iterations with less slack than this are marked near-critical
  // (category "near_critical"); `emo analyze --slack-threshold-us` sets it.
  TimeNs near_critical_slack_ns = 20'000;
};

// The Chrome-trace JSON (ui.perfetto.dev loads it) of analysed traces, one per rank. Every
// time written for a rank comes from one schedule, its analysis timeline
// (TraceAnalysis::timeline: corrected for profiler overhead when the correction is on, else the
// traced replay), the one its slack and critical path are computed on. Per rank:
//  - process "rank R CPU": an "iterations" track (bounds from analysis::IterationEnds on the
//    timeline; the steady one carries the critical-path breakdown), a "critical path" track,
//    and per thread a track of its recorded CPU operators and annotations (measured times
//    mapped with analysis::MapOnThread, kScale) and one of its graph nodes (API calls, CPU work);
//  - process "rank R GPU D": a track per stream with the GPU ops, a "slack windows" track
//    (TraceAnalysis::gpus) and a counter of the smallest slack among the running ops.
// Node slices carry args {node, iteration, critical, slack_us}; critical-path nodes have
// category "<kind>,critical" and are joined by flow events, nodes with less slack than
// `near_critical_slack_ns` "<kind>,near_critical". Process names and the top-level
// "otherData" say which timeline each rank is on. ts and dur are microseconds with a
// nanosecond fraction, ts counted from otherData.origin_ns. Recorded CPU events of threads
// without CUDA calls are not in the graph, have no place on the timeline and are left out
// (counted in otherData). Flat tracks whose slices overlap spill into extra lanes.
std::string PerfettoJson(std::span<const analysis::TraceAnalysis> ranks, const PerfettoOptions& options = {});

// Writes PerfettoJson(ranks, options) to `path`.
Status WritePerfetto(std::span<const analysis::TraceAnalysis> ranks, const std::string& path,
                     const PerfettoOptions& options = {});

}  // namespace emo::report
