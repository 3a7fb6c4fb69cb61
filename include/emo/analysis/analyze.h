// The library entry points behind `emo analyze` and `emo whatif`: read a trace, build its
// graph, replay, find iterations, slack, the critical path and per-GPU slack windows.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/iterations.h"
#include "emo/analysis/overhead.h"
#include "emo/analysis/replay.h"
#include "emo/analysis/slack.h"
#include "emo/analysis/whatif.h"
#include "emo/base/status.h"
#include "emo/graph/graph_builder.h"
#include "emo/trace/reader.h"
#include "emo/trace/trace.h"

namespace emo::analysis {

// Profiler-overhead correction: auto = on for PyTorch-profiler traces (the CPU speed gauge
// under a calibration for the trace's profiler configuration, or a fit to `step_time_ns`).
struct OverheadOptions {
  enum class Mode { kAuto, kOff } mode = Mode::kAuto;
  TimeNs step_time_ns = -1;       // measured unprofiled step time: fit the CPU scale to it
  // Measured unprofiled step times per trace (LoadStepTimes), looked up by the trace's path as
  // given, then by its file name; used when step_time_ns is not set.
  std::map<std::string, TimeNs> step_times_ns;
  // From `emo calibrate-overhead --out` (LoadOverheadCalibration); none: the shipped one.
  std::optional<OverheadCalibration> calibration;
  // When a measured step is shorter than the trace's GPU work allows, shorten the communication
  // kernels to fit it (OverheadModel::comm_scale). Off for the ranks of a job read together: the
  // joint replay bounds each collective by its peers' arrivals instead (joint_replay.h).
  bool fit_collective_waits = true;
};

struct AnalyzeOptions {
  std::string iteration_regex;          // "" = ^ProfilerStep#\d+$
  TimeNs slack_threshold_ns = 20'000;   // a GPU slack window needs every op above this (ns)
  OverheadOptions overhead;
  graph::GraphOptions graph;
};

// Everything known about one analysed trace. Owns its trace and graph.
struct TraceAnalysis {
  std::unique_ptr<trace::Trace> trace;
  std::unique_ptr<graph::Graph> graph;
  IterationMap iterations;
  std::vector<TimeNs> traced_durations;  // measured, per node
  std::vector<TimeNs> cpu_floors;        // CpuFloorsNs: what the overhead correction keeps
  Schedule measured;                     // the trace's own times
  Schedule replayed;                     // identity replay of the traced durations
  std::vector<TimeNs> measured_times, replayed_times;  // per iteration
  size_t steady = 0;              // index of the steady-state (median) iteration
  // The timeline analyses and plans use: corrected for profiler overhead when on.
  OverheadModel overhead;         // source kOff: the traced timeline
  std::vector<TimeNs> durations;  // per node, on that timeline
  Schedule timeline;              // replay of `durations`
  std::vector<TimeNs> timeline_times;  // per iteration
  // The steady iteration replayed at both ends of the correction's band (equal to the
  // corrected time when the correction is off or fitted to a measured step time).
  TimeNs corrected_lo_ns = 0, corrected_hi_ns = 0;
  std::vector<bool> window;       // nodes inside the analysed iterations
  TimeNs horizon = 0;             // end of the last iteration on the timeline
  SlackResult slack;
  CriticalPath steady_path;       // critical path of the steady iteration
  CriticalPath window_path;       // critical path of the whole window (for flags)
  std::vector<GpuSlack> gpus;
  bool profiler_trace = false;    // a PyTorch-profiler trace (recorded operators)

  TimeNs measured_ns() const { return measured_times[steady]; }
  TimeNs replayed_ns() const { return replayed_times[steady]; }
  // Steady iteration on the analysis timeline (corrected when the correction is on).
  TimeNs timeline_ns() const { return timeline_times[steady]; }
  bool corrected() const { return overhead.source != OverheadSource::kOff; }
  // Whether the corrected timeline has a band of plausible CPU scales around it.
  bool HasBand() const {
    return overhead.source == OverheadSource::kCalibration && (overhead.band_lo != 1 || overhead.band_hi != 1);
  }
  double replay_error_pct() const;
  Diagnostics AllDiagnostics() const;  // trace + graph
};

// How far to trust the analysis timeline: the overhead correction's confidence when it is on;
// "high" for a trace with no profiler overhead to undo; "low" for a profiler trace whose
// correction was turned off (its CPU time includes the profiler's own).
struct TimelineConfidence {
  std::string level;  // "high" | "medium" | "low"
  std::string note;
};
TimelineConfidence ConfidenceOf(const TraceAnalysis& a);

// Node durations with the CPU scale at `factor` x the correction's (one end of its band).
std::vector<TimeNs> BandDurations(const TraceAnalysis& a, double factor);

// A part of the steady iteration its critical path does not cover, and why.
struct PathGap {
  std::string where;   // "start" or "end" of the iteration
  TimeNs ns = 0;
  std::string reason;
};
std::vector<PathGap> CriticalPathGaps(const TraceAnalysis& a);
void to_json(nlohmann::json& j, const PathGap& g);

// Below this, a steady iteration is too short for what-ifs and plans: clock switches and
// energy counters are far coarser, and its times are timer jitter.
inline constexpr TimeNs kMinIterationNs = 10'000;
// InvalidArgument when the steady iteration is shorter than kMinIterationNs (naming the
// trace, the iteration and its length), Ok otherwise. `what` says what was refused.
Status CheckIterationLength(const TraceAnalysis& a, std::string_view what);

// Reads and analyses one trace file.
Result<TraceAnalysis> AnalyzeTrace(const std::string& path, const AnalyzeOptions& options);
// Analyses a trace already in memory (tests build small traces by hand).
Result<TraceAnalysis> AnalyzeTrace(trace::Trace trace, const AnalyzeOptions& options);
// Reads and analyses one of the traces trace::ExpandTraceInputs found.
Result<TraceAnalysis> AnalyzeTrace(trace::TraceSource source, const AnalyzeOptions& options);

// One GPU's energy as an EMO trace measured it (trace::GpuEnergy): the object of `emo analyze`'s
// `measured_energy.gpus[]` and of `emo trace --json`'s `traces[].gpus[]`; energies null where
// the counter reads do not cover the window.
nlohmann::json GpuEnergyToJson(const trace::GpuEnergy& g);

// The `emo analyze` JSON object of one analysis (BRIEF contract fields and more).
nlohmann::json AnalysisToJson(const TraceAnalysis& a);
// The job-level JSON of several ranks: per-trace objects under "traces" and job summary fields.
nlohmann::json AnalysesToJson(const std::vector<TraceAnalysis>& all);

// One trace's share of AnalysesToJson's output: its JSON and what the job summary takes from it
// (the form in which several processes gather their traces' results).
struct TraceJsonPart {
  nlohmann::json json;  // AnalysisToJson
  size_t iterations = 0;
  TimeNs measured_ns = 0, replayed_ns = 0;
  size_t nodes = 0, edges = 0;
  Diagnostics diagnostics;
};
TraceJsonPart TraceJsonPartOf(const TraceAnalysis& a);
// AnalysesToJson from the parts, in input order.
nlohmann::json CombineTraceJsons(std::vector<TraceJsonPart> parts);

// What-if of one analysed trace: iteration time of the steady iteration under scaled durations.
struct WhatIfResult {
  TimeNs baseline_ns = 0;   // the steady iteration on the analysis timeline
  TimeNs whatif_ns = 0;     // replay with the rules applied
  std::vector<size_t> matched;  // GPU ops matched per rule
  std::vector<TimeNs> whatif_times;  // per iteration
  // The change (%) at the timeline and at both ends of the overhead correction's band:
  // {least, most}; equal to the timeline's change when there is no band.
  double change_pct = 0;
  std::array<double, 2> change_range_pct{};
};
Result<WhatIfResult> RunWhatIf(const TraceAnalysis& a, const std::vector<ScaleRule>& rules);

}  // namespace emo::analysis
