#include "emo/analysis/analyze.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
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

NodeId IterationSink(const TraceAnalysis& a, const Schedule& s, size_t i) {
  return analysis::IterationSink(*a.graph, a.iterations, s, i);
}

// The critical path of the steady iteration under schedule `s` of `durations`, from the
// iteration's start to its end. The iteration ends with its last call or GPU op, or with its
// marker when that is later: then the path ends in the marker thread's node holding that time.
CriticalPath SteadyCriticalPath(const TraceAnalysis& a, std::span<const TimeNs> durations, const Schedule& s) {
  NodeId sink = IterationSink(a, s, a.steady);
  if (!sink.valid()) return {};
  const auto bounds = BoundsOf(*a.graph, a.iterations, s, a.steady);
  const auto marker_thread = a.iterations.iterations[a.steady].thread;
  if (s.end[sink.value()] < bounds.end && marker_thread.valid()) {
    const auto& n = a.graph->nodes();
    for (uint32_t v = 0; v < n.size(); ++v) {
      if (n.kind[v] != NodeKind::kGpuOp && n.resource[v] == marker_thread.value() && s.start[v] < bounds.end &&
          s.end[v] >= bounds.end) {
        sink = NodeId(v);
        break;
      }
    }
  }
  return FindCriticalPath(*a.graph, durations, s, sink, bounds.start, bounds.end);
}

// A PyTorch-profiler trace: Kineto JSON with recorded operators.
bool IsProfilerTrace(const trace::Trace& t) {
  if (t.meta.format != "kineto-json") return false;
  for (auto k : t.cpu.kind) {
    if (k == trace::CpuKind::kOp) return true;
  }
  return false;
}

// How much longer than a measured step the traced GPU work of a GPU-bound loop may be and still
// be taken as the same loop (the untraced steps' spread, and the tracer's per-kernel cost).
constexpr double kGpuBoundNoise = 0.02;

Result<OverheadModel> ChooseOverheadModel(const TraceAnalysis& a, const OverheadOptions& o) {
  if (o.mode == OverheadOptions::Mode::kOff) return OverheadModel{};
  const OverheadCalibration calibration = o.calibration ? *o.calibration : ShippedCalibration();
  const bool shapes = a.trace->meta.record_shapes;
  TimeNs step_time_ns = o.step_time_ns;
  if (step_time_ns <= 0 && !o.step_times_ns.empty()) {
    const std::string& path = a.trace->meta.source_path;
    auto it = o.step_times_ns.find(path);
    if (it == o.step_times_ns.end()) it = o.step_times_ns.find(std::filesystem::path(path).filename().string());
    if (it != o.step_times_ns.end()) step_time_ns = it->second;
  }
  // An EMO trace carries its own: the tracer timed the iterations outside its window.
  const auto& run = a.trace->meta.run;
  const bool from_tracer = step_time_ns <= 0 && run && run->untraced_step_ns > 0;
  if (from_tracer) step_time_ns = run->untraced_step_ns;
  if (step_time_ns > 0) {
    // A measured unprofiled step time fixes the CPU scale of this trace exactly.
    OverheadModel m = ModelFromCalibration(*a.graph, a.iterations, a.steady, shapes, calibration);
    const bool calibrated = a.profiler_trace && m.source == OverheadSource::kCalibration && m.cpu_scale < 1.0;
    const double calibrated_cpu_scale = calibrated ? m.cpu_scale : 1.0;
    m.cpu_scale = FitCpuScale(*a.graph, a.iterations, a.steady, a.traced_durations, a.cpu_floors, step_time_ns);
    if (o.fit_collective_waits && m.cpu_scale < 1.0 && AtCpuScaleBound(m.cpu_scale)) {
      // Even without CPU time the GPU work is longer than the step. A rank of a job waits in its
      // collectives for ranks the profiler slowed too: with the CPU as the calibration corrects
      // it (a profiler trace) or as traced, the collectives keep what fits the step.
      const double comm = FitCommScale(*a.graph, a.iterations, a.steady, a.traced_durations, a.cpu_floors,
                                       calibrated_cpu_scale, step_time_ns);
      if (comm < 1.0) {
        m.cpu_scale = calibrated_cpu_scale;
        m.comm_scale = comm;
      }
    }
    if (m.cpu_scale > 1.0) {
      // The step is longer than the trace with its CPU as traced, which no profiler does: on a
      // GPU-bound loop the GPU ops themselves ran slower (a clock below the trace's). A slower CPU
      // fits it only by lengthening the waits of blocking calls, which are the GPU's time.
      const double gpu = FitGpuScale(*a.graph, a.iterations, a.steady, a.traced_durations, a.cpu_floors,
                                     calibrated_cpu_scale, step_time_ns, kGpuBoundNoise);
      if (gpu > 1.0) {
        m.cpu_scale = calibrated_cpu_scale;
        m.gpu_scale = gpu;
      }
    }
    // The ratio this trace needs on its own under the calibration's gauge exponent.
    m.ratio = m.cpu_scale * std::pow(m.gauge.slowdown, calibration.gauge_exponent);
    m.source = OverheadSource::kStepTime;
    m.confidence = "high";
    m.note = from_tracer ? fmt::format("CPU scale fitted to the untraced step time emo trace measured in the same run "
                                       "({:.3f} ms, median of {} iterations)",
                                       static_cast<double>(step_time_ns) * 1e-6, run->untraced_iterations)
                         : "CPU scale fitted to the measured unprofiled step time";
    if (m.gpu_scale > 1.0) {
      m.confidence = "medium";
      m.note += fmt::format(
          "; the measured step is longer than the traced GPU work allows however slow the CPU, and the loop is "
          "GPU-bound: its GPU ops are taken as {:.3f}x their traced time (they ran slower than traced, as at a lower "
          "clock: the power limiter holds a long run lower than a short trace's), the CPU scale is {}",
          m.gpu_scale, calibrated ? "the calibration's" : "1 (as traced)");
    } else if (m.comm_scale < 1.0) {
      m.confidence = "medium";
      m.note += fmt::format(
          "; the measured step is shorter than the traced GPU work allows: the communication kernels keep {:.1f} % "
          "of their traced time (their waits for other ranks, lengthened by the profiler there), the CPU scale is {}",
          100 * m.comm_scale, calibrated ? "the calibration's" : "1 (as traced)");
    } else if (AtCpuScaleBound(m.cpu_scale)) {
      // A GPU-bound loop's step is its GPU work: a measured step a little shorter than the traced
      // work is run-to-run noise (or the tracer's cost per kernel), not a timeline to doubt.
      const TimeNs at_bound = m.cpu_scale < 1 ? CorrectedIterationTime(*a.graph, a.iterations, a.steady, a.traced_durations,
                                                                         a.cpu_floors, m.cpu_scale)
                                              : 0;
      const double over = static_cast<double>(at_bound) / static_cast<double>(step_time_ns) - 1.0;
      if (at_bound > 0 && over <= kGpuBoundNoise) {
        m.note += fmt::format("; GPU-bound: the traced GPU work alone takes {:.3f} ms, {:.2f} % over the measured step "
                              "(within run-to-run noise)",
                              static_cast<double>(at_bound) * 1e-6, 100 * over);
      } else {
        m.confidence = "low";
        m.note += m.cpu_scale > 1 ? "; the measured step is far longer than the traced one: not a profiler effect"
                                  : "; the measured step is shorter than the traced GPU work allows";
      }
    }
    return m;
  }
  if (!IsProfilerTrace(*a.trace)) return OverheadModel{};
  return ModelFromCalibration(*a.graph, a.iterations, a.steady, shapes, calibration);
}

// The corrected steady iteration at both ends of the ratio's band. When the two barely differ
// the loop is GPU-bound once corrected and the ratio's uncertainty does not matter: confidence
// at least medium (not high: what the trace does not show, such as DataLoader workers, can
// still make the unprofiled loop slower).
void BandCorrectedTime(TraceAnalysis& a) {
  a.corrected_lo_ns = a.corrected_hi_ns = a.timeline_ns();
  auto& m = a.overhead;
  if (m.source != OverheadSource::kCalibration || (m.band_lo == 1 && m.band_hi == 1)) return;
  auto time = [&](double scale) {
    return CorrectedIterationTime(*a.graph, a.iterations, a.steady, a.traced_durations, a.cpu_floors, scale);
  };
  a.corrected_lo_ns = time(m.cpu_scale * m.band_lo);
  a.corrected_hi_ns = time(m.cpu_scale * m.band_hi);
  constexpr double kInsensitive = 0.05;
  if (!m.waits_on_other_ranks && !m.unlike_host &&
      static_cast<double>(a.corrected_hi_ns - a.corrected_lo_ns) < kInsensitive * static_cast<double>(a.timeline_ns())) {
    m.confidence = "medium";
    m.note += "; GPU-bound once corrected: the iteration time barely depends on the ratio";
  }
}

}  // namespace

Result<TraceAnalysis> AnalyzeTrace(const std::string& path, const AnalyzeOptions& options) {
  EMO_ASSIGN_OR_RETURN(trace::Trace t, trace::ReadTrace(path));
  return AnalyzeTrace(std::move(t), options);
}

Result<TraceAnalysis> AnalyzeTrace(trace::TraceSource source, const AnalyzeOptions& options) {
  EMO_ASSIGN_OR_RETURN(trace::Trace t, trace::ReadTrace(std::move(source)));
  return AnalyzeTrace(std::move(t), options);
}

Result<TraceAnalysis> AnalyzeTrace(trace::Trace trace, const AnalyzeOptions& options) {
  TraceAnalysis a;
  a.trace = std::make_unique<trace::Trace>(std::move(trace));
  EMO_ASSIGN_OR_RETURN(graph::Graph g, graph::BuildGraph(*a.trace, options.graph));
  a.graph = std::make_unique<graph::Graph>(std::move(g));
  EMO_ASSIGN_OR_RETURN(a.iterations, FindIterations(*a.graph, options.iteration_regex));
  if (!a.iterations.from_marker) a.trace->diagnostics.Add(Diag::kIterationMarkerMissing);

  const auto& n = a.graph->nodes();
  a.traced_durations = MeasuredDurations(*a.graph);
  a.cpu_floors = CpuFloorsNs(*a.graph, a.traced_durations);
  a.measured = Schedule{n.start, n.end};
  a.replayed = Replay(*a.graph, a.traced_durations);
  a.measured_times = IterationTimes(*a.graph, a.iterations, a.measured);
  a.replayed_times = IterationTimes(*a.graph, a.iterations, a.replayed);
  a.steady = SteadyIteration(a.measured_times);

  a.profiler_trace = IsProfilerTrace(*a.trace);
  EMO_ASSIGN_OR_RETURN(a.overhead, ChooseOverheadModel(a, options.overhead));
  a.durations = CorrectedDurations(a.traced_durations, a.cpu_floors, a.overhead.cpu_scale, a.overhead.comm_scale,
                                   a.overhead.gpu_scale);
  a.timeline = a.corrected() ? Replay(*a.graph, a.durations) : a.replayed;
  a.timeline_times = IterationTimes(*a.graph, a.iterations, a.timeline);
  BandCorrectedTime(a);

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
  if (a.timeline_ns() < kMinIterationNs) a.trace->diagnostics.Add(Diag::kIterationTooShort);
  return a;
}

namespace {

// The correction as the JSON reports it. per_event_ns is what the correction removed from the
// steady iteration's CPU time per recorded profiler event (the model itself scales CPU time).
nlohmann::json OverheadToJson(const TraceAnalysis& a) {
  using nlohmann::json;
  const auto& n = a.graph->nodes();
  const ProfilerEventCounts counts = CountProfilerEvents(*a.graph);  // for the report only
  double events = 0, removed = 0;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (a.iterations.node_iteration[v] != static_cast<int32_t>(a.steady) || n.kind[v] == NodeKind::kGpuOp) continue;
    events += counts.per_node[v];
    removed += static_cast<double>(a.traced_durations[v] - a.durations[v]);
  }
  const auto& m = a.overhead;
  json j = {{"per_event_ns", events > 0 ? removed / events : 0.0},
            {"events", counts.total},
            {"events_per_iteration", events},
            {"source", OverheadSourceName(m.source)},
            {"cpu_scale", m.cpu_scale},
            {"comm_scale", m.comm_scale},
            {"gpu_scale", m.gpu_scale},
            {"confidence", m.confidence},
            {"note", m.note}};
  if (m.source == OverheadSource::kOff) return j;
  json threads = json::array();
  for (const auto& t : m.gauge.threads) {
    threads.push_back({{"thread", a.trace->threads[t.thread].tid},
                       {"busy_us", NsToUs(t.busy_ns)},
                       {"gauge", t.gauge}});
  }
  j["speed_gauge"] = {{"cpu_slowdown", m.gauge.slowdown},
                      {"measured", m.gauge.measured},
                      {"fixed_cost_events", m.gauge.gauge_events},
                      {"leaf_ops_per_ms", m.gauge.Density()},
                      {"ratio", m.ratio},
                      {"threads", threads}};
  return j;
}

}  // namespace

Status CheckIterationLength(const TraceAnalysis& a, std::string_view what) {
  if (a.timeline_ns() >= kMinIterationNs) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{}: the steady iteration {} lasts {:.3f} us on the {} timeline, under the {:.0f} us below which {} means "
      "nothing (clock switches and energy counters are far coarser; its times are timer jitter)",
      a.trace->meta.source_path, a.iterations.iterations[a.steady].name, NsToUs(a.timeline_ns()),
      a.corrected() ? "corrected" : "traced", NsToUs(kMinIterationNs), what));
}

TimelineConfidence ConfidenceOf(const TraceAnalysis& a) {
  if (a.corrected()) return {a.overhead.confidence, a.overhead.note};
  if (a.profiler_trace) {
    return {"low", "overhead correction off: the traced CPU time includes the profiler's own overhead"};
  }
  return {"high", "no profiler overhead to undo: the traced timeline is the run's"};
}

std::vector<TimeNs> BandDurations(const TraceAnalysis& a, double factor) {
  return CorrectedDurations(a.traced_durations, a.cpu_floors, a.overhead.cpu_scale * factor, a.overhead.comm_scale,
                            a.overhead.gpu_scale);
}

std::vector<PathGap> CriticalPathGaps(const TraceAnalysis& a) {
  std::vector<PathGap> gaps;
  const auto& cp = a.steady_path;
  if (cp.head_gap_ns > 0) {
    gaps.push_back({"start", cp.head_gap_ns,
                    "the path stops " + DescribePathStart(*a.graph, cp) +
                        "; the iteration's time before it is not explained by the trace"});
  }
  if (cp.tail_gap_ns > 0) {
    const auto& it = a.iterations.iterations[a.steady];
    gaps.push_back({"end", cp.tail_gap_ns,
                    fmt::format("the iteration marker '{}' ends after the iteration's last recorded node{}; nothing "
                                "recorded fills that time",
                                it.name, it.thread.valid() ? "" : " (no marker thread)")});
  }
  return gaps;
}

void to_json(nlohmann::json& j, const PathGap& g) {
  j = {{"where", g.where}, {"us", NsToUs(g.ns)}, {"reason", g.reason}};
}

namespace {

// null when the trace has no clock reads in the window (traces before the clock record, or no
// NVML).
nlohmann::json ClockStatsToJson(const trace::ClockStats& c) {
  using nlohmann::json;
  if (!c.Known()) return nullptr;
  return {{"median_mhz", c.median_mhz},
          {"min_mhz", c.min_mhz},
          {"max_mhz", c.max_mhz},
          {"reads", c.samples},
          {"power_capped_share", c.power_capped_share < 0 ? json(nullptr) : json(c.power_capped_share)}};
}

}  // namespace

nlohmann::json GpuEnergyToJson(const trace::GpuEnergy& g) {
  using nlohmann::json;
  const bool measured = g.HasEnergy();
  auto energy = [&](double v) { return measured ? json(v) : json(nullptr); };
  return {{"device", g.device},
          {"name", g.name},
          {"energy_per_iteration_j", energy(g.energy_per_iteration_j)},
          {"uncertainty_per_iteration_j", energy(g.uncertainty_per_iteration_j)},
          {"window_iterations", g.iterations},
          {"window_s", static_cast<double>(g.window_end - g.window_start) * 1e-9},
          {"window_energy_j", energy(g.energy_j)},
          {"counter_period_ms", static_cast<double>(g.counter_period_ns) * 1e-6},
          {"busy_power_w", energy(g.busy_power_w)},
          {"idle_power_w", g.idle_power_w < 0 ? json(nullptr) : json(g.idle_power_w)},
          {"counter_reads", g.counter_reads},
          {"power_samples", g.power_samples},
          {"sm_clock", ClockStatsToJson(g.clock)},
          {"traced_sm_clock", ClockStatsToJson(g.traced_clock)}};
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
  j["iteration_regex"] = a.iterations.regex;
  j["iteration_time_us"] = {{"measured", NsToUs(a.measured_ns())},
                            {"replayed", NsToUs(a.replayed_ns())}};
  if (a.corrected()) {
    j["iteration_time_us"]["corrected"] = NsToUs(a.timeline_ns());
    j["iteration_time_us"]["corrected_range"] = {NsToUs(a.corrected_lo_ns), NsToUs(a.corrected_hi_ns)};
  }
  if (const auto& run = a.trace->meta.run; run && run->untraced_step_ns > 0) {
    // EMO traces: the tracer timed the iterations outside its window (the same program, untraced).
    j["iteration_time_us"]["untraced"] = NsToUs(run->untraced_step_ns);
    j["iteration_time_us"]["untraced_iterations"] = run->untraced_iterations;
    // ... and read each GPU's energy counter over them: measured, beside the model's predictions.
    json gpus = json::array();
    for (const auto& g : run->gpus) gpus.push_back(GpuEnergyToJson(g));
    j["measured_energy"] = {{"source", "NVML energy counter over the untraced iterations (emo trace)"}, {"gpus", gpus}};
  }
  j["timeline"] = a.corrected() ? "corrected" : "traced";
  j["overhead"] = OverheadToJson(a);
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
                        {"nodes", cp.nodes.size()},
                        {"covered_pct", a.timeline_ns() > 0 ? 100.0 * static_cast<double>(cp.total()) /
                                                                  static_cast<double>(a.timeline_ns())
                                                            : 100.0},
                        {"uncovered", CriticalPathGaps(a)}};
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
  j["graph"]["queued_stream_gap_us"] =
      a.graph->queued_stream_gap_ns() >= 0 ? json(NsToUs(a.graph->queued_stream_gap_ns())) : json(nullptr);
  j["graph"]["queued_stream_pairs"] = a.graph->queued_stream_gap_pairs();
  json diags = json::array();
  for (const auto& row : a.AllDiagnostics().Rows()) {
    diags.push_back({{"name", row.name}, {"severity", SeverityName(row.severity)}, {"count", row.count},
                     {"description", row.description}});
  }
  j["diagnostics"] = diags;
  return j;
}

nlohmann::json AnalysesToJson(const std::vector<TraceAnalysis>& all) {
  std::vector<TraceJsonPart> parts;
  for (const auto& a : all) parts.push_back(TraceJsonPartOf(a));
  return CombineTraceJsons(std::move(parts));
}

TraceJsonPart TraceJsonPartOf(const TraceAnalysis& a) {
  return {AnalysisToJson(a),       a.iterations.iterations.size(), a.measured_ns(), a.replayed_ns(),
          a.graph->num_nodes(),    a.graph->num_edges(),           a.AllDiagnostics()};
}

nlohmann::json CombineTraceJsons(std::vector<TraceJsonPart> parts) {
  using nlohmann::json;
  if (parts.size() == 1) return std::move(parts.front().json);
  json j;
  json traces = json::array();
  size_t iterations = SIZE_MAX;
  TimeNs measured = 0, replayed = 0;
  size_t nodes = 0, edges = 0, slowest = 0;
  json gpus = json::array();
  Diagnostics diag;
  for (size_t i = 0; i < parts.size(); ++i) {
    TraceJsonPart& a = parts[i];
    iterations = std::min(iterations, a.iterations);
    measured = std::max(measured, a.measured_ns);
    replayed = std::max(replayed, a.replayed_ns);
    if (a.measured_ns > parts[slowest].measured_ns) slowest = i;
    nodes += a.nodes;
    edges += a.edges;
    for (auto& g : a.json["gpus"]) gpus.push_back(g);
    diag.Merge(a.diagnostics);
    traces.push_back(std::move(a.json));
  }
  // Until ranks are merged into one job graph, the job summary is the slowest rank's view.
  j["note"] = "each rank analysed on its own; job fields are the slowest rank's";
  j["iterations"] = iterations;
  j["iteration_time_us"] = {{"measured", NsToUs(measured)}, {"replayed", NsToUs(replayed)}};
  j["replay_error_pct"] = measured > 0 ? 100.0 * std::abs(static_cast<double>(replayed - measured)) /
                                             static_cast<double>(measured)
                                       : 0.0;
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
  EMO_RETURN_IF_ERROR(CheckIterationLength(a, "a what-if"));
  WhatIfResult r;
  EMO_ASSIGN_OR_RETURN(std::vector<TimeNs> d, ScaledDurations(*a.graph, a.durations, rules, &r.matched));
  Schedule s = Replay(*a.graph, d);
  r.whatif_times = IterationTimes(*a.graph, a.iterations, s);
  r.baseline_ns = a.timeline_ns();
  r.whatif_ns = r.whatif_times[a.steady];
  auto change = [](TimeNs base, TimeNs changed) {
    return 100.0 * (static_cast<double>(changed) / static_cast<double>(std::max<TimeNs>(1, base)) - 1.0);
  };
  r.change_pct = change(r.baseline_ns, r.whatif_ns);
  r.change_range_pct = {r.change_pct, r.change_pct};
  if (a.HasBand()) {
    // The same rules at both ends of the correction's band: how much the answer rests on it.
    for (const double factor : {a.overhead.band_lo, a.overhead.band_hi}) {
      const std::vector<TimeNs> base = BandDurations(a, factor);
      EMO_ASSIGN_OR_RETURN(std::vector<TimeNs> scaled, ScaledDurations(*a.graph, base, rules, nullptr));
      const TimeNs b = IterationTimes(*a.graph, a.iterations, Replay(*a.graph, base))[a.steady];
      const TimeNs w = IterationTimes(*a.graph, a.iterations, Replay(*a.graph, scaled))[a.steady];
      r.change_range_pct[0] = std::min(r.change_range_pct[0], change(b, w));
      r.change_range_pct[1] = std::max(r.change_range_pct[1], change(b, w));
    }
  }
  return r;
}

}  // namespace emo::analysis
