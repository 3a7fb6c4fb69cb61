#include "emo/analysis/replay.h"

#include <algorithm>

#include "emo/base/check.h"

namespace emo::analysis {

using graph::Constraint;
using graph::NodeId;

std::vector<TimeNs> MeasuredDurations(const graph::Graph& g) { return g.nodes().duration; }

Schedule Replay(const graph::Graph& g, std::span<const TimeNs> durations) { return Replay(g, durations, {}); }

Schedule Replay(const graph::Graph& g, std::span<const TimeNs> durations, std::span<const TimeNs> end_bounds) {
  const auto& n = g.nodes();
  EMO_CHECK(durations.size() == n.size());
  EMO_CHECK(end_bounds.empty() || end_bounds.size() == n.size());
  const auto& edges = g.edges();
  Schedule s;
  s.start.assign(n.size(), 0);
  s.end.assign(n.size(), 0);
  for (NodeId v : g.TopologicalOrder()) {
    const uint32_t i = v.value();
    TimeNs start = n.is_root[i] ? n.start[i] : INT64_MIN;
    TimeNs end_bound = end_bounds.empty() ? INT64_MIN : end_bounds[i];
    for (uint32_t ei : g.InEdges(v)) {
      const auto& e = edges[ei];
      const uint32_t u = e.src.value();
      switch (e.constraint) {
        case Constraint::kEndToStart: start = std::max(start, s.end[u] + e.delay); break;
        case Constraint::kStartToStart: start = std::max(start, s.start[u] + e.delay); break;
        case Constraint::kEndToEnd: end_bound = std::max(end_bound, s.end[u] + e.delay); break;
      }
    }
    if (start == INT64_MIN) start = n.start[i];  // only end constraints: keep measured start
    s.start[i] = start;
    s.end[i] = std::max(start + durations[i], end_bound);
  }
  return s;
}

}  // namespace emo::analysis
