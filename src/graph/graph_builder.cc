// Graph construction: nodes, launch, stream FIFO and cross-thread edges, delay assignment,
// adjacency and topological order. Sync rules (event waits, host syncs) are in sync_rules.cc.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "builder_internal.h"
#include "emo/base/check.h"

namespace emo::graph {

using trace::CpuEventId;
using trace::CpuKind;
using trace::GpuOpId;
using trace::StreamId;

Result<Graph> BuildGraph(const trace::Trace& trace, const GraphOptions& options) {
  return GraphBuilder(trace, options).Build();
}

Result<Graph> GraphBuilder::Build() {
  if (t_.meta.rocm) {
    return Unsupported(fmt::format(
        "{}: a ROCm/HIP trace; EMO's graph rules and clock models cover NVIDIA CUDA traces only",
        t_.meta.source_path));
  }
  if (t_.gpu.size() == 0) {
    const uint64_t dropped = t_.diagnostics.Count(Diag::kGpuOpDropped);
    if (dropped > 0) {
      return InvalidArgument(fmt::format(
          "{}: all {} GPU op events (kernel, gpu_memcpy, gpu_memset) have missing or unreadable times, the first "
          "{}; the trace is damaged (times must be numbers in microseconds)",
          t_.meta.source_path, dropped, t_.meta.first_dropped_gpu_op));
    }
    if (t_.meta.format == "emo") {
      // EMO's tracer records GPU work only inside its window; a cut file may end before it.
      std::string end = t_.meta.run ? t_.meta.run->end_note : "";
      if (end.starts_with(t_.meta.source_path + ": ")) end.erase(0, t_.meta.source_path.size() + 2);
      if (!end.empty()) {
        return InvalidArgument(fmt::format("{}: the EMO trace holds no GPU ops (kernel, copy, set): {}",
                                           t_.meta.source_path, end));
      }
      return InvalidArgument(fmt::format(
          "{}: the EMO trace holds no GPU ops (kernel, copy, set); was its window reached (emo trace --warmup N "
          "--iterations K counts the program's iterations)?",
          t_.meta.source_path));
    }
    return InvalidArgument(fmt::format(
        "{}: the trace has no GPU ops (kernel, gpu_memcpy, gpu_memset); was it recorded with "
        "ProfilerActivity.CUDA?",
        t_.meta.source_path));
  }
  g_.trace_ = &t_;
  AddNodes();
  AddLaunchEdges();
  AddStreamOrderEdges();
  AddSyncEdges();
  AddCrossThreadEdges();
  AddContentionEdges();
  const std::vector<Edge> raw_edges = g_.edges_;
  AssignDelays();
  BuildAdjacency();
  if (!TopologicalSort().ok()) {
    // A contention edge inferred against a backward-in-time edge (negative launch latency,
    // skew tolerance) closed a cycle: drop the contention edges into the unordered nodes.
    std::vector<bool> ordered(g_.nodes_.size(), false);
    for (NodeId v : g_.topo_) ordered[v.value()] = true;
    g_.edges_.clear();
    for (const Edge& e : raw_edges) {
      if (e.kind == EdgeKind::kGpuContention && !ordered[e.dst.value()]) {
        g_.diagnostics_.Add(Diag::kContentionEdgeDropped);
        continue;
      }
      g_.edges_.push_back(e);
    }
    AssignDelays();
    BuildAdjacency();
    EMO_RETURN_IF_ERROR(TopologicalSort());
  }
  return std::move(g_);
}

NodeId GraphBuilder::NewNode(NodeKind kind, uint32_t ref, uint32_t resource, TimeNs start,
                             TimeNs end) {
  auto& n = g_.nodes_;
  NodeId id(static_cast<uint32_t>(n.size()));
  n.kind.push_back(kind);
  n.ref.push_back(ref);
  n.resource.push_back(resource);
  n.start.push_back(start);
  n.end.push_back(std::max(start, end));
  n.duration.push_back(std::max<TimeNs>(0, end - start));
  n.is_root.push_back(false);
  return id;
}

void GraphBuilder::AddEdge(NodeId src, NodeId dst, EdgeKind kind, Constraint c, TimeNs min_delay) {
  EMO_CHECK(src.valid() && dst.valid() && src != dst);
  g_.edges_.push_back({src, dst, kind, c, min_delay});
}

void GraphBuilder::AddNodes() {
  const auto& cpu = t_.cpu;
  g_.cpu_node_.assign(cpu.size(), NodeId::Invalid());
  thread_api_.assign(t_.threads.size(), {});
  for (uint32_t i = 0; i < cpu.size(); ++i) {
    if (cpu.kind[i] != CpuKind::kRuntime && cpu.kind[i] != CpuKind::kDriver) continue;
    thread_api_[cpu.thread[i].value()].push_back(i);
    if (cpu.correlation[i] >= 0) api_by_corr_.emplace(cpu.correlation[i], i);
  }
  // CPU side: per thread, API calls joined by the CPU intervals between them, led by the work
  // the thread recorded before its first call.
  points_ = trace::RecordedCpuPoints(t_);
  ApiCallsByEnd();
  for (uint32_t th = 0; th < thread_api_.size(); ++th) {
    const auto& calls = thread_api_[th];
    if (calls.empty()) continue;
    NodeId prev;
    TimeNs prev_end = 0;
    const auto& p = points_[th];
    if (!p.empty() && p.front() < cpu.start[calls.front()]) {
      prev = AddLeadingInterval(th, p.front(), cpu.start[calls.front()]);
      prev_end = g_.nodes_.end[prev.value()];
    }
    for (uint32_t ev : calls) {
      TimeNs s = cpu.start[ev], e = cpu.end[ev];
      if (prev.valid()) {
        if (s < prev_end) {
          // Overlapping calls on one thread (nested driver call, or clock jitter): keep order.
          g_.diagnostics_.Add(Diag::kCpuOverlapNotNested);
          s = prev_end;
          e = std::max(e, s);
        }
        if (g_.nodes_.kind[prev.value()] == NodeKind::kApiCall) {
          const NodeId gap = AddInterval(th, prev, prev_end, s);
          next_on_thread_.emplace(prev.value(), gap.value());
          prev = gap;
        }
        NodeId api = NewNode(NodeKind::kApiCall, ev, th, s, e);
        AddEdge(prev, api, EdgeKind::kThreadOrder, Constraint::kEndToStart, 0);
        g_.cpu_node_[ev] = api;
        prev = api;
      } else {
        prev = NewNode(NodeKind::kApiCall, ev, th, s, e);
        g_.cpu_node_[ev] = prev;
      }
      prev_end = g_.nodes_.end[prev.value()];
    }
  }
  // GPU side: one node per op; launch order per stream.
  const auto& gpu = t_.gpu;
  g_.gpu_node_.assign(gpu.size(), NodeId::Invalid());
  launch_time_.assign(gpu.size(), 0);
  launcher_.assign(gpu.size(), CpuEventId::Invalid());
  stream_ops_.assign(t_.streams.size(), {});
  device_streams_.clear();
  for (uint32_t s = 0; s < t_.streams.size(); ++s) {
    auto dev = static_cast<size_t>(std::max(0, t_.streams[s].device));
    if (device_streams_.size() <= dev) device_streams_.resize(dev + 1);
    device_streams_[dev].push_back(StreamId(s));
  }
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    g_.gpu_node_[i] = NewNode(NodeKind::kGpuOp, i, gpu.stream[i].value(), gpu.start[i], gpu.end[i]);
    CpuEventId api = ApiByCorrelation(gpu.correlation[i]);
    launcher_[i] = api;
    launch_time_[i] = api.valid() ? t_.cpu.start[api.value()] : gpu.start[i];
    stream_ops_[gpu.stream[i].value()].push_back(i);
  }
  // A stream is FIFO: execution order is launch order. Ops are kept in start order; their
  // launch times, for "last op launched before t" lookups, are made non-decreasing: an op
  // launched before the trace window (no launch call) counts as launched with its predecessor.
  stream_launch_times_.assign(stream_ops_.size(), {});
  for (size_t s = 0; s < stream_ops_.size(); ++s) {
    auto& ops = stream_ops_[s];
    std::stable_sort(ops.begin(), ops.end(), [&](uint32_t a, uint32_t b) {
      return gpu.start[a] < gpu.start[b];
    });
    TimeNs running = INT64_MIN;
    for (uint32_t op : ops) {
      if (launcher_[op].valid()) running = std::max(running, launch_time_[op]);
      launch_time_[op] = running;
      stream_launch_times_[s].push_back(running);
    }
  }
}

CpuEventId GraphBuilder::ApiByCorrelation(int64_t correlation) const {
  if (correlation < 0) return CpuEventId::Invalid();
  auto it = api_by_corr_.find(correlation);
  return it == api_by_corr_.end() ? CpuEventId::Invalid() : CpuEventId(it->second);
}

GpuOpId GraphBuilder::LastLaunchedBefore(StreamId stream, TimeNs t) const {
  const auto& times = stream_launch_times_[stream.value()];
  auto it = std::lower_bound(times.begin(), times.end(), t);
  if (it == times.begin()) return GpuOpId::Invalid();
  return GpuOpId(stream_ops_[stream.value()][static_cast<size_t>(it - times.begin()) - 1]);
}

GpuOpId GraphBuilder::FirstLaunchedAfter(StreamId stream, TimeNs t) const {
  const auto& times = stream_launch_times_[stream.value()];
  auto it = std::lower_bound(times.begin(), times.end(), t);
  if (it == times.end()) return GpuOpId::Invalid();
  return GpuOpId(stream_ops_[stream.value()][static_cast<size_t>(it - times.begin())]);
}

void GraphBuilder::AddLaunchEdges() {
  const auto& gpu = t_.gpu;
  std::vector<uint32_t> ops_per_launch;
  std::unordered_map<uint32_t, uint32_t> launched_count;
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    CpuEventId api = launcher_[i];
    if (!api.valid()) {
      g_.diagnostics_.Add(gpu.correlation[i] < 0 ? Diag::kGpuOpMissingCorrelation
                                                 : Diag::kGpuOpUnlaunched);
      continue;
    }
    ++launched_count[api.value()];
    if (gpu.start[i] < t_.cpu.start[api.value()]) g_.diagnostics_.Add(Diag::kNegativeLaunchLatency);
    AddEdge(g_.cpu_node_[api.value()], g_.gpu_node_[i], EdgeKind::kLaunch,
            Constraint::kStartToStart, o_.launch_latency_floor_ns);
  }
  for (auto [api, n] : launched_count) {
    if (n > 1 && ApiName(CpuEventId(api)).find("GraphLaunch") != std::string_view::npos) {
      g_.diagnostics_.Add(Diag::kCudaGraphKernels, n);
    }
  }
}

void GraphBuilder::MeasureQueuedStreamGap() {
  const auto& gpu = t_.gpu;
  std::vector<TimeNs> gaps;
  for (const auto& ops : stream_ops_) {
    for (size_t k = 1; k < ops.size(); ++k) {
      const uint32_t a = ops[k - 1], b = ops[k];
      const CpuEventId call = launcher_[b];
      if (!call.valid() || t_.cpu.end[call.value()] + o_.queued_lead_ns > gpu.end[a]) continue;
      if (gpu.start[b] >= gpu.end[a]) gaps.push_back(gpu.start[b] - gpu.end[a]);
    }
  }
  g_.queued_stream_gap_pairs_ = gaps.size();
  g_.queued_stream_gap_ns_ = -1;
  if (gaps.empty() || gaps.size() < o_.queued_min_pairs) return;
  auto mid = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
  std::nth_element(gaps.begin(), mid, gaps.end());
  g_.queued_stream_gap_ns_ = *mid;
}

void GraphBuilder::AddStreamOrderEdges() {
  MeasureQueuedStreamGap();
  for (const auto& ops : stream_ops_) {
    for (size_t k = 1; k < ops.size(); ++k) {
      uint32_t a = ops[k - 1], b = ops[k];
      if (t_.gpu.start[b] < t_.gpu.end[a]) g_.diagnostics_.Add(Diag::kStreamOverlap);
      AddEdge(g_.gpu_node_[a], g_.gpu_node_[b], EdgeKind::kStreamOrder, Constraint::kEndToStart, 0);
    }
  }
}

// Hand-offs between threads. A thread that sat idle for a long time with no recorded CPU
// event (the main thread inside backward() while the autograd engine works; the autograd thread
// until the forward pass hands it the loss; a thread waiting for a DataLoader batch) resumed
// when another thread let it. The likeliest waker is the latest API call that ended on another
// thread while it slept. The interval that slept ends no earlier than the waker's end plus the
// observed gap (an end constraint), its own CPU cost being the work outside the quiet span;
// a thread's first recorded work starts no earlier than the last call of another thread before
// it (a start constraint: nothing earlier on the thread holds it). Every hand-off is an edge in
// the direction it happened, so shortening either thread's work moves the other. A long quiet
// span with no waker stays CPU time: what the thread waited for is not in the trace.
void GraphBuilder::ApiCallsByEnd() {
  const auto& cpu = t_.cpu;
  calls_by_end_.clear();
  for (const auto& calls : thread_api_) calls_by_end_.insert(calls_by_end_.end(), calls.begin(), calls.end());
  std::sort(calls_by_end_.begin(), calls_by_end_.end(), [&](uint32_t a, uint32_t b) { return cpu.end[a] < cpu.end[b]; });
  call_ends_.resize(calls_by_end_.size());
  for (size_t i = 0; i < calls_by_end_.size(); ++i) call_ends_[i] = cpu.end[calls_by_end_[i]];
}

CpuEventId GraphBuilder::WakerOf(uint32_t thread, TimeNs lo, TimeNs hi) const {
  if (thread_api_.size() < 2) return CpuEventId::Invalid();
  auto it = std::upper_bound(call_ends_.begin(), call_ends_.end(), hi);
  while (it != call_ends_.begin()) {
    --it;
    if (*it <= lo) break;
    const uint32_t other = calls_by_end_[static_cast<size_t>(it - call_ends_.begin())];
    if (t_.cpu.thread[other].value() != thread) return CpuEventId(other);
  }
  return CpuEventId::Invalid();
}

NodeId GraphBuilder::AddInterval(uint32_t thread, NodeId prev, TimeNs lo, TimeNs hi) {
  NodeId gap = NewNode(NodeKind::kCpuInterval, g_.nodes_.ref[prev.value()], thread, lo, hi);
  AddEdge(prev, gap, EdgeKind::kThreadOrder, Constraint::kEndToStart, 0);
  if (hi - lo < o_.cross_thread_idle_ns) return gap;
  // The longest span inside the interval with no recorded CPU event: where the thread slept.
  const auto& p = points_[thread];
  auto first = std::upper_bound(p.begin(), p.end(), lo);
  auto last = std::lower_bound(p.begin(), p.end(), hi);
  TimeNs quiet_lo = lo, quiet_hi = lo, before = lo;
  for (auto it = first;; ++it) {
    const TimeNs x = it == last ? hi : *it;
    if (x - before > quiet_hi - quiet_lo) {
      quiet_lo = before;
      quiet_hi = x;
    }
    before = x;
    if (it == last) break;
  }
  if (quiet_hi - quiet_lo < o_.cross_thread_idle_ns) return gap;  // CPU work, not a wait
  const CpuEventId waker = WakerOf(thread, quiet_lo, quiet_hi);
  if (!waker.valid()) return gap;
  wakes_.push_back({gap, waker, Constraint::kEndToEnd});
  // The interval's own CPU work is what lies outside the quiet span.
  g_.nodes_.duration[gap.value()] = (hi - lo) - (quiet_hi - quiet_lo);
  return gap;
}

NodeId GraphBuilder::AddLeadingInterval(uint32_t thread, TimeNs lo, TimeNs hi) {
  // The thread's first recorded work: it woke at `lo`, after whatever another thread last did.
  NodeId lead = NewNode(NodeKind::kCpuInterval, CpuEventId::Invalid().value(), thread, lo, hi);
  const CpuEventId waker = WakerOf(thread, INT64_MIN, lo);
  if (waker.valid()) wakes_.push_back({lead, waker, Constraint::kEndToStart});
  return lead;
}

void GraphBuilder::AddCrossThreadEdges() {
  for (const auto& w : wakes_) {
    AddEdge(g_.cpu_node_[w.waker.value()], w.woken, EdgeKind::kCrossThread, w.constraint, 0);
  }
}

// Concurrent kernels share the SMs: a kernel queued behind a GPU-filling kernel of another
// stream starts when that kernel's last wave frees SMs (shortly before it ends) or when it
// ends, later than any of its own dependencies allow. Without an edge the gap would be
// charged to the op's stream predecessor, and a what-if that slows the other kernel would not
// move it. The rule: an op whose measured start is more than contention_gap_ns after its
// latest constraint gets an edge from the op of another stream on the same device whose end
// is nearest its start: ended at most contention_window_ns before it, or still running in its
// last contention_tail_fraction. The edge's delay is the observed offset, negative when the
// op started in the other op's tail, so the op keeps its place relative to that end.
void GraphBuilder::AddContentionEdges() {
  const auto& n = g_.nodes_;
  const size_t num = n.size();
  std::vector<TimeNs> ready(num, INT64_MIN);
  for (const Edge& e : g_.edges_) {
    if (e.constraint == Constraint::kEndToEnd) continue;
    TimeNs src = e.constraint == Constraint::kStartToStart ? n.start[e.src.value()] : n.end[e.src.value()];
    ready[e.dst.value()] = std::max(ready[e.dst.value()], src + e.delay);
  }
  // Per device, GPU op nodes by measured end.
  std::vector<std::vector<uint32_t>> by_end(device_streams_.size());
  TimeNs longest = 0;
  for (uint32_t i = 0; i < t_.gpu.size(); ++i) {
    auto dev = static_cast<size_t>(std::max(0, t_.streams[t_.gpu.stream[i].value()].device));
    by_end[dev].push_back(g_.gpu_node_[i].value());
    longest = std::max(longest, n.duration[g_.gpu_node_[i].value()]);
  }
  for (auto& v : by_end) {
    std::sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) { return n.end[a] < n.end[b]; });
  }
  const auto max_tail = static_cast<TimeNs>(static_cast<double>(longest) * o_.contention_tail_fraction);
  for (uint32_t i = 0; i < t_.gpu.size(); ++i) {
    const uint32_t v = g_.gpu_node_[i].value();
    if (ready[v] == INT64_MIN || n.start[v] - ready[v] <= o_.contention_gap_ns) continue;
    auto dev = static_cast<size_t>(std::max(0, t_.streams[t_.gpu.stream[i].value()].device));
    const auto& ends = by_end[dev];
    // Candidates: ends in [start - window, start + max_tail].
    auto it = std::lower_bound(ends.begin(), ends.end(), n.start[v] - o_.contention_window_ns,
                               [&](uint32_t u, TimeNs x) { return n.end[u] < x; });
    uint32_t best = UINT32_MAX;
    TimeNs best_dist = INT64_MAX;
    // Bounded scan: a trace with one very long op (a NCCL kernel waiting for peers) widens
    // the window; the nearest ends are what matter.
    int budget = 256;
    for (; it != ends.end() && n.end[*it] <= n.start[v] + max_tail && budget-- > 0; ++it) {
      const uint32_t u = *it;
      if (n.resource[u] == n.resource[v] || n.start[u] >= n.start[v] || n.end[u] <= ready[v]) continue;
      const TimeNs overlap = n.end[u] - n.start[v];
      if (overlap > 0 && static_cast<double>(overlap) >
                             o_.contention_tail_fraction * static_cast<double>(n.duration[u])) {
        continue;
      }
      const TimeNs dist = overlap < 0 ? -overlap : overlap;
      if (dist < best_dist) {
        best_dist = dist;
        best = u;
      }
    }
    if (best == UINT32_MAX) continue;
    AddEdge(NodeId(best), NodeId(v), EdgeKind::kGpuContention, Constraint::kEndToStart,
            n.start[v] - n.end[best]);
    g_.diagnostics_.Add(Diag::kGpuContentionEdge);
  }
}

// Delay assignment (the departure from a plain longest-path graph, cf. HTA's fixed weights):
// for each node, of its start constraints the one whose source is latest (source time + its
// physical minimum delay) is binding and gets the observed gap, so a replay with measured
// durations reproduces the measured start exactly; the others keep their minimum delay,
// clamped so they never push the node past its measured start. A blocking call whose sync
// sources end after it started was waiting: its duration becomes its own CPU cost and the
// binding sync edge carries the observed return latency.
void GraphBuilder::AssignDelays() {
  auto& n = g_.nodes_;
  auto& edges = g_.edges_;
  const size_t num = n.size();
  std::vector<int64_t> best_ready(num, INT64_MIN), best_end_src(num, INT64_MIN);
  std::vector<uint32_t> best_start_edge(num, UINT32_MAX);
  auto src_time = [&](const Edge& e) {
    return e.constraint == Constraint::kStartToStart ? n.start[e.src.value()] : n.end[e.src.value()];
  };
  for (uint32_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    uint32_t v = e.dst.value();
    if (e.constraint == Constraint::kEndToEnd) {
      best_end_src[v] = std::max(best_end_src[v], n.end[e.src.value()]);
      continue;
    }
    if (e.kind == EdgeKind::kHostSync) continue;  // delay set exactly below
    TimeNs ready = src_time(e) + e.delay;
    if (ready > best_ready[v]) {
      best_ready[v] = ready;
      best_start_edge[v] = i;
    }
  }
  for (uint32_t i = 0; i < edges.size(); ++i) {
    Edge& e = edges[i];
    uint32_t v = e.dst.value();
    if (e.constraint == Constraint::kEndToEnd) {
      // Only a call that was still waiting when its source ended carries the observed return
      // latency; a call that started after its sources ended keeps the minimum (slack stays).
      TimeNs room = std::max<TimeNs>(0, n.end[v] - n.end[e.src.value()]);
      const bool waited = best_end_src[v] > n.start[v];
      e.delay = waited && n.end[e.src.value()] == best_end_src[v] ? room : std::clamp<TimeNs>(e.delay, 0, room);
      continue;
    }
    if (e.kind == EdgeKind::kHostSync) {
      // Redirected synchronous-copy wait: always the observed return latency.
      e.delay = std::max<TimeNs>(0, n.start[v] - src_time(e));
      continue;
    }
    if (e.kind == EdgeKind::kGpuContention) {
      // Exact observed offset (may be negative: the op started in the other op's tail).
      e.delay = n.start[v] - src_time(e);
      continue;
    }
    TimeNs room = std::max<TimeNs>(0, n.start[v] - src_time(e));
    e.delay = (i == best_start_edge[v]) ? room : std::clamp<TimeNs>(e.delay, 0, room);
  }
  for (uint32_t v = 0; v < num; ++v) {
    n.is_root[v] = best_start_edge[v] == UINT32_MAX;
    // A blocking call that waited keeps only its own CPU cost (a cross-thread wait's
    // interval had its own cost set when its edge was made).
    if (n.kind[v] == NodeKind::kApiCall && best_end_src[v] != INT64_MIN && best_end_src[v] > n.start[v]) {
      n.duration[v] = std::min(n.duration[v], o_.blocking_call_floor_ns);
    }
  }
  std::fill(std::begin(g_.edge_counts_), std::end(g_.edge_counts_), 0);
  for (const Edge& e : edges) ++g_.edge_counts_[static_cast<size_t>(e.kind)];
}

void GraphBuilder::BuildAdjacency() {
  const size_t num = g_.nodes_.size();
  auto fill = [&](std::vector<uint32_t>& offsets, std::vector<uint32_t>& index, bool incoming) {
    offsets.assign(num + 1, 0);
    for (const Edge& e : g_.edges_) ++offsets[(incoming ? e.dst : e.src).value() + 1];
    std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
    index.assign(g_.edges_.size(), 0);
    std::vector<uint32_t> cursor(offsets.begin(), offsets.end() - 1);
    for (uint32_t i = 0; i < g_.edges_.size(); ++i) {
      index[cursor[(incoming ? g_.edges_[i].dst : g_.edges_[i].src).value()]++] = i;
    }
  };
  fill(g_.in_offsets_, g_.in_index_, true);
  fill(g_.out_offsets_, g_.out_index_, false);
}

// Finds one cycle among the nodes Kahn's algorithm left (indegree > 0) and names its edges.
std::string GraphBuilder::DescribeCycle(const std::vector<uint32_t>& indegree) const {
  const size_t num = g_.nodes_.size();
  // Walk backwards along unresolved in-edges until a node repeats.
  uint32_t v = 0;
  while (v < num && indegree[v] == 0) ++v;
  if (v == num) return "?";
  std::vector<int64_t> seen_at(num, -1);
  std::vector<uint32_t> path;
  while (seen_at[v] < 0) {
    seen_at[v] = static_cast<int64_t>(path.size());
    uint32_t next = UINT32_MAX;
    for (uint32_t ei : g_.InEdges(NodeId(v))) {
      uint32_t u = g_.edges_[ei].src.value();
      if (indegree[u] > 0) {
        next = ei;
        break;
      }
    }
    if (next == UINT32_MAX) return "?";
    path.push_back(next);
    v = g_.edges_[next].src.value();
  }
  std::string out;
  for (size_t k = static_cast<size_t>(seen_at[v]); k < path.size() && k < static_cast<size_t>(seen_at[v]) + 8; ++k) {
    const Edge& e = g_.edges_[path[k]];
    out += fmt::format("{}{}[{}ns] ", out.empty() ? "" : "<- ", EdgeKindName(e.kind), e.delay);
  }
  return out;
}

Status GraphBuilder::TopologicalSort() {
  const size_t num = g_.nodes_.size();
  std::vector<uint32_t> indegree(num, 0);
  for (const Edge& e : g_.edges_) ++indegree[e.dst.value()];
  // Kahn's algorithm seeded in measured-start order keeps the order close to time order.
  std::vector<uint32_t> ready;
  for (uint32_t v = 0; v < num; ++v) {
    if (indegree[v] == 0) ready.push_back(v);
  }
  g_.topo_.clear();
  g_.topo_.reserve(num);
  for (size_t head = 0; head < ready.size(); ++head) {
    NodeId v(ready[head]);
    g_.topo_.push_back(v);
    for (uint32_t ei : g_.OutEdges(v)) {
      uint32_t w = g_.edges_[ei].dst.value();
      if (--indegree[w] == 0) ready.push_back(w);
    }
  }
  if (g_.topo_.size() != num) {
    return Internal(fmt::format("{}: dependency graph has a cycle ({} of {} nodes ordered): {}",
                                t_.meta.source_path, g_.topo_.size(), num, DescribeCycle(indegree)));
  }
  return Status::Ok();
}

}  // namespace emo::graph
