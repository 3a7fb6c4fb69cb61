// Undoing the PyTorch profiler's own overhead (issue Order 2): a traced CPU timeline is longer
// than the real one because the profiler spends time on every event it records (operator
// enter/exit, runtime call; more with record_shapes). EMO shrinks every CPU node by a cost per
// recorded event inside it, never below a physical floor, keeps GPU durations, and replays.
#pragma once

#include <string>
#include <vector>

#include "emo/analysis/iterations.h"
#include "emo/analysis/replay.h"
#include "emo/base/status.h"
#include "emo/graph/graph.h"

namespace emo::analysis {

// Recorded profiler events per graph node: for a CPU interval, the enter and exit points of
// cpu_op / user_annotation events inside it (each counts 1/2: an operator is one event); for
// an API call, 1 (the runtime/driver record itself). GPU ops: 0.
struct ProfilerEventCounts {
  std::vector<double> per_node;
  double total = 0;     // over all nodes
};
ProfilerEventCounts CountProfilerEvents(const graph::Graph& g);

// How the per-event cost was obtained.
enum class OverheadSource { kOff, kStepTime, kCalibration, kTraceEstimate };
std::string_view OverheadSourceName(OverheadSource s);

struct OverheadModel {
  double per_event_ns = 0;       // profiler cost per recorded event
  double floor_fraction = 0.25;  // a CPU node keeps at least this share of its traced time
  TimeNs api_floor_ns = 1000;    // and an API call at least this (a launch costs ~1-3 us)
  OverheadSource source = OverheadSource::kOff;
  std::string note;              // e.g. which calibration, or why it is uncertain
};

// Durations with every CPU node shrunk by per_event_ns x its recorded events (floors apply).
std::vector<TimeNs> CorrectedDurations(const graph::Graph& g, const std::vector<TimeNs>& traced,
                                       const ProfilerEventCounts& counts, const OverheadModel& m);

// The steady iteration's time under a per-event cost (replay of the corrected durations).
TimeNs CorrectedIterationTime(const graph::Graph& g, const IterationMap& it, size_t steady,
                              const std::vector<TimeNs>& traced, const ProfilerEventCounts& counts,
                              const OverheadModel& m);

// Per-event cost estimated from the trace alone: the typical spacing of back-to-back trivial
// operators (the 10th percentile of the time between consecutive cpu_op starts on a thread,
// minus the unprofiled cost of a trivial op) — a rough prior, marked as such.
OverheadModel EstimateFromTrace(const graph::Graph& g, bool record_shapes);

// Shipped calibrations per profiler configuration (fitted on ../shared/traces/h200/overhead,
// see BENCHMARKS.md); `record_shapes` selects the configuration.
OverheadModel ShippedCalibration(bool record_shapes);

// One calibration sample: a traced run and its measured unprofiled step time.
struct CalibrationSample {
  const graph::Graph* graph;
  const IterationMap* iterations;
  size_t steady;
  const std::vector<TimeNs>* traced;
  const ProfilerEventCounts* counts;
  TimeNs unprofiled_ns;
};
// The per-event cost minimising the squared log error of the corrected steady iteration time
// against the unprofiled times of the samples (golden-section search on [0, max_ns]).
double FitPerEventNs(const std::vector<CalibrationSample>& samples, const OverheadModel& base,
                     double max_ns = 20000);

}  // namespace emo::analysis
