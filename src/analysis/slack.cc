#include "emo/analysis/slack.h"

#include <algorithm>

#include <fmt/format.h>

#include "emo/base/check.h"

namespace emo::analysis {

using graph::Constraint;
using graph::EdgeKind;
using graph::NodeId;
using graph::NodeKind;

namespace {
constexpr TimeNs kUnconstrained = INT64_MAX / 4;
}

bool IsCommunicationKernel(std::string_view name) {
  return name.find("nccl") != std::string_view::npos || name.find("NCCL") != std::string_view::npos ||
         name.find("rccl") != std::string_view::npos;
}

SlackResult ComputeSlack(const graph::Graph& g, std::span<const TimeNs> durations,
                         const Schedule& s, const std::vector<bool>& window, TimeNs horizon) {
  const size_t num = g.num_nodes();
  SlackResult r;
  r.latest_finish.assign(num, kUnconstrained);
  for (size_t v = 0; v < num; ++v) {
    if (window[v]) r.latest_finish[v] = horizon;
  }
  const auto& topo = g.TopologicalOrder();
  const auto& edges = g.edges();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const uint32_t v = it->value();
    TimeNs lf = r.latest_finish[v];
    for (uint32_t ei : g.OutEdges(*it)) {
      const auto& e = edges[ei];
      const uint32_t w = e.dst.value();
      if (r.latest_finish[w] >= kUnconstrained) continue;
      const TimeNs ls_w = r.latest_finish[w] - durations[w];
      switch (e.constraint) {
        case Constraint::kEndToStart: lf = std::min(lf, ls_w - e.delay); break;
        case Constraint::kStartToStart: lf = std::min(lf, ls_w - e.delay + durations[v]); break;
        case Constraint::kEndToEnd: lf = std::min(lf, r.latest_finish[w] - e.delay); break;
      }
    }
    r.latest_finish[v] = lf;
  }
  r.slack.assign(num, 0);
  for (size_t v = 0; v < num; ++v) {
    if (r.latest_finish[v] < kUnconstrained) r.slack[v] = std::max<TimeNs>(0, r.latest_finish[v] - s.end[v]);
  }
  return r;
}

PathCategory CategoryOf(const graph::Graph& g, NodeId v) {
  const auto& n = g.nodes();
  if (n.kind[v.value()] != NodeKind::kGpuOp) return PathCategory::kCpu;
  const auto& t = g.trace();
  return IsCommunicationKernel(t.Name(t.gpu.name[n.ref[v.value()]])) ? PathCategory::kCommunication
                                                                       : PathCategory::kGpuCompute;
}

TimeNs CriticalPath::total() const {
  TimeNs sum = 0;
  for (TimeNs x : time) sum += x;
  return sum;
}

double CriticalPath::Share(PathCategory c) const {
  return static_cast<double>(time[static_cast<size_t>(c)]) / static_cast<double>(std::max<TimeNs>(1, total()));
}

// Walks back from the sink along binding constraints. Time is attributed with a cursor that
// only moves back, so overlapping segments (an op that started in another op's tail: a
// negative contention delay) are not counted twice: the categories sum to sink end - from.
CriticalPath FindCriticalPath(const graph::Graph& g, std::span<const TimeNs> durations,
                              const Schedule& s, NodeId sink, TimeNs from, TimeNs until,
                              std::span<const TimeNs> end_bounds) {
  CriticalPath cp;
  const auto& n = g.nodes();
  const auto& edges = g.edges();
  TimeNs cursor = until == INT64_MIN ? s.end[sink.value()] : std::min(until, s.end[sink.value()]);
  if (until != INT64_MIN) cp.tail_gap_ns = std::max<TimeNs>(0, until - std::max(cursor, from));
  // Attributes [max(lo, from), cursor) to c and moves the cursor back to lo.
  auto take = [&](PathCategory c, TimeNs lo) {
    const TimeNs bottom = std::max(lo, from);
    if (cursor > bottom) cp.time[static_cast<size_t>(c)] += cursor - bottom;
    cursor = std::min(cursor, std::max(lo, from));
  };
  NodeId cur = sink;
  bool at_end = true;  // walking back from cur's end (true) or its start (false)
  size_t guard = 0;
  while (cur.valid() && cursor > from && guard++ <= 4 * g.num_nodes()) {
    const uint32_t v = cur.value();
    if (cp.nodes.empty() || cp.nodes.back() != cur) cp.nodes.push_back(cur);
    if (at_end) {
      if (s.end[v] > s.start[v] + durations[v]) {
        // The end came from a sync edge: follow the binding one (the wait's return latency
        // is CPU time).
        NodeId next;
        for (uint32_t ei : g.InEdges(cur)) {
          const auto& e = edges[ei];
          if (e.constraint == Constraint::kEndToEnd && s.end[e.src.value()] + e.delay == s.end[v]) {
            take(PathCategory::kCpu, s.end[e.src.value()]);
            next = e.src;
            break;
          }
        }
        if (next.valid()) {
          cur = next;
          continue;
        }
        if (!end_bounds.empty() && end_bounds[v] == s.end[v]) {
          cp.stop = CriticalPath::Stop::kExternal;
          break;
        }
      }
      take(CategoryOf(g, cur), s.start[v]);
    }
    if (n.is_root[v]) {
      if (cursor > from) cp.stop = CriticalPath::Stop::kRoot;
      break;
    }
    NodeId next;
    bool next_at_end = true;
    for (uint32_t ei : g.InEdges(cur)) {
      const auto& e = edges[ei];
      if (e.constraint == Constraint::kEndToEnd) continue;
      const uint32_t u = e.src.value();
      const TimeNs src_time = e.constraint == Constraint::kStartToStart ? s.start[u] : s.end[u];
      if (src_time + e.delay != s.start[v]) continue;
      const bool gpu_gap = e.kind == EdgeKind::kLaunch || e.kind == EdgeKind::kStreamOrder ||
                           e.kind == EdgeKind::kEventWait || e.kind == EdgeKind::kGpuContention;
      take(gpu_gap ? PathCategory::kLaunch : PathCategory::kCpu, src_time);
      next = e.src;
      next_at_end = e.constraint != Constraint::kStartToStart;
      break;
    }
    if (!next.valid()) {
      if (cursor > from) cp.stop = CriticalPath::Stop::kNoBinding;
      break;
    }
    cur = next;
    at_end = next_at_end;
  }
  cp.head_gap_ns = cp.stop == CriticalPath::Stop::kExternal ? 0 : std::max<TimeNs>(0, cursor - from);
  if (cp.head_gap_ns > 0 && cp.stop == CriticalPath::Stop::kComplete) cp.stop = CriticalPath::Stop::kNoBinding;
  std::reverse(cp.nodes.begin(), cp.nodes.end());
  return cp;
}

std::string DescribePathStart(const graph::Graph& g, const CriticalPath& cp) {
  if (cp.stop == CriticalPath::Stop::kComplete || cp.nodes.empty()) return "";
  const auto& n = g.nodes();
  const auto& t = g.trace();
  const uint32_t v = cp.nodes.front().value();
  if (n.kind[v] == NodeKind::kGpuOp) {
    const auto& st = t.streams[n.resource[v]];
    return fmt::format("at GPU op {} (device {}, stream {}), which has no launch call or stream predecessor in the "
                       "trace (launched before the trace window?)",
                       t.Name(t.gpu.name[n.ref[v]]), st.device, st.stream);
  }
  const auto& th = t.threads[n.resource[v]];
  const std::string what = n.kind[v] == NodeKind::kApiCall ? std::string(t.Name(t.cpu.name[n.ref[v]]))
                                                           : std::string("its first recorded work");
  if (cp.stop == CriticalPath::Stop::kRoot) {
    return fmt::format("at {} on thread {}: the thread's first event in the trace, with no earlier event on "
                       "another thread that it could have waited for",
                       what, th.tid);
  }
  return fmt::format("at {} on thread {}: none of its recorded dependencies set its start", what, th.tid);
}

std::vector<GpuSlack> GpuSlackWindows(const graph::Graph& g, const Schedule& s,
                                      const SlackResult& slack, const std::vector<bool>& window,
                                      TimeNs threshold_ns) {
  const auto& n = g.nodes();
  const auto& t = g.trace();
  struct Ev {
    TimeNs time;
    int running;
    int low;
  };
  std::vector<std::vector<Ev>> per_device;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp || !window[v] || s.end[v] <= s.start[v]) continue;
    auto dev = static_cast<size_t>(std::max(0, t.streams[n.resource[v]].device));
    if (per_device.size() <= dev) per_device.resize(dev + 1);
    const int low = slack.slack[v] < threshold_ns ? 1 : 0;
    per_device[dev].push_back({s.start[v], 1, low});
    per_device[dev].push_back({s.end[v], -1, -low});
  }
  std::vector<GpuSlack> out;
  for (size_t dev = 0; dev < per_device.size(); ++dev) {
    auto& evs = per_device[dev];
    if (evs.empty()) continue;
    std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.time < b.time; });
    GpuSlack gs;
    gs.device = static_cast<int32_t>(dev);
    int running = 0, low = 0;
    TimeNs prev = evs.front().time;
    for (const Ev& e : evs) {
      const TimeNs span = e.time - prev;
      if (span > 0 && running > 0) {
        gs.busy_ns += span;
        if (low == 0) {
          gs.slack_ns += span;
          if (!gs.windows.empty() && gs.windows.back().end == prev) {
            gs.windows.back().end = e.time;
          } else {
            gs.windows.push_back({prev, e.time});
          }
        }
      }
      running += e.running;
      low += e.low;
      prev = e.time;
    }
    out.push_back(std::move(gs));
  }
  return out;
}

}  // namespace emo::analysis
