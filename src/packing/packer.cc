#include "emo/packing/packer.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

namespace emo::packing {
namespace {

using graph::NodeId;
using graph::NodeKind;

bool HasSlack(const PackOp& op, const PackOptions& o) {
  return static_cast<double>(op.slack) > o.slack_share * static_cast<double>(std::max<TimeNs>(1, op.duration));
}

// Fills a pack's summary fields from its ops.
void Summarize(Pack* p, const std::vector<const PackOp*>& ops, const PackOptions& o) {
  TimeNs busy = 0, slack_busy = 0;
  p->critical = false;
  p->first_launch = SIZE_MAX;
  for (const PackOp* op : ops) {
    busy += op->duration;
    if (HasSlack(*op, o)) {
      slack_busy += op->duration;
    } else {
      p->critical = true;
    }
    p->first_launch = std::min(p->first_launch, op->launch);
  }
  p->busy_ns = busy;
  p->slack_busy_ns = slack_busy;
  p->has_slack = 2 * slack_busy > busy;
}

// Packs from runs of a device's ops: run k is ops [cuts[k], cuts[k+1]). Each pack ends where
// the next starts, the last at the iteration end.
void EmitRuns(const DeviceOps& d, const std::vector<size_t>& cuts, const PackOptions& o, std::vector<Pack>* out) {
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    Pack p;
    p.device = d.device;
    p.start = d.ops[cuts[k]].start;
    const bool last = k + 2 == cuts.size();
    p.end = last ? std::max(d.end, p.start) : d.ops[cuts[k + 1]].start;
    std::vector<const PackOp*> ops;
    for (size_t i = cuts[k]; i < cuts[k + 1]; ++i) {
      p.ops.push_back(d.ops[i].node);
      ops.push_back(&d.ops[i]);
    }
    Summarize(&p, ops, o);
    out->push_back(std::move(p));
  }
}

// A last run shorter than the minimum joins the one before it (the cuts end with ops.size()).
void JoinShortLast(const DeviceOps& d, const PackOptions& o, std::vector<size_t>* cuts) {
  if (cuts->size() < 3) return;
  const TimeNs start = d.ops[(*cuts)[cuts->size() - 2]].start;
  if (std::max(d.end, start) - start < o.min_pack_ns) cuts->erase(cuts->end() - 2);
}

// Windows of at least the minimum length, cut where the slack class of the op that starts next
// differs from the pack's (by busy time), or at twice the minimum.
std::vector<size_t> TimeWindowCuts(const DeviceOps& d, const PackOptions& o) {
  std::vector<size_t> cuts;
  TimeNs start = 0, busy = 0, slack_busy = 0;
  for (size_t i = 0; i < d.ops.size(); ++i) {
    const PackOp& op = d.ops[i];
    if (!cuts.empty()) {
      const TimeNs span = op.start - start;
      const bool class_change = HasSlack(op, o) != (2 * slack_busy > busy);
      if (span >= o.min_pack_ns && (class_change || span >= 2 * o.min_pack_ns)) {
        cuts.push_back(i);
        busy = slack_busy = 0;
        start = op.start;
      }
    } else {
      cuts.push_back(0);
      start = op.start;
    }
    busy += op.duration;
    if (HasSlack(op, o)) slack_busy += op.duration;
  }
  cuts.push_back(d.ops.size());
  JoinShortLast(d, o, &cuts);
  return cuts;
}

// Maximal runs of ops launched by one CPU thread; a run starting less than the minimum after
// the current phase's start joins it, and a short last phase joins the one before.
std::vector<size_t> PhaseCuts(const DeviceOps& d, const PackOptions& o) {
  std::vector<size_t> cuts;
  int64_t thread = -2;
  TimeNs start = 0;
  for (size_t i = 0; i < d.ops.size(); ++i) {
    const PackOp& op = d.ops[i];
    const bool short_run = !cuts.empty() && op.start - start < o.min_pack_ns;
    if (cuts.empty() || (op.thread != thread && !short_run)) {
      cuts.push_back(i);
      start = op.start;
    }
    thread = op.thread;
  }
  cuts.push_back(d.ops.size());
  JoinShortLast(d, o, &cuts);
  return cuts;
}

// Segments where criticality or clock class changes, or at an op that waits on a sync; then
// segments shorter than the minimum merge into a neighbour, shortest first, preferring the
// neighbour of the same criticality, then of the same clock class, then the shorter one. A
// cut where an op waits on another device is never merged away (a short segment there joins
// the one after it, or stays short when it cannot): with every such op starting a pack, each
// edge of the pack graph goes to a pack that starts later, so it has no cycle. (On one device,
// contiguous packs already make every edge point forward.)
std::vector<size_t> DependencyCuts(const DeviceOps& d, const PackOptions& o) {
  const size_t n = d.ops.size();
  struct Segment {
    size_t first;       // op index
    size_t prev, next;  // neighbours (SIZE_MAX: none)
    bool hard;          // starts where an op waits on another device: its cut stays
    bool critical;      // holds an op without slack
    uint8_t clock_class;
    bool alive;
  };
  std::vector<Segment> seg;
  for (size_t i = 0; i < n; ++i) {
    const PackOp& op = d.ops[i];
    const bool critical = !HasSlack(op, o);
    const bool sync = op.waits_on_stream || op.waits_on_device;
    if (seg.empty() || sync || critical != seg.back().critical || op.clock_class != seg.back().clock_class) {
      seg.push_back({i, seg.empty() ? SIZE_MAX : seg.size() - 1, SIZE_MAX, op.waits_on_device, critical, op.clock_class, true});
      if (seg.size() >= 2) seg[seg.size() - 2].next = seg.size() - 1;
    }
  }
  auto start_of = [&](size_t s) { return d.ops[seg[s].first].start; };
  auto length = [&](size_t s) {
    const TimeNs end = seg[s].next == SIZE_MAX ? std::max(d.end, start_of(s)) : start_of(seg[s].next);
    return end - start_of(s);
  };
  using Item = std::pair<TimeNs, size_t>;  // (length, segment), shortest first
  std::priority_queue<Item, std::vector<Item>, std::greater<>> short_ones;
  for (size_t s = 0; s < seg.size(); ++s) {
    if (length(s) < o.min_pack_ns) short_ones.push({length(s), s});
  }
  size_t alive = seg.size();
  while (!short_ones.empty() && alive > 1) {
    const auto [len, top] = short_ones.top();
    const size_t s = top;  // a copy: clang before 16 cannot capture a structured binding (score)
    short_ones.pop();
    if (!seg[s].alive || length(s) != len) continue;  // merged away or grown since
    const size_t a = seg[s].prev, b = seg[s].next;
    // Merging into the previous segment removes this one's cut; taking the next one in
    // removes that one's.
    const bool can_a = a != SIZE_MAX && !seg[s].hard, can_b = b != SIZE_MAX && !seg[b].hard;
    if (!can_a && !can_b) continue;  // stays short: both its cuts are syncs
    auto score = [&](size_t x) {  // lower is better
      if (x == SIZE_MAX || (x == a && !can_a) || (x == b && !can_b)) return std::tuple<int, int, TimeNs>{2, 2, 0};
      return std::tuple<int, int, TimeNs>{seg[x].critical == seg[s].critical ? 0 : 1,
                                          seg[x].clock_class == seg[s].clock_class ? 0 : 1, length(x)};
    };
    const size_t into = score(a) <= score(b) ? a : b;
    // Merge the later of the two into the earlier one.
    const size_t keep = into == a ? a : s, gone = into == a ? s : b;
    seg[keep].critical = seg[keep].critical || seg[gone].critical;  // keep's `hard` stays
    seg[keep].next = seg[gone].next;
    if (seg[gone].next != SIZE_MAX) seg[seg[gone].next].prev = keep;
    seg[gone].alive = false;
    --alive;
    if (length(keep) < o.min_pack_ns) short_ones.push({length(keep), keep});
  }
  std::vector<size_t> cuts;
  for (size_t s = 0; s < seg.size(); ++s) {
    if (seg[s].alive) cuts.push_back(seg[s].first);
  }
  cuts.push_back(n);
  return cuts;
}

}  // namespace

std::string_view PackingName(PackingKind kind) {
  switch (kind) {
    case PackingKind::kTimeWindow:
      return "time-window";
    case PackingKind::kPhases:
      return "phases";
    case PackingKind::kPerOp:
      return "per-op";
    case PackingKind::kDependency:
      return "dependency";
  }
  return "?";
}

PackingInput InputOf(const analysis::TraceAnalysis& a, const std::function<uint8_t(uint32_t)>& classify) {
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  const auto steady = static_cast<int32_t>(a.steady);
  const TimeNs iteration_end = analysis::IterationEnds(*a.graph, a.iterations, a.timeline)[a.steady];
  std::map<int32_t, std::vector<uint32_t>> per_device;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp || a.iterations.node_iteration[v] != steady) continue;
    per_device[t.streams[n.resource[v]].device].push_back(v);
  }
  PackingInput in;
  for (auto& [device, ops] : per_device) {
    DeviceOps d;
    d.device = device;
    d.end = iteration_end;
    std::vector<uint32_t> by_launch = ops;
    std::stable_sort(by_launch.begin(), by_launch.end(), [&](uint32_t x, uint32_t y) {
      return t.gpu.correlation[n.ref[x]] < t.gpu.correlation[n.ref[y]];
    });
    std::unordered_map<uint32_t, size_t> launch_index;
    for (size_t i = 0; i < by_launch.size(); ++i) launch_index[by_launch[i]] = i;
    std::stable_sort(ops.begin(), ops.end(), [&](uint32_t x, uint32_t y) { return a.timeline.start[x] < a.timeline.start[y]; });
    for (uint32_t v : ops) {
      PackOp op;
      op.node = NodeId(v);
      op.start = a.timeline.start[v];
      op.duration = a.durations[v];
      op.slack = a.slack.slack[v];
      op.launch = launch_index[v];
      for (uint32_t ei : a.graph->InEdges(NodeId(v))) {
        const auto& e = a.graph->edges()[ei];
        if (e.kind == graph::EdgeKind::kLaunch) op.thread = n.resource[e.src.value()];
        if (e.kind == graph::EdgeKind::kEventWait) {
          const int32_t from = t.streams[n.resource[e.src.value()]].device;
          (from == device ? op.waits_on_stream : op.waits_on_device) = true;
        }
      }
      if (classify) op.clock_class = classify(n.ref[v]);
      d.ops.push_back(op);
    }
    in.devices.push_back(std::move(d));
  }
  return in;
}

std::vector<Pack> MakePacks(PackingKind kind, const PackingInput& input, const PackOptions& options) {
  std::vector<Pack> packs;
  for (const DeviceOps& d : input.devices) {
    if (d.ops.empty()) continue;
    std::vector<size_t> cuts;
    switch (kind) {
      case PackingKind::kTimeWindow:
        cuts = TimeWindowCuts(d, options);
        break;
      case PackingKind::kPhases:
        cuts = PhaseCuts(d, options);
        break;
      case PackingKind::kPerOp:
        for (size_t i = 0; i <= d.ops.size(); ++i) cuts.push_back(i);
        break;
      case PackingKind::kDependency:
        cuts = DependencyCuts(d, options);
        break;
    }
    EmitRuns(d, cuts, options, &packs);
  }
  return packs;
}

std::vector<Pack> PackSteadyIteration(const analysis::TraceAnalysis& a, const PackOptions& options) {
  return MakePacks(PackingKind::kTimeWindow, InputOf(a), options);
}

void Absorb(Pack* into, const Pack& next) {
  into->end = next.end;
  into->ops.insert(into->ops.end(), next.ops.begin(), next.ops.end());
  into->first_launch = std::min(into->first_launch, next.first_launch);
  into->critical = into->critical || next.critical;
  into->busy_ns += next.busy_ns;
  into->slack_busy_ns += next.slack_busy_ns;
  into->has_slack = 2 * into->slack_busy_ns > into->busy_ns;
}

std::vector<Pack> MergeEqualClocks(const std::vector<Pack>& packs, const std::vector<int64_t>& clocks,
                                   std::vector<int64_t>* merged_clocks) {
  std::vector<Pack> out;
  merged_clocks->clear();
  for (size_t p = 0; p < packs.size(); ++p) {
    if (!out.empty() && out.back().device == packs[p].device && merged_clocks->back() == clocks[p]) {
      Absorb(&out.back(), packs[p]);
      continue;
    }
    out.push_back(packs[p]);
    merged_clocks->push_back(clocks[p]);
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> PackGraphEdges(const std::vector<Pack>& packs,
                                                      const std::vector<std::pair<NodeId, NodeId>>& op_edges) {
  std::unordered_map<uint32_t, size_t> pack_of;
  for (size_t p = 0; p < packs.size(); ++p) {
    for (NodeId v : packs[p].ops) pack_of[v.value()] = p;
  }
  std::set<std::pair<size_t, size_t>> edges;
  for (const auto& [u, v] : op_edges) {
    const auto a = pack_of.find(u.value()), b = pack_of.find(v.value());
    if (a == pack_of.end() || b == pack_of.end() || a->second == b->second) continue;
    edges.insert({a->second, b->second});
  }
  return {edges.begin(), edges.end()};
}

bool IsAcyclic(size_t n, const std::vector<std::pair<size_t, size_t>>& edges) {
  std::vector<std::vector<size_t>> out(n);
  std::vector<size_t> in_degree(n, 0);
  for (const auto& [a, b] : edges) {
    out[a].push_back(b);
    ++in_degree[b];
  }
  std::vector<size_t> ready;
  for (size_t v = 0; v < n; ++v) {
    if (in_degree[v] == 0) ready.push_back(v);
  }
  size_t seen = 0;
  while (!ready.empty()) {
    const size_t v = ready.back();
    ready.pop_back();
    ++seen;
    for (size_t w : out[v]) {
      if (--in_degree[w] == 0) ready.push_back(w);
    }
  }
  return seen == n;
}

}  // namespace emo::packing
