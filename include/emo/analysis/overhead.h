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
// an API call, 1 (the runtime/driver record itself). GPU ops: 0. `total` counts both kinds.
struct ProfilerEventCounts {
  std::vector<double> per_node;
  double total = 0;     // over all nodes
};
ProfilerEventCounts CountProfilerEvents(const graph::Graph& g);

// How the per-event cost was obtained.
enum class OverheadSource { kOff, kStepTime, kCalibration, kTraceEstimate };
std::string_view OverheadSourceName(OverheadSource s);

struct OverheadModel {
  double per_event_ns = 0;       // profiler cost per recorded operator event (enter+exit)
  double per_api_ns = 0;         // profiler cost per recorded CUDA API call (CUPTI record)
  double floor_fraction = 0.25;  // a CPU interval keeps at least this share of its traced time
  OverheadSource source = OverheadSource::kOff;
  std::string note;              // e.g. which calibration, or why it is uncertain
};

// Unprofiled cost of a CUDA API call, the floor its corrected duration never goes below:
// known cheap calls (launches ~2 us, queries ~0.1 us; an assumption from typical unprofiled
// timings on Hopper, see docs/overhead.md); other calls keep floor_fraction of their time.
TimeNs ApiCallFloorNs(std::string_view name, TimeNs traced, double floor_fraction);

// Durations with every CPU interval shrunk by per_event_ns x its operator events and every API
// call by per_api_ns, floors applied; GPU durations unchanged.
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
// The (per_event_ns, per_api_ns) minimising the squared log error of the corrected steady
// iteration times against the samples' unprofiled times: a grid over both, then a finer grid
// around the best point. With one sample the problem is underdetermined: per_api_ns is then
// held at `base.per_api_ns` and only per_event_ns is fitted.
OverheadModel FitOverhead(const std::vector<CalibrationSample>& samples, const OverheadModel& base);

}  // namespace emo::analysis
