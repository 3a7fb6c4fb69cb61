#include "emo/policy/launch_anchors.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "emo/trace/launch_calls.h"

namespace emo::policy {
namespace {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

// The launch calls EMO's tracer counts at run time, in start order, and which one launched a GPU op.
class CountedCalls {
 public:
  explicit CountedCalls(const analysis::TraceAnalysis& a) : a_(a), calls_(trace::CountedLaunchCalls(*a.trace)) {
    position_.reserve(calls_.size());
    for (size_t i = 0; i < calls_.size(); ++i) position_.emplace(calls_[i].event, static_cast<int64_t>(i));
  }
  // Index of the first call starting at or after `t`.
  int64_t FirstAt(TimeNs t) const {
    return std::lower_bound(calls_.begin(), calls_.end(), t,
                            [](const trace::LaunchCall& c, TimeNs v) { return c.start < v; }) -
           calls_.begin();
  }
  // Index of the last call starting at or before `t` (-1: none).
  int64_t LastBy(TimeNs t) const {
    return std::upper_bound(calls_.begin(), calls_.end(), t,
                            [](TimeNs v, const trace::LaunchCall& c) { return v < c.start; }) -
           calls_.begin() - 1;
  }
  // The counted call that launched `op` (its index; -1: none). `api_start`, when given, is lowered
  // to the start of any API call that launched it, counted or not.
  int64_t LaunchOf(graph::NodeId op, TimeNs* api_start = nullptr) const {
    const auto& g = *a_.graph;
    const auto& nodes = g.nodes();
    int64_t call = -1;
    for (const uint32_t e : g.InEdges(op)) {
      const auto& edge = g.edges()[e];
      if (edge.kind != graph::EdgeKind::kLaunch || nodes.kind[edge.src.value()] != graph::NodeKind::kApiCall) continue;
      if (api_start != nullptr) *api_start = std::min(*api_start, nodes.start[edge.src.value()]);
      if (const auto pos = position_.find(nodes.ref[edge.src.value()]); pos != position_.end()) call = pos->second;
    }
    return call;
  }

 private:
  const analysis::TraceAnalysis& a_;
  std::vector<trace::LaunchCall> calls_;
  std::unordered_map<uint32_t, int64_t> position_;  // event -> index in calls_
};

TimeNs GpuStart(const graph::NodeTable& nodes, const packing::Pack& pack) {
  TimeNs start = kNever;
  for (const graph::NodeId op : pack.ops) start = std::min(start, nodes.start[op.value()]);
  return start;
}

// Per pack: the call its first op's launch is, the call after which its clock is asked for, and
// the call whose op's completion on the GPU the switch can wait for instead.
void AnchorSwitches(const analysis::TraceAnalysis& a, const CountedCalls& calls,
                    const std::vector<const opt::PlannedPack*>& packs, TimeNs lead_ns, int64_t first,
                    LaunchAnchors* out) {
  const auto& g = *a.graph;
  const auto& nodes = g.nodes();
  const auto n = static_cast<int64_t>(out->calls_per_iteration);
  const auto& it = a.iterations.iterations[a.steady];
  // The GPU ops of the packs' device with the counted call that launched them, by GPU end.
  struct Ended {
    TimeNs end;
    int64_t call;  // index in the counted calls
  };
  std::vector<Ended> ended;
  const int32_t device = packs.empty() ? 0 : packs.front()->pack.device;
  for (size_t v = 0; v < nodes.size(); ++v) {
    if (nodes.kind[v] != graph::NodeKind::kGpuOp || a.trace->streams[nodes.resource[v]].device != device) continue;
    if (const int64_t call = calls.LaunchOf(graph::NodeId(static_cast<uint32_t>(v))); call >= 0) {
      ended.push_back({nodes.end[v], call});
    }
  }
  std::sort(ended.begin(), ended.end(), [](const Ended& x, const Ended& y) { return x.end < y.end; });
  for (const opt::PlannedPack* p : packs) {
    int64_t launch = std::numeric_limits<int64_t>::max();
    TimeNs api_start = kNever;
    for (const graph::NodeId op : p->pack.ops) {
      if (const int64_t call = calls.LaunchOf(op, &api_start); call >= 0) launch = std::min(launch, call);
    }
    const TimeNs gpu_start = GpuStart(nodes, p->pack);
    if (launch == std::numeric_limits<int64_t>::max()) {
      ++out->packs_without_call;
      launch = calls.FirstAt(api_start != kNever ? api_start : gpu_start);
    }
    out->first_call.push_back(launch - first);
    // At most one iteration back: the switch is asked for during the previous iteration.
    out->switch_call.push_back(std::max(calls.LastBy(gpu_start - lead_ns) - first, -n));
    // On the GPU: the op of the device that ends last at least `lead` before the pack starts,
    // within an iteration before it; its call, whose completion the switch waits for.
    const auto after = std::upper_bound(ended.begin(), ended.end(), gpu_start - lead_ns,
                                        [](TimeNs v, const Ended& x) { return v < x.end; });
    int64_t gpu_call = kNoCall;
    TimeNs gpu_lead = 0;
    if (after != ended.begin() && n > 0) {
      const Ended& e = *std::prev(after);
      if (gpu_start - e.end <= it.end - it.start && e.call - first >= -n && e.call - first < n) {
        gpu_call = e.call - first;
        gpu_lead = gpu_start - e.end;
      }
    }
    out->gpu_switch_call.push_back(gpu_call);
    out->gpu_switch_lead_ns.push_back(gpu_lead);
  }
}

// `emulate`: each op's extra time at its pack's clock, carried per (pack, stream) to a spin after
// a call of the iteration (LaunchAnchors::spins).
void PlaceSpins(const analysis::TraceAnalysis& a, const CountedCalls& calls,
                const std::vector<const opt::PlannedPack*>& packs, int64_t first, LaunchAnchors* out) {
  const auto& g = *a.graph;
  const auto& nodes = g.nodes();
  const auto n = static_cast<int64_t>(out->calls_per_iteration);
  if (n == 0) return;
  std::map<int64_t, int64_t> spin_at;  // call of the iteration -> ns
  for (const opt::PlannedPack* p : packs) {
    struct Carry {
      int64_t ns = 0;
      int64_t call = -1;  // the latest call launching an op of the pack on the stream
    };
    std::map<uint32_t, Carry> carry;  // by stream
    for (size_t k = 0; k < p->pack.ops.size() && k < p->op_extra_ns.size(); ++k) {
      const graph::NodeId op = p->pack.ops[k];
      const int64_t extra = std::max<int64_t>(0, p->op_extra_ns[k]);
      out->extra_ns += extra;
      Carry& c = carry[a.trace->gpu.stream[nodes.ref[op.value()]].value()];
      c.ns += extra;
      if (const int64_t call = calls.LaunchOf(op); call >= 0) c.call = ((call - first) % n + n) % n;
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
        out->extra_without_call_ns += c.ns;
      } else {
        spin_at[c.call] += c.ns;
      }
    }
  }
  for (const auto& [call, ns] : spin_at) out->spins.push_back({call, ns});
}

}  // namespace

LaunchAnchors AnchorPacks(const analysis::TraceAnalysis& a, const std::vector<const opt::PlannedPack*>& packs,
                          TimeNs lead_ns) {
  LaunchAnchors out;
  const CountedCalls calls(a);
  const auto& it = a.iterations.iterations[a.steady];
  const int64_t first = calls.FirstAt(it.start);
  out.calls_per_iteration = static_cast<uint32_t>(calls.FirstAt(it.end) - first);
  AnchorSwitches(a, calls, packs, lead_ns, first, &out);
  PlaceSpins(a, calls, packs, first, &out);
  return out;
}

}  // namespace emo::policy
