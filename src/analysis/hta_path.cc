// HTA-compatible critical path (slack.h). HTA (hta/analyzers/critical_path_analysis.py) builds
// a graph of event starts and ends whose edge weights are not all wall time; this walks EMO's
// graph with those weights so that users can compare with the tool they know.
#include "emo/analysis/slack.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace emo::analysis {

using graph::Constraint;
using graph::EdgeKind;
using graph::NodeId;
using graph::NodeKind;

namespace {

// HTA's kernel-kernel delay threshold (KERNEL_KERNEL_DELAY_THRESHOLD_US).
constexpr TimeNs kKernelKernelThresholdNs = 1'500'000;

constexpr int64_t kUnreached = INT64_MIN / 4;

// HTA gives these calls a zero-weight start -> end edge: their wait is carried by sync edges.
bool IsHtaBlockingCall(std::string_view name) {
  for (std::string_view b : {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
                             "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"}) {
    if (name == b) return true;
  }
  return false;
}

// Union of the framework-operator (cpu_op) intervals of every thread, as sorted disjoint
// intervals with prefix sums, to measure how much of a CPU interval lies inside operators.
class OperatorCover {
 public:
  explicit OperatorCover(const trace::Trace& t) : per_thread_(t.threads.size()) {
    std::vector<std::vector<std::pair<TimeNs, TimeNs>>> raw(t.threads.size());
    for (size_t i = 0; i < t.cpu.size(); ++i) {
      if (t.cpu.kind[i] == trace::CpuKind::kOp && t.cpu.end[i] > t.cpu.start[i]) {
        raw[t.cpu.thread[i].value()].push_back({t.cpu.start[i], t.cpu.end[i]});
      }
    }
    for (size_t th = 0; th < raw.size(); ++th) {
      auto& r = raw[th];
      std::sort(r.begin(), r.end());
      auto& out = per_thread_[th];
      for (const auto& [s, e] : r) {
        if (!out.start.empty() && s <= out.end.back()) {
          out.end.back() = std::max(out.end.back(), e);
        } else {
          out.start.push_back(s);
          out.end.push_back(e);
        }
      }
      out.prefix.assign(out.start.size() + 1, 0);
      for (size_t i = 0; i < out.start.size(); ++i) out.prefix[i + 1] = out.prefix[i] + out.end[i] - out.start[i];
    }
  }

  // Time of [lo, hi) inside operators of `thread`.
  TimeNs Covered(uint32_t thread, TimeNs lo, TimeNs hi) const {
    if (thread >= per_thread_.size() || hi <= lo) return 0;
    const auto& u = per_thread_[thread];
    return Upto(u, hi) - Upto(u, lo);
  }

 private:
  struct Union {
    std::vector<TimeNs> start, end, prefix;
  };
  // Covered time in (-inf, x).
  static TimeNs Upto(const Union& u, TimeNs x) {
    const size_t i = static_cast<size_t>(std::upper_bound(u.start.begin(), u.start.end(), x) - u.start.begin());
    if (i == 0) return 0;
    return u.prefix[i - 1] + std::min(x, u.end[i - 1]) - u.start[i - 1];
  }
  std::vector<Union> per_thread_;
};

struct ExtraEdge {
  NodeId src;  // a GPU op
  NodeId dst;  // a blocking call
};

// HTA's GPU -> CPU sync edges: for every cuda_sync record of a context or stream sync, the last
// op (by end) on each synced stream whose launch call started before the sync call did.
std::vector<ExtraEdge> HtaSyncEdges(const graph::Graph& g, const std::vector<bool>& window) {
  const auto& t = g.trace();
  const auto& n = g.nodes();
  std::unordered_map<int64_t, uint32_t> call_of_correlation;
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    const auto k = t.cpu.kind[i];
    if ((k == trace::CpuKind::kRuntime || k == trace::CpuKind::kDriver) && t.cpu.correlation[i] >= 0) {
      call_of_correlation.emplace(t.cpu.correlation[i], i);
    }
  }
  // Per stream: (launch call start, op end, op node) of every op in the window.
  struct Launched {
    TimeNs launch_start;
    TimeNs end;
    NodeId op;
  };
  std::vector<std::vector<Launched>> per_stream(t.streams.size());
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp || !window[v]) continue;
    for (uint32_t ei : g.InEdges(NodeId(v))) {
      const auto& e = g.edges()[ei];
      if (e.kind == EdgeKind::kLaunch) {
        per_stream[n.resource[v]].push_back({n.start[e.src.value()], n.end[v], NodeId(v)});
        break;
      }
    }
  }
  // Sorted by launch, with the index of the latest-ending op so far: the op a sync ties to is
  // then one binary search away (syncs x ops would be quadratic on long traces).
  std::vector<std::vector<size_t>> latest_end(t.streams.size());
  for (size_t st = 0; st < per_stream.size(); ++st) {
    auto& ops = per_stream[st];
    std::sort(ops.begin(), ops.end(), [](const Launched& x, const Launched& y) { return x.launch_start < y.launch_start; });
    auto& best = latest_end[st];
    best.resize(ops.size());
    for (size_t k = 0; k < ops.size(); ++k) best[k] = k > 0 && ops[best[k - 1]].end >= ops[k].end ? best[k - 1] : k;
  }
  std::vector<ExtraEdge> out;
  for (size_t i = 0; i < t.syncs.size(); ++i) {
    const auto kind = t.syncs.kind[i];
    if (kind != trace::SyncKind::kContextSync && kind != trace::SyncKind::kStreamSync) continue;
    auto it = call_of_correlation.find(t.syncs.correlation[i]);
    if (it == call_of_correlation.end()) continue;
    const NodeId call = g.NodeOfCpuEvent(trace::CpuEventId(it->second));
    if (!call.valid() || !window[call.value()]) continue;
    const TimeNs call_start = n.start[call.value()];
    for (size_t st = 0; st < t.streams.size(); ++st) {
      if (t.streams[st].device != t.syncs.device[i]) continue;
      if (kind == trace::SyncKind::kStreamSync && t.streams[st].stream != t.syncs.stream[i]) continue;
      const auto& ops = per_stream[st];
      const auto launched = static_cast<size_t>(
          std::lower_bound(ops.begin(), ops.end(), call_start,
                           [](const Launched& l, TimeNs x) { return l.launch_start < x; }) -
          ops.begin());
      if (launched == 0) continue;
      const Launched& last = ops[latest_end[st][launched - 1]];
      if (last.end <= n.end[call.value()]) out.push_back({last.op, call});
    }
  }
  return out;
}

}  // namespace

CriticalPath FindHtaCriticalPath(const graph::Graph& g, const std::vector<bool>& window) {
  const auto& n = g.nodes();
  const auto& t = g.trace();
  const auto& edges = g.edges();
  const size_t num = n.size();
  const OperatorCover cover(t);

  std::vector<bool> has_sync_in(num, false);
  for (const auto& e : edges) {
    if (e.kind == EdgeKind::kHostSync) has_sync_in[e.dst.value()] = true;
  }
  const auto extra = HtaSyncEdges(g, window);
  std::vector<std::vector<NodeId>> extra_in(num);
  for (const auto& x : extra) {
    extra_in[x.dst.value()].push_back(x.src);
    has_sync_in[x.dst.value()] = true;
  }

  // Weight of the start -> end segment of v, and its category on the path.
  std::vector<TimeNs> weight(num, 0);
  for (uint32_t v = 0; v < num; ++v) {
    switch (n.kind[v]) {
      case NodeKind::kGpuOp: weight[v] = n.end[v] - n.start[v]; break;
      case NodeKind::kApiCall: {
        const auto name = t.Name(t.cpu.name[n.ref[v]]);
        weight[v] = has_sync_in[v] || IsHtaBlockingCall(name) ? 0 : n.end[v] - n.start[v];
        break;
      }
      case NodeKind::kCpuInterval: weight[v] = cover.Covered(n.resource[v], n.start[v], n.end[v]); break;
    }
  }
  // HTA gives a GPU op either a launch delay (when its stream was idle at launch: every other
  // predecessor had ended before the launch call started) or a kernel-kernel delay from the
  // previous op on its stream, never both.
  auto launch_bound = [&](NodeId op) {
    if (t.gpu.kind[n.ref[op.value()]] == trace::GpuKind::kMemset) return false;
    TimeNs launch_start = -1;
    for (uint32_t ei : g.InEdges(op)) {
      if (edges[ei].kind == EdgeKind::kLaunch) launch_start = n.start[edges[ei].src.value()];
    }
    if (launch_start < 0) return false;
    for (uint32_t ei : g.InEdges(op)) {
      const auto& o = edges[ei];
      if (o.kind == EdgeKind::kLaunch || o.constraint != Constraint::kEndToStart) continue;
      if (n.end[o.src.value()] >= launch_start) return false;
    }
    return true;
  };
  // The weight an edge adds, or -1 when HTA has no such edge.
  auto edge_weight = [&](const graph::Edge& e, bool op_launch_bound) -> TimeNs {
    const uint32_t u = e.src.value(), v = e.dst.value();
    switch (e.kind) {
      case EdgeKind::kThreadOrder:
      case EdgeKind::kEventWait:
      case EdgeKind::kHostSync:
      case EdgeKind::kCrossThread: return 0;
      case EdgeKind::kGpuContention: return -1;
      case EdgeKind::kStreamOrder: {
        const TimeNs gap = n.start[v] - n.end[u];
        return op_launch_bound || gap >= kKernelKernelThresholdNs ? -1 : std::max<TimeNs>(0, gap);
      }
      case EdgeKind::kLaunch: return op_launch_bound ? std::max<TimeNs>(0, n.start[v] - n.start[u]) : -1;
      case EdgeKind::kCount: break;
    }
    return -1;
  };

  // Longest path over event points: 2v = start of v, 2v+1 = end of v.
  std::vector<int64_t> dist(2 * num, kUnreached);
  std::vector<int64_t> pred(2 * num, -1);   // predecessor point
  std::vector<TimeNs> pred_w(2 * num, 0);   // weight of the edge from it
  std::vector<bool> pred_gap(2 * num, false);  // that edge is a launch / stream gap
  auto relax = [&](size_t to, size_t from, TimeNs w, bool gap) {
    if (dist[from] == kUnreached) return;
    if (dist[from] + w > dist[to]) {
      dist[to] = dist[from] + w;
      pred[to] = static_cast<int64_t>(from);
      pred_w[to] = w;
      pred_gap[to] = gap;
    }
  };
  for (NodeId node : g.TopologicalOrder()) {
    const uint32_t v = node.value();
    if (!window[v]) continue;
    const size_t s = 2 * size_t{v}, e = s + 1;
    dist[s] = 0;
    const bool op_launch_bound = n.kind[v] == NodeKind::kGpuOp && launch_bound(node);
    for (uint32_t ei : g.InEdges(node)) {
      const auto& ed = edges[ei];
      const uint32_t u = ed.src.value();
      if (!window[u] || ed.constraint == Constraint::kEndToEnd) continue;
      const TimeNs w = edge_weight(ed, op_launch_bound);
      if (w < 0) continue;
      const bool gap = ed.kind == EdgeKind::kLaunch || ed.kind == EdgeKind::kStreamOrder;
      relax(s, ed.constraint == Constraint::kStartToStart ? 2 * size_t{u} : 2 * size_t{u} + 1, w, gap);
    }
    relax(e, s, weight[v], false);
    for (uint32_t ei : g.InEdges(node)) {
      const auto& ed = edges[ei];
      if (ed.constraint != Constraint::kEndToEnd || !window[ed.src.value()]) continue;
      const TimeNs w = edge_weight(ed, false);
      if (w >= 0) relax(e, 2 * size_t{ed.src.value()} + 1, w, false);
    }
    for (NodeId src : extra_in[v]) relax(e, 2 * size_t{src.value()} + 1, 0, false);
  }

  CriticalPath cp;
  size_t best = SIZE_MAX;
  for (size_t p = 0; p < dist.size(); ++p) {
    if (dist[p] != kUnreached && (best == SIZE_MAX || dist[p] > dist[best])) best = p;
  }
  if (best == SIZE_MAX) return cp;
  for (int64_t p = static_cast<int64_t>(best); p >= 0; p = pred[static_cast<size_t>(p)]) {
    const auto up = static_cast<size_t>(p);
    const auto v = static_cast<uint32_t>(up / 2);
    if (cp.nodes.empty() || cp.nodes.back().value() != v) cp.nodes.push_back(NodeId(v));
    if (pred[up] < 0) continue;
    const auto from = static_cast<size_t>(pred[up]);
    if (from + 1 == up && from % 2 == 0) {
      cp.time[static_cast<size_t>(CategoryOf(g, NodeId(v)))] += pred_w[up];  // v's own segment
    } else {
      cp.time[static_cast<size_t>(pred_gap[up] ? PathCategory::kLaunch : PathCategory::kCpu)] += pred_w[up];
    }
  }
  std::reverse(cp.nodes.begin(), cp.nodes.end());
  return cp;
}

}  // namespace emo::analysis
