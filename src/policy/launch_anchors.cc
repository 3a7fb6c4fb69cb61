#include "emo/policy/launch_anchors.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "emo/trace/launch_calls.h"

namespace emo::policy {

LaunchAnchors AnchorPacks(const analysis::TraceAnalysis& a, const std::vector<const opt::PlannedPack*>& packs,
                          TimeNs lead_ns) {
  LaunchAnchors out;
  const auto& g = *a.graph;
  const auto& nodes = g.nodes();
  const std::vector<trace::LaunchCall> calls = trace::CountedLaunchCalls(*a.trace);
  std::unordered_map<uint32_t, int64_t> position;  // event -> index in `calls`
  position.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) position.emplace(calls[i].event, static_cast<int64_t>(i));
  // Index of the first call starting at or after `t` / the last one starting at or before it.
  auto first_at = [&](TimeNs t) {
    return static_cast<int64_t>(std::lower_bound(calls.begin(), calls.end(), t,
                                                 [](const trace::LaunchCall& c, TimeNs v) { return c.start < v; }) -
                                calls.begin());
  };
  auto last_by = [&](TimeNs t) {
    return static_cast<int64_t>(std::upper_bound(calls.begin(), calls.end(), t,
                                                 [](TimeNs v, const trace::LaunchCall& c) { return v < c.start; }) -
                                calls.begin()) -
           1;
  };
  const auto& it = a.iterations.iterations[a.steady];
  const int64_t first = first_at(it.start);
  out.calls_per_iteration = static_cast<uint32_t>(first_at(it.end) - first);
  const auto n = static_cast<int64_t>(out.calls_per_iteration);
  // The GPU ops of the packs' device with the counted call that launched them, by GPU end: where
  // a switch can wait for the GPU's progress.
  struct Ended {
    TimeNs end;
    int64_t call;  // index in `calls`
  };
  std::vector<Ended> ended;
  const int32_t device = packs.empty() ? 0 : packs.front()->pack.device;
  for (size_t v = 0; v < nodes.size(); ++v) {
    if (nodes.kind[v] != graph::NodeKind::kGpuOp || a.trace->streams[nodes.resource[v]].device != device) continue;
    for (const uint32_t e : g.InEdges(graph::NodeId(static_cast<uint32_t>(v)))) {
      const auto& edge = g.edges()[e];
      if (edge.kind != graph::EdgeKind::kLaunch || nodes.kind[edge.src.value()] != graph::NodeKind::kApiCall) continue;
      if (const auto pos = position.find(nodes.ref[edge.src.value()]); pos != position.end()) {
        ended.push_back({nodes.end[v], pos->second});
      }
    }
  }
  std::sort(ended.begin(), ended.end(), [](const Ended& x, const Ended& y) { return x.end < y.end; });
  const TimeNs period = it.end - it.start;
  std::map<int64_t, int64_t> spin_at;  // call of the iteration -> ns
  for (const opt::PlannedPack* p : packs) {
    int64_t launch = std::numeric_limits<int64_t>::max();
    TimeNs api_start = std::numeric_limits<TimeNs>::max();
    TimeNs gpu_start = std::numeric_limits<TimeNs>::max();
    struct Carry {
      int64_t ns = 0;
      int64_t call = -1;  // the latest call launching an op of the pack on the stream
    };
    std::map<uint32_t, Carry> carry;  // by stream
    for (size_t k = 0; k < p->pack.ops.size(); ++k) {
      const graph::NodeId op = p->pack.ops[k];
      gpu_start = std::min(gpu_start, nodes.start[op.value()]);
      int64_t call = -1;
      for (const uint32_t e : g.InEdges(op)) {
        const auto& edge = g.edges()[e];
        if (edge.kind != graph::EdgeKind::kLaunch || nodes.kind[edge.src.value()] != graph::NodeKind::kApiCall) continue;
        api_start = std::min(api_start, nodes.start[edge.src.value()]);
        if (const auto pos = position.find(nodes.ref[edge.src.value()]); pos != position.end()) {
          launch = std::min(launch, pos->second);
          call = pos->second;
        }
      }
      if (k >= p->op_extra_ns.size() || n == 0) continue;
      const int64_t extra = std::max<int64_t>(0, p->op_extra_ns[k]);
      out.extra_ns += extra;
      Carry& c = carry[a.trace->gpu.stream[nodes.ref[op.value()]].value()];
      c.ns += extra;
      if (call >= 0) c.call = ((call - first) % n + n) % n;
      // Before another stream or the CPU waits for this op, the extra carried so far is added:
      // carried past the wait it would no longer delay the waiter.
      bool waited_on = false;
      for (const uint32_t e : g.OutEdges(op)) {
        const auto kind = g.edges()[e].kind;
        waited_on = waited_on || kind == graph::EdgeKind::kEventWait || kind == graph::EdgeKind::kHostSync;
      }
      if (c.call >= 0 && c.ns > 0 && (c.ns >= kSpinMinNs || waited_on)) {
        spin_at[c.call] += c.ns;
        c.ns = 0;
      }
    }
    for (const auto& [stream, c] : carry) {
      if (c.ns <= 0) continue;
      if (c.call < 0) {
        out.extra_without_call_ns += c.ns;
      } else {
        spin_at[c.call] += c.ns;
      }
    }
    if (launch == std::numeric_limits<int64_t>::max()) {
      ++out.packs_without_call;
      launch = first_at(api_start != std::numeric_limits<TimeNs>::max() ? api_start : gpu_start);
    }
    out.first_call.push_back(launch - first);
    // At most one iteration back: the switch is asked for during the previous iteration.
    const int64_t at = std::max(last_by(gpu_start - lead_ns) - first, -static_cast<int64_t>(out.calls_per_iteration));
    out.switch_call.push_back(at);
    // On the GPU: the op of the device that ends last at least `lead` before the pack starts,
    // within an iteration before it; its call, whose completion the switch waits for.
    const auto after = std::upper_bound(ended.begin(), ended.end(), gpu_start - lead_ns,
                                        [](TimeNs v, const Ended& x) { return v < x.end; });
    int64_t gpu_call = kNoCall;
    TimeNs gpu_lead = 0;
    if (after != ended.begin() && n > 0) {
      const Ended& e = *std::prev(after);
      if (gpu_start - e.end <= period && e.call - first >= -n && e.call - first < n) {
        gpu_call = e.call - first;
        gpu_lead = gpu_start - e.end;
      }
    }
    out.gpu_switch_call.push_back(gpu_call);
    out.gpu_switch_lead_ns.push_back(gpu_lead);
  }
  for (const auto& [call, ns] : spin_at) out.spins.push_back({call, ns});
  return out;
}

}  // namespace emo::policy
