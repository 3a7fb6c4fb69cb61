#include "emo/analysis/joint_replay.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "emo/analysis/iterations.h"
#include "emo/analysis/overhead.h"
#include "emo/base/check.h"

namespace emo::analysis {
namespace {

constexpr TimeNs kNotYet = std::numeric_limits<TimeNs>::min();

// A matched collective's member in one of the analyses.
struct Member {
  size_t analysis;
  uint32_t node;
  size_t index;   // in MatchedCollective::members
  TimeNs to_job;  // trace time + to_job = job clock
  TimeNs tail;    // measured end - last arrival; <= 0: it did not wait for the others
};

// The analysis of rank `rank`, or analyses.size().
size_t IndexOfRank(std::span<const TraceAnalysis* const> analyses, int64_t rank) {
  for (size_t i = 0; i < analyses.size(); ++i) {
    if (analyses[i]->trace->meta.rank == rank) return i;
  }
  return analyses.size();
}

// Per analysis: what puts its trace's times on the job clock (0 for a rank the job lacks).
std::vector<TimeNs> ToJob(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses) {
  std::vector<TimeNs> out(analyses.size(), 0);
  for (const RankWait& w : job.ranks) {
    if (const size_t i = IndexOfRank(analyses, w.rank); i < analyses.size()) out[i] = w.trace_to_job_ns;
  }
  return out;
}

// The members of each of job.collectives found in `analyses`.
std::vector<std::vector<Member>> MembersOf(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses) {
  const std::vector<TimeNs> to_job = ToJob(job, analyses);
  std::vector<std::vector<Member>> out(job.collectives.size());
  for (size_t c = 0; c < job.collectives.size(); ++c) {
    const MatchedCollective& mc = job.collectives[c];
    const TimeNs arrival = mc.members[mc.last].start;
    for (size_t k = 0; k < mc.members.size(); ++k) {
      const auto& m = mc.members[k];
      const size_t i = IndexOfRank(analyses, m.rank);
      if (i == analyses.size() || m.op == UINT32_MAX) continue;
      const graph::Graph& g = *analyses[i]->graph;
      if (m.op >= g.trace().gpu.size()) continue;
      const graph::NodeId node = g.NodeOfGpuOp(trace::GpuOpId(m.op));
      if (!node.valid()) continue;
      out[c].push_back({i, node.value(), k, to_job[i], m.end - arrival});
    }
  }
  return out;
}

}  // namespace

JointSchedule JointReplay(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                          std::span<const std::vector<TimeNs>* const> durations, JobExchange* exchange) {
  const std::vector<std::vector<Member>> members = MembersOf(job, analyses);
  std::vector<std::vector<TimeNs>> d(analyses.size());
  for (size_t i = 0; i < analyses.size(); ++i) d[i] = *durations[i];
  JointSchedule s;
  // A member that waited runs only its tail; the wait comes from the arrival bound.
  for (const auto& list : members) {
    for (const Member& m : list) {
      if (m.tail <= 0) continue;
      d[m.analysis][m.node] = std::min(d[m.analysis][m.node], m.tail);
      ++s.members_bound;
    }
  }
  std::vector<TimeNs> arrival(members.size(), kNotYet);
  std::vector<std::vector<TimeNs>> bounds(analyses.size()), next_bounds(analyses.size());
  s.ranks.resize(analyses.size());
  const size_t max_passes = members.size() + 2;
  for (size_t pass = 1; pass <= max_passes; ++pass) {
    for (size_t i = 0; i < analyses.size(); ++i) next_bounds[i].assign(d[i].size(), kNotYet);
    for (size_t c = 0; c < members.size(); ++c) {
      if (arrival[c] == kNotYet) continue;
      for (const Member& m : members[c]) {
        if (m.tail <= 0) continue;
        TimeNs& b = next_bounds[m.analysis][m.node];
        b = std::max(b, arrival[c] - m.to_job + m.tail);
      }
    }
    // A rank whose bounds did not move keeps its schedule.
    for (size_t i = 0; i < analyses.size(); ++i) {
      if (pass > 1 && next_bounds[i] == bounds[i]) continue;
      bounds[i].swap(next_bounds[i]);
      s.ranks[i] = Replay(*analyses[i]->graph, d[i], bounds[i]);
    }
    std::vector<TimeNs> next(members.size(), kNotYet);
    for (size_t c = 0; c < members.size(); ++c) {
      for (const Member& m : members[c]) next[c] = std::max(next[c], s.ranks[m.analysis].start[m.node] + m.to_job);
    }
    if (exchange != nullptr) exchange->AllReduce(next, JobExchange::Reduce::kMax);
    s.passes = pass;
    if (next == arrival) {
      s.converged = true;
      break;
    }
    arrival = std::move(next);
  }
  s.durations = std::move(d);
  s.end_bounds = std::move(bounds);
  s.arrival_limits.resize(analyses.size());
  for (size_t i = 0; i < analyses.size(); ++i) {
    s.arrival_limits[i].assign(s.durations[i].size(), std::numeric_limits<TimeNs>::max());
  }
  // The member that arrived last, the first in the collective's order on a tie: the max of the
  // negated indices.
  std::vector<int64_t> last(members.size(), kNotYet);
  for (size_t c = 0; c < members.size(); ++c) {
    if (arrival[c] == kNotYet) continue;
    for (const Member& m : members[c]) {
      s.arrival_limits[m.analysis][m.node] = arrival[c] - m.to_job;
      if (s.ranks[m.analysis].start[m.node] + m.to_job == arrival[c]) {
        last[c] = std::max(last[c], -static_cast<int64_t>(m.index));
      }
    }
  }
  std::vector<int64_t> bound{static_cast<int64_t>(s.members_bound)};
  if (exchange != nullptr) {
    exchange->AllReduce(last, JobExchange::Reduce::kMax);
    exchange->AllReduce(bound, JobExchange::Reduce::kSum);
  }
  s.members_bound = static_cast<size_t>(bound[0]);
  s.last_member.resize(last.size());
  for (size_t c = 0; c < last.size(); ++c) s.last_member[c] = last[c] == kNotYet ? -1 : -last[c];
  s.arrival = std::move(arrival);
  return s;
}

namespace {

// What the process of a rank found walking its part of the joint critical path: the segment,
// and where the walk goes on (a member's op on its own rank), or that it ended.
struct PathStep {
  JointPathSegment seg;
  TimeNs from_ns = 0, to_ns = 0;  // the steady iteration on the job clock (the first step's)
  bool found = false;             // false: the first step found no iteration sink
  bool goes_on = false;
  int64_t next_rank = -1;
  uint32_t next_op = UINT32_MAX;
  TimeNs next_until = 0;          // on the next rank's own clock
};

nlohmann::json PathStepJson(const PathStep& st) {
  const CriticalPath& cp = st.seg.path;
  nlohmann::json time = nlohmann::json::array();
  for (TimeNs t : cp.time) time.push_back(t);
  return {{"rank", st.seg.rank},      {"seg_from", st.seg.from_ns}, {"seg_to", st.seg.to_ns},
          {"nodes", st.seg.nodes},    {"time", time},               {"stop", static_cast<int>(cp.stop)},
          {"head", cp.head_gap_ns},   {"tail", cp.tail_gap_ns},     {"from", st.from_ns},
          {"to", st.to_ns},           {"found", st.found},          {"goes_on", st.goes_on},
          {"next_rank", st.next_rank}, {"next_op", st.next_op},     {"next_until", st.next_until}};
}

PathStep PathStepOf(const nlohmann::json& j) {
  PathStep st;
  st.seg.rank = j["rank"];
  st.seg.from_ns = j["seg_from"];
  st.seg.to_ns = j["seg_to"];
  st.seg.nodes = j["nodes"];
  for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) st.seg.path.time[c] = j["time"][c];
  st.seg.path.stop = static_cast<CriticalPath::Stop>(j["stop"].get<int>());
  st.seg.path.head_gap_ns = j["head"];
  st.seg.path.tail_gap_ns = j["tail"];
  st.from_ns = j["from"];
  st.to_ns = j["to"];
  st.found = j["found"];
  st.goes_on = j["goes_on"];
  st.next_rank = j["next_rank"];
  st.next_op = j["next_op"];
  st.next_until = j["next_until"];
  return st;
}

}  // namespace

JointCriticalPath FindJointCriticalPath(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                                        const JointSchedule& s, JobExchange* exchange) {
  JointCriticalPath p;
  if (s.durations.size() != analyses.size()) return p;
  const std::vector<std::vector<Member>> members = MembersOf(job, analyses);
  std::map<std::pair<size_t, uint32_t>, size_t> collective_of;  // (analysis, node) -> collective
  for (size_t c = 0; c < members.size(); ++c) {
    for (const Member& m : members[c]) collective_of[{m.analysis, m.node}] = c;
  }
  const std::vector<TimeNs> to_job = ToJob(job, analyses);
  std::map<int64_t, TimeNs> rank_to_job;
  for (const RankWait& w : job.ranks) rank_to_job[w.rank] = w.trace_to_job_ns;
  // Every rank's steady iteration, in input order: the walk starts at the slowest.
  const std::vector<TimeNs> local = JointSteadyTimes(analyses, s);
  std::vector<std::pair<int64_t, TimeNs>> mine;  // (rank, steady)
  for (size_t i = 0; i < analyses.size(); ++i) mine.emplace_back(analyses[i]->trace->meta.rank, local[i]);
  const std::vector<std::pair<int64_t, TimeNs>> steady = GatherInOrder(exchange, std::move(mine));
  if (steady.empty()) return p;
  size_t slowest = 0;
  for (size_t i = 1; i < steady.size(); ++i) {
    if (steady[i].second > steady[slowest].second) slowest = i;
  }
  // The walk, one segment per step, each made where its rank is.
  int64_t rank = steady[slowest].first;
  uint32_t op = UINT32_MAX;  // the first step starts at the steady iteration's sink
  TimeNs until = 0;
  for (size_t guard = 0; guard <= job.collectives.size() + 1; ++guard) {
    PathStep st;
    const size_t r = IndexOfRank(analyses, rank);
    if (r < analyses.size()) {
      const TraceAnalysis& a = *analyses[r];
      graph::NodeId sink;
      if (op == UINT32_MAX) {
        const IterationBounds b = BoundsOf(*a.graph, a.iterations, s.ranks[r], a.steady);
        sink = IterationSink(*a.graph, a.iterations, s.ranks[r], a.steady);
        st.from_ns = b.start + to_job[r];
        st.to_ns = b.end + to_job[r];
        until = b.end;
      } else {
        st.from_ns = p.from_ns;
        st.to_ns = p.to_ns;
        if (op < a.graph->trace().gpu.size()) sink = a.graph->NodeOfGpuOp(trace::GpuOpId(op));
      }
      st.found = sink.valid();
      if (st.found) {
        JointPathSegment& seg = st.seg;
        seg.rank = rank;
        seg.to_ns = until + to_job[r];
        seg.path = FindCriticalPath(*a.graph, s.durations[r], s.ranks[r], sink, st.from_ns - to_job[r], until,
                                    s.end_bounds[r]);
        seg.nodes = seg.path.nodes.size();
        const TimeNs stopped = seg.to_ns - seg.path.total() - seg.path.tail_gap_ns;
        const bool hop = seg.path.stop == CriticalPath::Stop::kExternal && !seg.path.nodes.empty();
        const auto it = hop ? collective_of.find({r, seg.path.nodes.front().value()}) : collective_of.end();
        const int64_t last = it == collective_of.end() ? -1 : s.last_member[it->second];
        seg.from_ns = stopped;
        if (last >= 0) {
          // The kernel that waited runs its transfer from the last member's arrival: that part is
          // this rank's (communication); the path goes on from that member's start on its own rank.
          const TimeNs arrival = s.arrival[it->second];
          const MatchedCollective::Member& m = job.collectives[it->second].members[static_cast<size_t>(last)];
          // Where the walk stopped: the waited kernel's end, or earlier when an edge with a
          // negative offset (GPU contention) led there.
          seg.path.time[static_cast<size_t>(PathCategory::kCommunication)] += std::max<TimeNs>(0, stopped - arrival);
          seg.from_ns = std::min(arrival, stopped);
          st.goes_on = true;
          st.next_rank = m.rank;
          st.next_op = m.op;
          st.next_until = arrival - rank_to_job[m.rank];
        }
      }
    }
    if (exchange != nullptr) {
      const std::vector<std::string> got = exchange->AllGather(r < analyses.size() ? PathStepJson(st).dump() : "");
      for (size_t q = 0; q < got.size(); ++q) {
        if (!got[q].empty() && q != exchange->process()) st = PathStepOf(nlohmann::json::parse(got[q]));
      }
    }
    if (!st.found) break;  // (only on the first step: a later sink is a matched member's kernel)
    if (op == UINT32_MAX) {
      p.sink_rank = rank;
      p.from_ns = st.from_ns;
      p.to_ns = st.to_ns;
    }
    p.stop = st.seg.path.stop;
    p.segments.push_back(std::move(st.seg));
    if (!st.goes_on) break;
    if (st.next_rank != rank) ++p.hops;
    rank = st.next_rank;
    op = st.next_op;
    until = st.next_until;
  }
  std::reverse(p.segments.begin(), p.segments.end());
  return p;
}

nlohmann::json JointCriticalPathJson(const JointCriticalPath& p) {
  nlohmann::json segments = nlohmann::json::array();
  std::map<int64_t, TimeNs> by_rank;
  for (const JointPathSegment& seg : p.segments) {
    const CriticalPath& cp = seg.path;
    auto t = [&](PathCategory c) { return NsToUs(cp.time[static_cast<size_t>(c)]); };
    segments.push_back({{"rank", seg.rank},
                        {"from_us", NsToUs(seg.from_ns - p.from_ns)},
                        {"to_us", NsToUs(seg.to_ns - p.from_ns)},
                        {"nodes", seg.nodes},
                        {"gpu_compute_us", t(PathCategory::kGpuCompute)},
                        {"communication_us", t(PathCategory::kCommunication)},
                        {"cpu_us", t(PathCategory::kCpu)},
                        {"launch_us", t(PathCategory::kLaunch)}});
    by_rank[seg.rank] += cp.total();
  }
  nlohmann::json ranks = nlohmann::json::object();
  for (const auto& [rank, ns] : by_rank) ranks[std::to_string(rank)] = NsToUs(ns);
  const char* stop = p.stop == CriticalPath::Stop::kComplete ? "complete"
                     : p.stop == CriticalPath::Stop::kRoot   ? "root"
                                                             : "no binding constraint";
  return {{"about", "the job's steady iteration (its slowest rank's) walked back across ranks: at a collective kernel "
                    "that waited for its last member, the path goes on from that member on its own rank; times from "
                    "the iteration's start, on the job clock"},
          {"sink_rank", p.sink_rank},
          {"iteration_us", NsToUs(p.to_ns - p.from_ns)},
          {"segments", segments},
          {"time_by_rank_us", ranks},
          {"rank_changes", p.hops},
          {"stop", stop},
          {"uncovered_us", NsToUs(p.segments.empty() ? 0 : p.segments.front().path.head_gap_ns)}};
}

std::vector<TimeNs> JointSteadyTimes(std::span<const TraceAnalysis* const> analyses, const JointSchedule& s) {
  std::vector<TimeNs> out;
  for (size_t i = 0; i < analyses.size(); ++i) {
    const TraceAnalysis& a = *analyses[i];
    out.push_back(IterationTimes(*a.graph, a.iterations, s.ranks[i])[a.steady]);
  }
  return out;
}

std::vector<ContendedKernel> KernelsBesideWaits(const TraceAnalysis& a, const Schedule& s,
                                               std::span<const TimeNs> arrival_limits) {
  const graph::Graph& g = *a.graph;
  const auto& n = g.nodes();
  const trace::Trace& t = g.trace();
  EMO_CHECK(arrival_limits.size() == n.size() && s.start.size() == n.size());
  struct Interval {
    TimeNs start, end;
    uint32_t node;
  };
  // Per device: the waits of collective kernels, and every communication kernel.
  std::map<int32_t, std::vector<Interval>> waits, comm;
  auto device_of = [&](uint32_t v) { return t.streams[t.gpu.stream[n.ref[v]].value()].device; };
  auto is_kernel = [&](uint32_t v) {
    return n.kind[v] == graph::NodeKind::kGpuOp && t.gpu.kind[n.ref[v]] == trace::GpuKind::kKernel;
  };
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (!is_kernel(v) || a.cpu_floors[v] != kCommKernelFloor) continue;
    comm[device_of(v)].push_back({s.start[v], s.end[v], v});
    const TimeNs wait_end = std::min(arrival_limits[v], s.end[v]);
    if (arrival_limits[v] != std::numeric_limits<TimeNs>::max() && wait_end > s.start[v]) {
      waits[device_of(v)].push_back({s.start[v], wait_end, v});
    }
  }
  // The intervals sorted by start, with prefix maxima of their ends.
  struct Index {
    std::vector<Interval> by_start;
    std::vector<TimeNs> max_end;
  };
  auto index = [](std::vector<Interval> v) {
    std::sort(v.begin(), v.end(), [](const Interval& x, const Interval& y) { return x.start < y.start; });
    Index ix{std::move(v), {}};
    for (const Interval& i : ix.by_start) ix.max_end.push_back(std::max(ix.max_end.empty() ? i.end : ix.max_end.back(), i.end));
    return ix;
  };
  // The interval [start, end) overlaps most (UINT32_MAX: none), and by how much.
  auto most = [](const Index& ix, TimeNs start, TimeNs end) {
    std::pair<uint32_t, TimeNs> best{UINT32_MAX, 0};
    auto it = std::lower_bound(ix.by_start.begin(), ix.by_start.end(), end,
                               [](const Interval& i, TimeNs x) { return i.start < x; });
    for (size_t j = static_cast<size_t>(it - ix.by_start.begin()); j-- > 0 && ix.max_end[j] > start;) {
      const TimeNs o = std::min(end, ix.by_start[j].end) - std::max(start, ix.by_start[j].start);
      if (o > best.second) best = {ix.by_start[j].node, o};
    }
    return best;
  };
  std::map<int32_t, Index> wait_ix, comm_ix;
  for (auto& [d, v] : waits) wait_ix[d] = index(std::move(v));
  for (auto& [d, v] : comm) comm_ix[d] = index(std::move(v));
  // A kernel's kind: its name and launch configuration.
  using Kind = std::tuple<uint32_t, std::array<int32_t, 3>, std::array<int32_t, 3>>;
  auto kind_of = [&](uint32_t v) {
    const auto& l = t.gpu.launch[n.ref[v]];
    return Kind{t.gpu.name[n.ref[v]].value(), {l.grid[0], l.grid[1], l.grid[2]}, {l.block[0], l.block[1], l.block[2]}};
  };
  std::map<Kind, std::vector<TimeNs>> uncontended;
  std::vector<ContendedKernel> out;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (!is_kernel(v) || a.cpu_floors[v] == kCommKernelFloor) continue;
    const int32_t d = device_of(v);
    const auto c = comm_ix.find(d);
    if (c == comm_ix.end() || most(c->second, s.start[v], s.end[v]).first == UINT32_MAX) {
      uncontended[kind_of(v)].push_back(s.end[v] - s.start[v]);
      continue;
    }
    const auto w = wait_ix.find(d);
    if (w == wait_ix.end()) continue;
    const auto [wait_node, overlap] = most(w->second, s.start[v], s.end[v]);
    if (wait_node == UINT32_MAX) continue;
    out.push_back({v, s.end[v] - s.start[v], -1, wait_node, arrival_limits[wait_node] - s.start[wait_node]});
  }
  std::map<Kind, TimeNs> median;
  for (auto& [k, d] : uncontended) {
    if (d.size() < kMinUncontendedKernels) continue;
    std::nth_element(d.begin(), d.begin() + static_cast<ptrdiff_t>(d.size() / 2), d.end());
    median[k] = d[d.size() / 2];
  }
  for (ContendedKernel& k : out) {
    if (const auto it = median.find(kind_of(k.node)); it != median.end()) k.uncontended_ns = std::min(k.traced_ns, it->second);
  }
  return out;
}

WaitContention MeasureWaitContention(const TraceAnalysis& a, const Schedule& s, std::span<const TimeNs> arrival_limits) {
  WaitContention out;
  for (const ContendedKernel& k : KernelsBesideWaits(a, s, arrival_limits)) {
    if (a.iterations.node_iteration[k.node] != static_cast<int32_t>(a.steady)) continue;
    ++out.kernels;
    if (k.uncontended_ns < 0) continue;
    ++out.with_reference;
    out.traced_ns += k.traced_ns;
    out.uncontended_ns += k.uncontended_ns;
  }
  return out;
}

std::vector<const std::vector<TimeNs>*> TracedDurations(std::span<const TraceAnalysis* const> analyses) {
  std::vector<const std::vector<TimeNs>*> d;
  for (const TraceAnalysis* a : analyses) d.push_back(&a->traced_durations);
  return d;
}

WaitContentionModel FindWaitContention(std::span<const TraceAnalysis* const> analyses, const JointSchedule& identity) {
  WaitContentionModel m;
  for (size_t i = 0; i < analyses.size(); ++i) {
    std::vector<ContendedKernel> k = KernelsBesideWaits(*analyses[i], identity.ranks[i], identity.arrival_limits[i]);
    std::erase_if(k, [](const ContendedKernel& c) { return c.uncontended_ns < 0; });
    m.ranks.push_back(std::move(k));
  }
  return m;
}

std::vector<std::vector<TimeNs>> WithContentionOfTheWaits(const WaitContentionModel& m, const JointSchedule& s,
                                                         std::span<const std::vector<TimeNs>* const> durations) {
  EMO_CHECK(m.ranks.size() == durations.size() && s.ranks.size() == durations.size());
  std::vector<std::vector<TimeNs>> out;
  for (size_t i = 0; i < durations.size(); ++i) {
    out.push_back(*durations[i]);
    for (const ContendedKernel& k : m.ranks[i]) {
      const TimeNs wait = std::max<TimeNs>(0, s.arrival_limits[i][k.wait_node] - s.ranks[i].start[k.wait_node]);
      const double kept = std::min(1.0, static_cast<double>(wait) / static_cast<double>(std::max<TimeNs>(1, k.traced_wait_ns)));
      // The kernel's own duration may have changed (a plan's clock): its contention is the traced
      // excess over the uncontended time, in proportion.
      const double own = static_cast<double>(out[i][k.node]) / static_cast<double>(std::max<TimeNs>(1, k.traced_ns));
      const double excess = static_cast<double>(k.traced_ns - k.uncontended_ns) * own;
      out[i][k.node] -= static_cast<TimeNs>(std::llround(excess * (1.0 - kept)));
    }
  }
  return out;
}

JointSchedule JointReplayWithContention(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                                        const WaitContentionModel& m,
                                        std::span<const std::vector<TimeNs>* const> durations, JobExchange* exchange) {
  // Always two replays: with an exchange every process must replay as often as the others.
  const JointSchedule first = JointReplay(job, analyses, durations, exchange);
  const std::vector<std::vector<TimeNs>> adjusted = WithContentionOfTheWaits(m, first, durations);
  std::vector<const std::vector<TimeNs>*> d;
  for (const auto& x : adjusted) d.push_back(&x);
  return JointReplay(job, analyses, d, exchange);
}

std::vector<TimeNs> SlowRankDurations(const JobAnalysis& job, const TraceAnalysis& a, const std::vector<TimeNs>& base,
                                      double factor) {
  const int64_t rank = a.trace->meta.rank;
  std::set<uint32_t> collective_ops;
  for (const auto& mc : job.collectives) {
    for (const auto& m : mc.members) {
      if (m.rank == rank) collective_ops.insert(m.op);
    }
  }
  std::vector<TimeNs> d = base;
  const auto& n = a.graph->nodes();
  for (size_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != graph::NodeKind::kGpuOp || collective_ops.count(n.ref[v]) != 0) continue;
    d[v] = static_cast<TimeNs>(static_cast<double>(d[v]) * factor + 0.5);
  }
  return d;
}

Result<SlowRank> ParseSlowRank(const std::string& text) {
  const size_t eq = text.find('=');
  SlowRank s;
  size_t used = 0;
  try {
    if (eq == std::string::npos) throw std::invalid_argument("no '='");
    s.rank = std::stoll(text.substr(0, eq), &used);
    if (used != eq) throw std::invalid_argument("rank");
    const std::string f = text.substr(eq + 1);
    s.factor = std::stod(f, &used);
    if (used != f.size()) throw std::invalid_argument("factor");
  } catch (const std::exception&) {
    return InvalidArgument(fmt::format("--slow-rank '{}': expected RANK=FACTOR, e.g. 3=1.2", text));
  }
  if (s.rank < 0 || !(s.factor > 0) || !std::isfinite(s.factor)) {
    return InvalidArgument(fmt::format("--slow-rank '{}': the rank must be >= 0 and the factor > 0", text));
  }
  return s;
}

Result<JobWhatIf> RunJobWhatIf(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                               const std::vector<ScaleRule>& rules, const std::vector<SlowRank>& slow) {
  std::vector<std::vector<TimeNs>> base(analyses.size()), changed(analyses.size());
  for (size_t i = 0; i < analyses.size(); ++i) {
    EMO_RETURN_IF_ERROR(CheckIterationLength(*analyses[i], "a what-if"));
    EMO_ASSIGN_OR_RETURN(base[i], ScaledDurations(*analyses[i]->graph, analyses[i]->durations, rules, nullptr));
    changed[i] = base[i];
  }
  for (const SlowRank& s : slow) {
    const size_t found = IndexOfRank(analyses, s.rank);
    if (found == analyses.size()) {
      std::vector<int64_t> given;
      for (const TraceAnalysis* a : analyses) given.push_back(a->trace->meta.rank);
      return InvalidArgument(fmt::format("--slow-rank {}={}: no trace of rank {} was given (ranks given: {})", s.rank,
                                         s.factor, s.rank, fmt::join(given, ", ")));
    }
    changed[found] = SlowRankDurations(job, *analyses[found], changed[found], s.factor);
  }
  std::vector<const std::vector<TimeNs>*> b, c;
  for (size_t i = 0; i < analyses.size(); ++i) {
    b.push_back(&base[i]);
    c.push_back(&changed[i]);
  }
  const WaitContentionModel m = FindWaitContention(analyses, JointReplay(job, analyses, TracedDurations(analyses)));
  const JointSchedule before = JointReplayWithContention(job, analyses, m, b);
  const JointSchedule after = JointReplayWithContention(job, analyses, m, c);
  const std::vector<TimeNs> before_ns = JointSteadyTimes(analyses, before);
  const std::vector<TimeNs> after_ns = JointSteadyTimes(analyses, after);
  JobWhatIf r;
  r.converged = before.converged && after.converged;
  for (size_t i = 0; i < analyses.size(); ++i) {
    const TraceAnalysis& a = *analyses[i];
    JobWhatIf::Rank k;
    k.rank = a.trace->meta.rank;
    k.baseline_ns = before_ns[i];
    k.whatif_ns = after_ns[i];
    k.alone_ns = IterationTimes(*a.graph, a.iterations, Replay(*a.graph, changed[i]))[a.steady];
    r.job_baseline_ns = std::max(r.job_baseline_ns, k.baseline_ns);
    r.job_whatif_ns = std::max(r.job_whatif_ns, k.whatif_ns);
    r.ranks.push_back(k);
  }
  return r;
}

nlohmann::json JointReplayJson(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                               JobExchange* exchange) {
  std::vector<const std::vector<TimeNs>*> traced = TracedDurations(analyses), timeline;
  for (const TraceAnalysis* a : analyses) timeline.push_back(&a->durations);
  const JointSchedule identity = JointReplay(job, analyses, traced, exchange);
  const JointSchedule corrected =
      JointReplayWithContention(job, analyses, FindWaitContention(analyses, identity), timeline, exchange);
  const std::vector<TimeNs> identity_ns = JointSteadyTimes(analyses, identity);
  const std::vector<TimeNs> corrected_ns = JointSteadyTimes(analyses, corrected);
  // Per rank, in input order: rank, measured, alone, joint, timeline alone, timeline joint (ns);
  // the waits' contention (WaitContention's four fields).
  using Row = std::array<int64_t, 10>;
  std::vector<Row> rows;
  for (size_t i = 0; i < analyses.size(); ++i) {
    const TraceAnalysis& a = *analyses[i];
    const WaitContention c = MeasureWaitContention(a, identity.ranks[i], identity.arrival_limits[i]);
    rows.push_back({a.trace->meta.rank, a.measured_ns(), a.replayed_ns(), identity_ns[i], a.timeline_ns(),
                    corrected_ns[i], static_cast<int64_t>(c.kernels), static_cast<int64_t>(c.with_reference),
                    c.traced_ns, c.uncontended_ns});
  }
  rows = GatherInOrder(exchange, std::move(rows));
  auto error = [](TimeNs replayed, TimeNs measured) {
    return measured > 0 ? 100.0 * std::abs(static_cast<double>(replayed - measured)) / static_cast<double>(measured) : 0.0;
  };
  nlohmann::json ranks = nlohmann::json::array();
  TimeNs job_measured = 0, job_alone = 0, job_joint = 0, job_timeline = 0, job_joint_timeline = 0;
  double worst = 0;
  for (const auto& [rank, measured, alone, joint, timeline_alone, timeline_joint, beside, compared, beside_ns,
                    uncontended] : rows) {
    const double err = error(joint, measured);
    worst = std::max(worst, err);
    ranks.push_back({{"rank", rank},
                     {"measured_us", NsToUs(measured)},
                     {"replayed_alone_us", NsToUs(alone)},
                     {"replayed_joint_us", NsToUs(joint)},
                     {"joint_error_pct", err},
                     {"timeline_alone_us", NsToUs(timeline_alone)},
                     {"timeline_joint_us", NsToUs(timeline_joint)},
                     {"wait_contention",
                      {{"kernels", beside},
                       {"compared", compared},
                       {"traced_us", NsToUs(beside_ns)},
                       {"uncontended_us", NsToUs(uncontended)},
                       {"excess_us", NsToUs(beside_ns - uncontended)}}}});
    job_measured = std::max(job_measured, measured);
    job_alone = std::max(job_alone, alone);
    job_joint = std::max(job_joint, joint);
    job_timeline = std::max(job_timeline, timeline_alone);
    job_joint_timeline = std::max(job_joint_timeline, timeline_joint);
  }
  const JointCriticalPath path = FindJointCriticalPath(job, analyses, corrected, exchange);
  return {{"critical_path", JointCriticalPathJson(path)},
          {"about", "each rank's steady iteration; the job's is the slowest rank's. alone: each rank's graph replayed "
                    "on its own (collective kernels keep their measured waits); joint: the ranks replayed as one, a "
                    "collective's transfer starting when its last member arrives (identity: traced durations; "
                    "timeline: the analysis timeline's, corrected through the collectives when corrected). "
                    "wait_contention: the kernels of the steady iteration that ran beside a collective kernel "
                    "waiting for its peers, and of those whose kind (name, launch configuration) also ran with no "
                    "communication kernel beside it at least 3 times (compared), their traced time against that "
                    "kind's uncontended median, as traced (the timeline's joint replay keeps of that excess the share "
                    "of its wait that is left, joint_replay.h)"},
          {"members_bound", identity.members_bound},
          {"passes", identity.passes},
          {"converged", identity.converged && corrected.converged},
          {"ranks", ranks},
          {"job",
           {{"measured_us", NsToUs(job_measured)},
            {"replayed_alone_us", NsToUs(job_alone)},
            {"replayed_joint_us", NsToUs(job_joint)},
            {"joint_error_pct", error(job_joint, job_measured)},
            {"worst_rank_joint_error_pct", worst},
            {"timeline_alone_us", NsToUs(job_timeline)},
            {"timeline_joint_us", NsToUs(job_joint_timeline)}}}};
}

}  // namespace emo::analysis
