// The library entry points behind `emo analyze` and `emo whatif`: read a trace, build its
// graph, replay, find iterations, slack, the critical path and per-GPU slack windows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "emo/analysis/iterations.h"
#include "emo/analysis/replay.h"
#include "emo/analysis/slack.h"
#include "emo/analysis/whatif.h"
#include "emo/base/status.h"
#include "emo/graph/graph_builder.h"
#include "emo/trace/trace.h"

namespace emo::analysis {

struct AnalyzeOptions {
  std::string iteration_regex;          // "" = ^ProfilerStep#\d+$
  TimeNs slack_threshold_ns = 20'000;   // a GPU slack window needs every op above this (ns)
  graph::GraphOptions graph;
};

// Everything known about one analysed trace. Owns its trace and graph.
struct TraceAnalysis {
  std::unique_ptr<trace::Trace> trace;
  std::unique_ptr<graph::Graph> graph;
  IterationMap iterations;
  std::vector<TimeNs> durations;  // measured, per node
  Schedule measured;              // the trace's own times
  Schedule replayed;              // identity replay
  std::vector<TimeNs> measured_times, replayed_times;  // per iteration
  size_t steady = 0;              // index of the steady-state (median) iteration
  std::vector<bool> window;       // nodes inside the analysed iterations
  TimeNs horizon = 0;             // replayed end of the last iteration
  SlackResult slack;
  CriticalPath steady_path;       // critical path of the steady iteration
  CriticalPath window_path;       // critical path of the whole window (for flags)
  std::vector<GpuSlack> gpus;

  TimeNs measured_ns() const { return measured_times[steady]; }
  TimeNs replayed_ns() const { return replayed_times[steady]; }
  double replay_error_pct() const;
  Diagnostics AllDiagnostics() const;  // trace + graph
};

// Reads and analyses one trace file.
Result<TraceAnalysis> AnalyzeTrace(const std::string& path, const AnalyzeOptions& options);

// The `emo analyze` JSON object of one analysis (BRIEF contract fields and more).
nlohmann::json AnalysisToJson(const TraceAnalysis& a);
// The job-level JSON of several ranks: per-trace objects under "traces" and job summary fields.
nlohmann::json AnalysesToJson(const std::vector<TraceAnalysis>& all);

// What-if of one analysed trace: iteration time of the steady iteration under scaled durations.
struct WhatIfResult {
  TimeNs baseline_ns = 0;   // identity replay of the steady iteration
  TimeNs whatif_ns = 0;     // replay with the rules applied
  std::vector<size_t> matched;  // GPU ops matched per rule
  std::vector<TimeNs> whatif_times;  // per iteration
};
Result<WhatIfResult> RunWhatIf(const TraceAnalysis& a, const std::vector<ScaleRule>& rules);

}  // namespace emo::analysis
