#include "emo/analysis/iterations.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <regex>

#include <fmt/format.h>

#include "emo/base/regex.h"

namespace emo::analysis {

using graph::NodeKind;

ThreadNodes CpuNodesByThread(const graph::Graph& g) {
  const auto& n = g.nodes();
  std::vector<std::vector<uint32_t>> out(g.trace().threads.size());
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp) out[n.resource[v]].push_back(v);
  }
  return out;
}

TimeNs MapOnThread(const graph::Graph& g, std::span<const uint32_t> nodes, const Schedule& s, TimeNs t,
                   InNode in_node) {
  const auto& n = g.nodes();
  auto it = std::upper_bound(nodes.begin(), nodes.end(), t,
                             [&](TimeNs x, uint32_t v) { return x < n.start[v]; });
  if (it == nodes.begin()) return t + (nodes.empty() ? 0 : s.start[nodes.front()] - n.start[nodes.front()]);
  uint32_t v = *(it - 1);
  if (t > n.end[v]) return s.end[v] + (t - n.end[v]);
  if (in_node == InNode::kShift || n.end[v] == n.start[v]) return std::min(s.start[v] + (t - n.start[v]), s.end[v]);
  // In double: offset x duration overflows int64 for nodes of a few seconds.
  const double fraction = static_cast<double>(t - n.start[v]) / static_cast<double>(n.end[v] - n.start[v]);
  return s.start[v] + std::llround(fraction * static_cast<double>(s.end[v] - s.start[v]));
}

int32_t IterationAt(const IterationMap& m, TimeNs time) {
  auto it = std::upper_bound(m.iterations.begin(), m.iterations.end(), time,
                             [](TimeNs x, const Iteration& itv) { return x < itv.start; });
  if (it == m.iterations.begin()) return -1;
  --it;
  return time < it->end ? static_cast<int32_t>(it - m.iterations.begin()) : -1;
}

Result<IterationMap> FindIterations(const graph::Graph& g, const std::string& regex) {
  const auto& t = g.trace();
  IterationMap m;
  m.regex = regex.empty() ? kDefaultIterationRegex : regex;
  std::string why;
  std::optional<std::regex> compiled = CompileRegex(m.regex, std::regex::ECMAScript, &why);
  if (!compiled) return InvalidArgument(fmt::format("--iteration '{}' is not a valid regex ({})", regex, why));
  const std::regex& re = *compiled;
  // The regex runs once per distinct name (std::regex is slow; names repeat every iteration).
  enum : int8_t { kUnknown, kNo, kYes };
  std::vector<int8_t> matches(t.strings.size(), kUnknown);
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    if (t.cpu.kind[i] != trace::CpuKind::kAnnotation && t.cpu.kind[i] != trace::CpuKind::kOp) continue;
    std::string_view name = t.Name(t.cpu.name[i]);
    int8_t& match = matches[t.cpu.name[i].value()];
    if (match == kUnknown) match = std::regex_search(name.begin(), name.end(), re) ? kYes : kNo;
    if (match == kNo) continue;
    // Keep top-level matches only (a regex may match nested ranges).
    if (!m.iterations.empty() && t.cpu.start[i] < m.iterations.back().end) continue;
    m.iterations.push_back({std::string(name), t.cpu.thread[i], t.cpu.start[i], t.cpu.end[i]});
  }
  const auto& n = g.nodes();
  m.node_iteration.assign(n.size(), -1);
  if (m.iterations.empty()) {
    m.from_marker = false;
    TimeNs lo = INT64_MAX, hi = INT64_MIN;
    for (uint32_t v = 0; v < n.size(); ++v) {
      lo = std::min(lo, n.start[v]);
      hi = std::max(hi, n.end[v]);
      m.node_iteration[v] = 0;
    }
    m.iterations.push_back({"whole trace", trace::ThreadId::Invalid(), lo, hi});
    return m;
  }
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp) m.node_iteration[v] = IterationAt(m, n.start[v]);
  }
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != NodeKind::kGpuOp) continue;
    // A GPU op belongs to the iteration of the call that launched it.
    for (uint32_t ei : g.InEdges(graph::NodeId(v))) {
      const auto& e = g.edges()[ei];
      if (e.kind == graph::EdgeKind::kLaunch) m.node_iteration[v] = m.node_iteration[e.src.value()];
    }
  }
  return m;
}

std::vector<TimeNs> IterationEnds(const graph::Graph& g, const IterationMap& m, const Schedule& s) {
  return IterationEnds(g, m, s, CpuNodesByThread(g));
}

std::vector<TimeNs> IterationEnds(const graph::Graph& g, const IterationMap& m, const Schedule& s,
                                  const ThreadNodes& thread_nodes) {
  const auto& n = g.nodes();
  std::vector<TimeNs> ends(m.iterations.size(), INT64_MIN);
  for (uint32_t v = 0; v < n.size(); ++v) {
    int32_t it = m.node_iteration[v];
    // CPU intervals are left out: the one after an iteration's last call reaches into the next.
    if (it < 0 || n.kind[v] == NodeKind::kCpuInterval) continue;
    ends[static_cast<size_t>(it)] = std::max(ends[static_cast<size_t>(it)], s.end[v]);
  }
  for (size_t i = 0; i < m.iterations.size(); ++i) {
    const auto& itv = m.iterations[i];
    if (itv.thread.valid()) ends[i] = std::max(ends[i], MapOnThread(g, thread_nodes[itv.thread.value()], s, itv.end));
  }
  for (size_t i = 0; i < ends.size(); ++i) {
    if (ends[i] == INT64_MIN) ends[i] = i > 0 ? ends[i - 1] : m.iterations[i].end;
  }
  return ends;
}

TimeNs FirstIterationStart(const graph::Graph& g, const IterationMap& m, const Schedule& s) {
  return FirstIterationStart(g, m, s, CpuNodesByThread(g));
}

TimeNs FirstIterationStart(const graph::Graph& g, const IterationMap& m, const Schedule& s,
                           const ThreadNodes& thread_nodes) {
  const auto& first = m.iterations.front();
  if (!first.thread.valid()) {
    TimeNs lo = INT64_MAX;
    for (TimeNs x : s.start) lo = std::min(lo, x);
    return lo;
  }
  return MapOnThread(g, thread_nodes[first.thread.value()], s, first.start);
}

std::vector<TimeNs> IterationTimes(const graph::Graph& g, const IterationMap& m, const Schedule& s) {
  return IterationTimes(g, m, s, CpuNodesByThread(g));
}

std::vector<TimeNs> IterationTimes(const graph::Graph& g, const IterationMap& m, const Schedule& s,
                                   const ThreadNodes& thread_nodes) {
  std::vector<TimeNs> ends = IterationEnds(g, m, s, thread_nodes);
  std::vector<TimeNs> times(ends.size());
  for (size_t i = 0; i < ends.size(); ++i) {
    times[i] = ends[i] - (i == 0 ? FirstIterationStart(g, m, s, thread_nodes) : ends[i - 1]);
  }
  return times;
}

IterationBounds BoundsOf(const graph::Graph& g, const IterationMap& m, const Schedule& s, size_t i) {
  const std::vector<TimeNs> ends = IterationEnds(g, m, s);
  return {i == 0 ? FirstIterationStart(g, m, s) : ends[i - 1], ends[i]};
}

size_t SteadyIteration(const std::vector<TimeNs>& measured_times) {
  if (measured_times.empty()) return 0;
  // The first iteration's start is the weakest boundary (CPU work before its first CUDA call
  // is not in the graph; warm-up effects): with three or more, it is left out.
  const size_t first = measured_times.size() >= 3 ? 1 : 0;
  std::vector<size_t> idx(measured_times.size() - first);
  std::iota(idx.begin(), idx.end(), first);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return measured_times[a] < measured_times[b]; });
  return idx[(idx.size() - 1) / 2];
}

graph::NodeId IterationSink(const graph::Graph& g, const IterationMap& m, const Schedule& s, size_t i) {
  const auto& n = g.nodes();
  graph::NodeId best;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (m.node_iteration[v] != static_cast<int32_t>(i) || n.kind[v] == graph::NodeKind::kCpuInterval) continue;
    if (!best.valid() || s.end[v] > s.end[best.value()]) best = graph::NodeId(v);
  }
  return best;
}

}  // namespace emo::analysis
