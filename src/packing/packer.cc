#include "emo/packing/packer.h"

#include <algorithm>
#include <map>

namespace emo::packing {

using graph::NodeId;
using graph::NodeKind;

std::vector<Pack> PackSteadyIteration(const analysis::TraceAnalysis& a, const PackOptions& options) {
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  const auto steady = static_cast<int32_t>(a.steady);
  const TimeNs iteration_end = analysis::IterationEnds(*a.graph, a.iterations, a.timeline)[a.steady];
  std::map<int32_t, std::vector<uint32_t>> per_device;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp || a.iterations.node_iteration[v] != steady) continue;
    per_device[t.streams[n.resource[v]].device].push_back(v);
  }
  std::vector<Pack> packs;
  for (auto& [device, ops] : per_device) {
    // Launch order (the anchor) and time order on the timeline.
    std::vector<uint32_t> by_launch = ops;
    std::sort(by_launch.begin(), by_launch.end(), [&](uint32_t x, uint32_t y) {
      return t.gpu.correlation[n.ref[x]] < t.gpu.correlation[n.ref[y]];
    });
    std::map<uint32_t, size_t> launch_index;
    for (size_t i = 0; i < by_launch.size(); ++i) launch_index[by_launch[i]] = i;
    std::sort(ops.begin(), ops.end(), [&](uint32_t x, uint32_t y) { return a.timeline.start[x] < a.timeline.start[y]; });
    auto has_slack = [&](uint32_t v) {
      return static_cast<double>(a.slack.slack[v]) > options.slack_share * static_cast<double>(std::max<TimeNs>(1, a.durations[v]));
    };
    Pack cur;
    TimeNs slack_busy = 0, busy = 0;
    auto close = [&](TimeNs end) {
      cur.end = end;
      cur.has_slack = 2 * slack_busy > busy;
      packs.push_back(std::move(cur));
      cur = Pack{};
      slack_busy = busy = 0;
    };
    for (uint32_t v : ops) {
      const TimeNs s = a.timeline.start[v];
      if (!cur.ops.empty()) {
        const TimeNs span = s - cur.start;
        const bool class_change = has_slack(v) != (2 * slack_busy > busy);
        // Cut at a slack-class change once the pack is long enough, or at twice the minimum.
        if (span >= options.min_pack_ns && (class_change || span >= 2 * options.min_pack_ns)) close(s);
      }
      if (cur.ops.empty()) {
        cur.device = device;
        cur.start = s;
        cur.first_launch = launch_index[v];
      }
      cur.ops.push_back(NodeId(v));
      cur.first_launch = std::min(cur.first_launch, launch_index[v]);
      busy += a.durations[v];
      if (has_slack(v)) slack_busy += a.durations[v];
    }
    if (!cur.ops.empty()) close(std::max(iteration_end, cur.start));
    // A last pack shorter than the minimum joins the one before it.
    if (packs.size() >= 2 && packs.back().device == device && packs[packs.size() - 2].device == device &&
        packs.back().end - packs.back().start < options.min_pack_ns) {
      Pack last = std::move(packs.back());
      packs.pop_back();
      auto& prev = packs.back();
      prev.end = last.end;
      prev.ops.insert(prev.ops.end(), last.ops.begin(), last.ops.end());
    }
  }
  return packs;
}

}  // namespace emo::packing
