#include "emo/analysis/analyze.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "emo/trace/reader.h"

namespace emo::analysis {

using graph::NodeId;
using graph::NodeKind;

double TraceAnalysis::replay_error_pct() const {
  if (measured_ns() <= 0) return 0.0;
  return 100.0 * std::abs(static_cast<double>(replayed_ns() - measured_ns())) /
         static_cast<double>(measured_ns());
}

Diagnostics TraceAnalysis::AllDiagnostics() const {
  Diagnostics d = trace->diagnostics;
  d.Merge(graph->diagnostics());
  return d;
}

namespace {

// The node that ends iteration i under schedule s (latest end among its calls and GPU ops).
NodeId IterationSink(const TraceAnalysis& a, const Schedule& s, size_t i) {
  const auto& n = a.graph->nodes();
  NodeId best;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (a.iterations.node_iteration[v] != static_cast<int32_t>(i) || n.kind[v] == NodeKind::kCpuInterval) continue;
    if (!best.valid() || s.end[v] > s.end[best.value()]) best = NodeId(v);
  }
  return best;
}

// The critical path of the steady iteration under schedule `s` of `durations`.
CriticalPath SteadyCriticalPath(const TraceAnalysis& a, std::span<const TimeNs> durations, const Schedule& s) {
  const NodeId sink = IterationSink(a, s, a.steady);
  if (!sink.valid()) return {};
  const auto bounds = BoundsOf(*a.graph, a.iterations, s, a.steady);
  return FindCriticalPath(*a.graph, durations, s, sink, bounds.start);
}

// A PyTorch-profiler trace: Kineto JSON with recorded operators.
bool IsProfilerTrace(const trace::Trace& t) {
  if (t.meta.format != "kineto-json") return false;
  for (auto k : t.cpu.kind) {
    if (k == trace::CpuKind::kOp) return true;
  }
  return false;
}

Result<OverheadModel> ChooseOverheadModel(const TraceAnalysis& a, const OverheadOptions& o) {
  if (o.mode == OverheadOptions::Mode::kOff) return OverheadModel{};
  if (o.per_event_ns >= 0) {
    OverheadModel m = ShippedCalibration(a.trace->meta.record_shapes);
    m.per_event_ns = o.per_event_ns;
    if (o.per_api_ns >= 0) m.per_api_ns = o.per_api_ns;
    m.source = OverheadSource::kCalibration;
    m.note = "per-event cost given on the command line";
    return m;
  }
  if (o.step_time_ns > 0) {
    // One step time determines one number: the per-API cost is taken from the shipped
    // calibration and the per-operator cost fitted.
    OverheadModel base = ShippedCalibration(a.trace->meta.record_shapes);
    if (o.per_api_ns >= 0) base.per_api_ns = o.per_api_ns;
    CalibrationSample s{a.graph.get(), &a.iterations, a.steady, &a.traced_durations, &a.profiler_events,
                        o.step_time_ns};
    OverheadModel m = FitOverhead({s}, base);
    m.source = OverheadSource::kStepTime;
    m.note = "per-event cost fitted to the measured unprofiled step time";
    return m;
  }
  if (!IsProfilerTrace(*a.trace)) return OverheadModel{};
  return ShippedCalibration(a.trace->meta.record_shapes);
}

}  // namespace

Result<TraceAnalysis> AnalyzeTrace(const std::string& path, const AnalyzeOptions& options) {
  TraceAnalysis a;
  EMO_ASSIGN_OR_RETURN(trace::Trace t, trace::ReadTrace(path));
  a.trace = std::make_unique<trace::Trace>(std::move(t));
  EMO_ASSIGN_OR_RETURN(graph::Graph g, graph::BuildGraph(*a.trace, options.graph));
  a.graph = std::make_unique<graph::Graph>(std::move(g));
  EMO_ASSIGN_OR_RETURN(a.iterations, FindIterations(*a.graph, options.iteration_regex));
  if (!a.iterations.from_marker) a.trace->diagnostics.Add(Diag::kIterationMarkerMissing);

  const auto& n = a.graph->nodes();
  a.traced_durations = MeasuredDurations(*a.graph);
  a.measured = Schedule{n.start, n.end};
  a.replayed = Replay(*a.graph, a.traced_durations);
  a.measured_times = IterationTimes(*a.graph, a.iterations, a.measured);
  a.replayed_times = IterationTimes(*a.graph, a.iterations, a.replayed);
  a.steady = SteadyIteration(a.measured_times);

  a.profiler_events = CountProfilerEvents(*a.graph);
  EMO_ASSIGN_OR_RETURN(a.overhead, ChooseOverheadModel(a, options.overhead));
  a.durations = CorrectedDurations(*a.graph, a.traced_durations, a.profiler_events, a.overhead);
  a.timeline = a.corrected() ? Replay(*a.graph, a.durations) : a.replayed;
  a.timeline_times = IterationTimes(*a.graph, a.iterations, a.timeline);

  a.horizon = IterationEnds(*a.graph, a.iterations, a.timeline).back();
  a.window.assign(n.size(), false);
  for (uint32_t v = 0; v < n.size(); ++v) {
    a.window[v] = a.iterations.node_iteration[v] >= 0 && a.timeline.end[v] <= a.horizon;
  }
  a.slack = ComputeSlack(*a.graph, a.durations, a.timeline, a.window, a.horizon);
  const TimeNs first_start = FirstIterationStart(*a.graph, a.iterations, a.timeline);
  NodeId sink = IterationSink(a, a.timeline, a.steady);
  if (sink.valid()) a.steady_path = SteadyCriticalPath(a, a.durations, a.timeline);
  NodeId last = IterationSink(a, a.timeline, a.iterations.iterations.size() - 1);
  if (last.valid()) {
    a.window_path = FindCriticalPath(*a.graph, a.durations, a.timeline, last, first_start);
  }
  if (a.corrected() && sink.valid()) {
    // Was the trace CPU-bound only because it was traced?
    const CriticalPath traced = SteadyCriticalPath(a, a.traced_durations, a.replayed);
    if (traced.Share(PathCategory::kCpu) > 0.5 && a.steady_path.Share(PathCategory::kCpu) < 0.5) {
      a.trace->diagnostics.Add(Diag::kCpuBoundOnlyWhenTraced);
    }
  }
  a.gpus = GpuSlackWindows(*a.graph, a.timeline, a.slack, a.window, options.slack_threshold_ns);
  return a;
}

nlohmann::json AnalysisToJson(const TraceAnalysis& a) {
  using nlohmann::json;
  json j;
  j["trace"] = a.trace->meta.source_path;
  j["format"] = a.trace->meta.format;
  j["rank"] = a.trace->meta.rank;
  j["iterations"] = a.iterations.iterations.size();
  j["iteration_marker"] = a.iterations.from_marker ? a.iterations.iterations.front().name : "none";
  j["steady_iteration"] = a.iterations.iterations[a.steady].name;
  j["iteration_time_us"] = {{"measured", NsToUs(a.measured_ns())},
                            {"replayed", NsToUs(a.replayed_ns())}};
  if (a.corrected()) j["iteration_time_us"]["corrected"] = NsToUs(a.timeline_ns());
  j["timeline"] = a.corrected() ? "corrected" : "traced";
  j["overhead"] = {{"per_event_ns", a.overhead.per_event_ns},
                   {"per_api_ns", a.overhead.per_api_ns},
                   {"events", a.profiler_events.total},
                   {"source", OverheadSourceName(a.overhead.source)},
                   {"note", a.overhead.note}};
  json per = json::array();
  double max_err = 0;
  for (size_t i = 0; i < a.measured_times.size(); ++i) {
    double err = a.measured_times[i] > 0
                     ? 100.0 * std::abs(static_cast<double>(a.replayed_times[i] - a.measured_times[i])) /
                           static_cast<double>(a.measured_times[i])
                     : 0.0;
    max_err = std::max(max_err, err);
    per.push_back({{"name", a.iterations.iterations[i].name},
                   {"measured_us", NsToUs(a.measured_times[i])},
                   {"replayed_us", NsToUs(a.replayed_times[i])}});
    if (a.corrected()) per.back()["corrected_us"] = NsToUs(a.timeline_times[i]);
  }
  j["per_iteration"] = per;
  j["replay_error_pct"] = a.replay_error_pct();
  j["replay_error_max_pct"] = max_err;
  const auto& cp = a.steady_path;
  auto pct = [&](PathCategory c) { return 100.0 * cp.Share(c); };
  j["critical_path"] = {{"gpu_pct", pct(PathCategory::kGpuCompute)},
                        {"cpu_pct", pct(PathCategory::kCpu)},
                        {"comm_pct", pct(PathCategory::kCommunication)},
                        {"launch_pct", pct(PathCategory::kLaunch)},
                        {"length_us", NsToUs(cp.total())},
                        {"nodes", cp.nodes.size()}};
  json gpus = json::array();
  const TimeNs span = std::max<TimeNs>(1, a.horizon - FirstIterationStart(*a.graph, a.iterations, a.timeline));
  for (const auto& gs : a.gpus) {
    gpus.push_back({{"rank", a.trace->meta.rank},
                    {"device", gs.device},
                    {"busy_pct", 100.0 * static_cast<double>(gs.busy_ns) / static_cast<double>(span)},
                    {"slack_pct", gs.busy_ns > 0 ? 100.0 * static_cast<double>(gs.slack_ns) /
                                                       static_cast<double>(gs.busy_ns)
                                                 : 0.0},
                    {"slack_windows", gs.windows.size()}});
  }
  j["gpus"] = gpus;
  j["graph"] = {{"nodes", a.graph->num_nodes()}, {"edges", a.graph->num_edges()}};
  json edge_kinds = json::object();
  for (size_t k = 0; k < static_cast<size_t>(graph::EdgeKind::kCount); ++k) {
    edge_kinds[std::string(graph::EdgeKindName(static_cast<graph::EdgeKind>(k)))] =
        a.graph->EdgeCount(static_cast<graph::EdgeKind>(k));
  }
  j["graph"]["edge_kinds"] = edge_kinds;
  json diags = json::array();
  for (const auto& row : a.AllDiagnostics().Rows()) {
    diags.push_back({{"name", row.name}, {"severity", SeverityName(row.severity)}, {"count", row.count},
                     {"description", row.description}});
  }
  j["diagnostics"] = diags;
  return j;
}

nlohmann::json AnalysesToJson(const std::vector<TraceAnalysis>& all) {
  using nlohmann::json;
  if (all.size() == 1) return AnalysisToJson(all.front());
  json j;
  json traces = json::array();
  size_t iterations = SIZE_MAX;
  TimeNs measured = 0, replayed = 0;
  size_t nodes = 0, edges = 0;
  json gpus = json::array();
  Diagnostics diag;
  for (const auto& a : all) {
    json one = AnalysisToJson(a);
    iterations = std::min(iterations, a.iterations.iterations.size());
    measured = std::max(measured, a.measured_ns());
    replayed = std::max(replayed, a.replayed_ns());
    nodes += a.graph->num_nodes();
    edges += a.graph->num_edges();
    for (auto& g : one["gpus"]) gpus.push_back(g);
    diag.Merge(a.AllDiagnostics());
    traces.push_back(std::move(one));
  }
  // Until ranks are merged into one job graph, the job summary is the slowest rank's view.
  j["note"] = "each rank analysed on its own; job fields are the slowest rank's";
  j["iterations"] = iterations;
  j["iteration_time_us"] = {{"measured", NsToUs(measured)}, {"replayed", NsToUs(replayed)}};
  j["replay_error_pct"] = measured > 0 ? 100.0 * std::abs(static_cast<double>(replayed - measured)) /
                                             static_cast<double>(measured)
                                       : 0.0;
  size_t slowest = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].measured_ns() > all[slowest].measured_ns()) slowest = i;
  }
  j["critical_path"] = traces[slowest]["critical_path"];
  j["gpus"] = gpus;
  j["graph"] = {{"nodes", nodes}, {"edges", edges}};
  json diags = json::array();
  for (const auto& row : diag.Rows()) {
    diags.push_back({{"name", row.name}, {"severity", SeverityName(row.severity)}, {"count", row.count}});
  }
  j["diagnostics"] = diags;
  j["traces"] = traces;
  return j;
}

Result<WhatIfResult> RunWhatIf(const TraceAnalysis& a, const std::vector<ScaleRule>& rules) {
  WhatIfResult r;
  EMO_ASSIGN_OR_RETURN(std::vector<TimeNs> d, ScaledDurations(*a.graph, a.durations, rules, &r.matched));
  Schedule s = Replay(*a.graph, d);
  r.whatif_times = IterationTimes(*a.graph, a.iterations, s);
  r.baseline_ns = a.timeline_ns();
  r.whatif_ns = r.whatif_times[a.steady];
  return r;
}

}  // namespace emo::analysis
