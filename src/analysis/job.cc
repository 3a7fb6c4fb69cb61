#include "emo/analysis/job.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

namespace emo::analysis {
namespace {

// How far one rank's sequence of a channel may be shifted against another's when matching in
// order: their windows may start a few transfers apart.
constexpr int kMaxShift = 16;
// On one clock, the kernels of an all-to-all kind of collective (all-reduce, all-gather,
// reduce-scatter) end together: within 17 us on our H200 DDP traces; kernels whose ends are
// further apart than this are not one collective. Rooted collectives and point-to-point
// transfers do not: a root or a sender can finish as soon as its data is in the peer's buffer
// (ms before the receiver on the same traces); of those only causality is checked: a receive
// cannot end before its send started.
constexpr TimeNs kEndTolerance = 200'000;

bool EndsTogether(const std::string& name) {
  for (const char* n : {"allreduce", "all_reduce", "allgather", "all_gather", "_allgather_base", "allgather_into_tensor_coalesced",
                        "reducescatter", "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced",
                        "alltoall", "all_to_all", "alltoall_base", "all_to_allv", "barrier", "sendrecv"}) {
    if (name == n) return true;
  }
  return false;
}

bool IsPointToPoint(const std::string& name) { return name == "send" || name == "recv"; }

std::vector<int64_t> ParseRanks(const std::string& text) {
  std::vector<int64_t> out;
  const char* p = text.c_str();
  while (*p != '\0') {
    if ((*p >= '0' && *p <= '9') || *p == '-') {
      char* end = nullptr;
      out.push_back(std::strtoll(p, &end, 10));
      p = end;
    } else {
      ++p;
    }
  }
  return out;
}

TimeNs Median(std::vector<TimeNs> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// A channel: the kernels of each member rank that belong together, in order (indices into the
// rank's collectives).
struct Channel {
  std::string name;  // for the report
  std::string process_group;
  bool p2p = false;
  std::map<int64_t, std::vector<size_t>> members;  // rank -> its kernels, in start order
};

// The index in `other` matched to each index in `ref` (-1: none), for one channel.
std::vector<int64_t> Align(const RankInput& ref_rank, const std::vector<size_t>& ref, const RankInput& other_rank,
                           const std::vector<size_t>& other, bool same_clock) {
  std::vector<int64_t> best(ref.size(), -1);
  auto at = [](const RankInput& r, const std::vector<size_t>& v, size_t i) -> const RankCollective& {
    return r.collectives[v[i]];
  };
  auto agree = [&](size_t i, size_t j) {
    const auto& a = at(ref_rank, ref, i);
    const auto& b = at(other_rank, other, j);
    if (a.nelems != b.nelems) return false;
    if (IsPointToPoint(a.name)) {
      if (a.name == b.name) return false;  // a send meets a recv
      const RankCollective& send = a.name == "send" ? a : b;
      const RankCollective& recv = a.name == "send" ? b : a;
      return !same_clock || recv.end + kEndTolerance >= send.start;
    }
    if (a.name != b.name) return false;
    return !same_clock || !EndsTogether(a.name) || std::abs(a.end - b.end) <= kEndTolerance;
  };
  // By Seq when every kernel of both has it.
  const bool seqs = std::all_of(ref.begin(), ref.end(), [&](size_t k) { return ref_rank.collectives[k].seq >= 0; }) &&
                    std::all_of(other.begin(), other.end(), [&](size_t k) { return other_rank.collectives[k].seq >= 0; });
  if (seqs) {
    std::map<int64_t, size_t> by_seq;
    for (size_t j = 0; j < other.size(); ++j) by_seq[at(other_rank, other, j).seq] = j;
    for (size_t i = 0; i < ref.size(); ++i) {
      const auto it = by_seq.find(at(ref_rank, ref, i).seq);
      if (it != by_seq.end() && agree(i, it->second)) best[i] = static_cast<int64_t>(it->second);
    }
    return best;
  }
  size_t best_count = 0;
  double best_gap = std::numeric_limits<double>::infinity();
  int best_shift = 0;
  const int lo = -std::min<int>(kMaxShift, static_cast<int>(ref.size()));
  const int hi = std::min<int>(kMaxShift, static_cast<int>(other.size()));
  for (int s = lo; s <= hi; ++s) {
    size_t count = 0;
    double gap = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const int64_t j = static_cast<int64_t>(i) + s;
      if (j < 0 || j >= static_cast<int64_t>(other.size()) || !agree(i, static_cast<size_t>(j))) continue;
      ++count;
      if (same_clock) gap += std::abs(static_cast<double>(at(ref_rank, ref, i).end - at(other_rank, other, j).end));
    }
    const double mean_gap = count > 0 ? gap / static_cast<double>(count) : 0.0;
    const bool better = count > best_count ||
                        (count == best_count && count > 0 &&
                         (mean_gap < best_gap || (mean_gap == best_gap && std::abs(s) < std::abs(best_shift))));
    if (better) {
      best_count = count;
      best_gap = mean_gap;
      best_shift = s;
    }
  }
  if (best_count == 0) return best;
  for (size_t i = 0; i < ref.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i) + best_shift;
    if (j >= 0 && j < static_cast<int64_t>(other.size()) && agree(i, static_cast<size_t>(j))) best[i] = j;
  }
  return best;
}

// "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" -> "allreduce"; "" for other kernels. A
// SendRecv kernel's direction is not in its name: it is matched as "sendrecv" across every rank
// that runs one, which is what an all-to-all built of grouped sends and receives is (DLRM's
// embedding exchange); a pipeline's one-way transfers seldom end together and stay unmatched.
std::string NcclKernelCollective(std::string_view name) {
  for (std::string_view prefix : {"ncclDevKernel_", "ncclKernel_"}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    name.remove_prefix(prefix.size());
    const size_t end = name.find_first_of("_(");
    std::string kind(name.substr(0, end));
    for (char& ch : kind) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return kind;
  }
  return {};
}

}  // namespace

RankInput RankInputOf(const TraceAnalysis& a) {
  const trace::Trace& t = *a.trace;
  RankInput r;
  r.path = t.meta.source_path;
  r.rank = t.meta.rank;
  r.world_size = t.meta.world_size;
  // EMO traces: each process's CUPTI clock has its own zero; their clock references put every
  // rank on wall time (CLOCK_REALTIME), one clock for the processes of a host.
  TimeNs to_wall = 0;
  if (t.meta.run) {
    r.host = t.meta.run->host;
    to_wall = t.meta.run->clock_realtime_offset_ns;
  }
  r.to_wall_ns = to_wall;
  for (size_t op = 0; op < t.gpu.size(); ++op) {
    const trace::CollectiveId id = t.gpu.collective[op];
    if (!id.valid()) {
      // Without the profiler's collective metadata (EMO traces, older profilers), an NCCL
      // kernel's name still says which collective it is; not its size or process group. A
      // trace with metadata keeps to it.
      if (!t.collectives.empty()) continue;
      const std::string kind = NcclKernelCollective(t.Name(t.gpu.name[op]));
      if (kind.empty()) continue;
      RankCollective c;
      c.name = kind;
      c.start = t.gpu.start[op] + to_wall;
      c.end = t.gpu.end[op] + to_wall;
      c.op = static_cast<uint32_t>(op);
      r.collectives.push_back(std::move(c));
      continue;
    }
    const trace::CollectiveInfo& info = t.collectives[id.value()];
    RankCollective c;
    c.name = info.name;
    c.process_group = info.process_group;
    c.group_size = info.group_size;
    c.group_ranks = ParseRanks(info.pg_ranks);
    c.seq = info.seq;
    c.nelems = info.in_nelems;
    c.peer = info.name == "send" ? info.dst_rank : info.name == "recv" ? info.src_rank : -1;
    c.start = t.gpu.start[op] + to_wall;
    c.end = t.gpu.end[op] + to_wall;
    c.op = static_cast<uint32_t>(op);
    r.collectives.push_back(std::move(c));
  }
  std::stable_sort(r.collectives.begin(), r.collectives.end(),
                   [](const RankCollective& x, const RankCollective& y) { return x.start < y.start; });
  return r;
}

Result<JobAnalysis> AnalyzeJob(const std::vector<RankInput>& input) {
  JobAnalysis job;
  std::map<int64_t, const RankInput*> by_rank;
  std::map<std::string, int64_t> paths;
  for (const RankInput& r : input) {
    if (const auto it = paths.find(r.path); it != paths.end() && !r.path.empty()) {
      return InvalidArgument(fmt::format("{} is given twice: a job takes each rank's trace once", r.path));
    }
    paths[r.path] = r.rank;
    if (r.rank < 0) {
      return InvalidArgument(fmt::format("{} has no rank (distributedInfo.rank in a PyTorch trace, RANK for emo trace): "
                                         "the ranks of a job cannot be told apart",
                                         r.path));
    }
    if (const auto it = by_rank.find(r.rank); it != by_rank.end()) {
      return InvalidArgument(fmt::format("rank {} is in {} and in {}: traces of different runs?", r.rank,
                                         it->second->path, r.path));
    }
    by_rank[r.rank] = &r;
    if (job.world_size < 0) job.world_size = r.world_size;
    if (r.world_size != job.world_size) {
      return InvalidArgument(fmt::format("{} is rank {} of {} and {} rank {} of {}: ranks of different jobs",
                                         input.front().path, input.front().rank, input.front().world_size, r.path,
                                         r.rank, r.world_size));
    }
  }
  for (int64_t k = 0; k < job.world_size; ++k) {
    if (by_rank.count(k) == 0) job.missing_ranks.push_back(k);
  }

  // Channels: each process group's collectives, and each sender -> receiver pair's transfers.
  std::map<std::string, Channel> channels;
  std::map<int64_t, std::vector<bool>> matched;
  std::map<int64_t, RankWait> waits;
  for (const auto& [rank, r] : by_rank) {
    matched[rank].assign(r->collectives.size(), false);
    RankWait& w = waits[rank];
    w.rank = rank;
    w.path = r->path;
    w.host = r->host;
    for (size_t i = 0; i < r->collectives.size(); ++i) {
      const RankCollective& c = r->collectives[i];
      std::string key;
      Channel* ch = nullptr;
      if (IsPointToPoint(c.name)) {
        int64_t peer = c.peer;
        if (peer < 0 && c.group_ranks.size() == 2) peer = c.group_ranks[0] == rank ? c.group_ranks[1] : c.group_ranks[0];
        if (peer < 0 && c.group_size == 2 && job.world_size == 2) peer = 1 - rank;
        if (peer < 0) continue;  // no way to tell the other end: left unmatched
        const int64_t src = c.name == "send" ? rank : peer;
        const int64_t dst = c.name == "send" ? peer : rank;
        key = fmt::format("{}|{}>{}", c.process_group, src, dst);
        ch = &channels[key];
        ch->name = "send/recv";
        ch->p2p = true;
      } else {
        key = c.process_group + "|collective";
        ch = &channels[key];
        ch->name = c.name;
      }
      ch->process_group = c.process_group;
      ch->members[rank].push_back(i);
    }
  }

  // The job's clock: the lowest rank's host. Other hosts' offsets come from matched ends.
  const int64_t clock_rank = by_rank.empty() ? -1 : by_rank.begin()->first;
  const std::string clock_host = by_rank.empty() ? "" : by_rank.begin()->second->host;
  auto same_clock = [&](const RankInput& a, const RankInput& b) {
    return a.host.empty() || b.host.empty() || a.host == b.host;
  };
  struct Instance {
    std::string name, pg;
    std::vector<std::pair<int64_t, size_t>> members;  // rank, index in its collectives
  };
  std::vector<Instance> instances;
  for (auto& [key, ch] : channels) {
    if (ch.members.size() < 2) continue;  // the other end is not in the job's traces
    const int64_t ref = ch.members.begin()->first;
    const RankInput& ref_rank = *by_rank.at(ref);
    const auto& ref_list = ch.members.begin()->second;
    std::vector<std::vector<int64_t>> aligned;
    std::vector<int64_t> others;
    for (const auto& [rank, list] : ch.members) {
      if (rank == ref) continue;
      aligned.push_back(Align(ref_rank, ref_list, *by_rank.at(rank), list, same_clock(ref_rank, *by_rank.at(rank))));
      others.push_back(rank);
    }
    for (size_t i = 0; i < ref_list.size(); ++i) {
      bool all = true;
      for (const auto& a : aligned) all = all && a[i] >= 0;
      if (!all) continue;
      Instance inst;
      inst.name = ch.p2p ? ch.name : ref_rank.collectives[ref_list[i]].name;
      inst.pg = ch.process_group;
      inst.members.emplace_back(ref, ref_list[i]);
      for (size_t m = 0; m < others.size(); ++m) {
        inst.members.emplace_back(others[m], ch.members.at(others[m])[static_cast<size_t>(aligned[m][i])]);
      }
      for (const auto& [rank, idx] : inst.members) matched[rank][idx] = true;
      instances.push_back(std::move(inst));
    }
  }

  // Clock offsets of ranks on other hosts than the job clock's.
  for (auto& [rank, w] : waits) {
    const RankInput& r = *by_rank.at(rank);
    if (rank == clock_rank || same_clock(r, *by_rank.at(clock_rank))) continue;
    std::vector<TimeNs> d;
    for (const Instance& inst : instances) {
      TimeNs ref_end = -1, own_end = -1;
      for (const auto& [m, idx] : inst.members) {
        if (m == clock_rank) ref_end = by_rank.at(m)->collectives[idx].end;
        if (m == rank) own_end = r.collectives[idx].end;
      }
      if (ref_end >= 0 && own_end >= 0) d.push_back(ref_end - own_end);
    }
    if (d.empty()) {
      job.notes.push_back(fmt::format("rank {} is on host {}, rank {} on {}, and they share no collective: their clocks "
                                      "are not aligned",
                                      rank, r.host, clock_rank, clock_host));
      continue;
    }
    w.clock_offset_ns = Median(d);
  }
  if (!by_rank.empty() && std::all_of(by_rank.begin(), by_rank.end(), [](const auto& kv) { return kv.second->host.empty(); })) {
    job.notes.push_back("the traces do not name their hosts: their GPU clocks are taken as one (true for the ranks of "
                        "one machine)");
  }

  for (const Instance& inst : instances) {
    MatchedCollective mc;
    mc.name = inst.name;
    mc.process_group = inst.pg;
    TimeNs latest_end = std::numeric_limits<TimeNs>::min();
    for (const auto& [rank, idx] : inst.members) {
      const RankCollective& c = by_rank.at(rank)->collectives[idx];
      const TimeNs off = waits.at(rank).clock_offset_ns;
      mc.members.push_back({rank, c.start + off, c.end + off, c.op});
      latest_end = std::max(latest_end, c.end + off);
    }
    for (size_t m = 1; m < mc.members.size(); ++m) {
      if (mc.members[m].start > mc.members[mc.last].start) mc.last = m;
    }
    const TimeNs arrival = mc.members[mc.last].start;
    mc.transfer_ns = std::max<TimeNs>(0, latest_end - arrival);
    TimeNs others_wait = 0;
    for (size_t m = 0; m < mc.members.size(); ++m) {
      RankWait& w = waits.at(mc.members[m].rank);
      ++w.collectives;
      // A root or a sender may finish before its peer arrives: it waited no longer than it ran.
      const TimeNs wait = std::min(arrival, mc.members[m].end) - mc.members[m].start;
      w.waited_ns += wait;
      if (m != mc.last) others_wait += wait;
    }
    RankWait& last = waits.at(mc.members[mc.last].rank);
    ++last.last_to_arrive;
    last.kept_waiting_ns += others_wait;
    job.collectives.push_back(std::move(mc));
  }
  for (auto& [rank, w] : waits) {
    w.unmatched = static_cast<size_t>(std::count(matched[rank].begin(), matched[rank].end(), false));
    w.trace_to_job_ns = by_rank.at(rank)->to_wall_ns + w.clock_offset_ns;
    job.ranks.push_back(w);
  }
  TimeNs most = 0;
  for (const RankWait& w : job.ranks) {
    if (w.kept_waiting_ns > most) {
      most = w.kept_waiting_ns;
      job.critical_rank = w.rank;
    }
  }
  std::sort(job.collectives.begin(), job.collectives.end(), [](const MatchedCollective& a, const MatchedCollective& b) {
    return a.members[a.last].start < b.members[b.last].start;
  });
  return job;
}

Result<JobAnalysis> AnalyzeJob(std::span<const TraceAnalysis* const> ranks) {
  std::vector<RankInput> inputs;
  for (const TraceAnalysis* a : ranks) inputs.push_back(RankInputOf(*a));
  return AnalyzeJob(inputs);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankCollective, name, process_group, group_size, group_ranks, seq, nelems, peer,
                                   start, end, op)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankInput, path, rank, world_size, host, to_wall_ns, collectives)

nlohmann::json RankInputToJson(const RankInput& r) { return r; }
RankInput RankInputFromJson(const nlohmann::json& j) { return j.get<RankInput>(); }

std::vector<const TraceAnalysis*> RanksOf(const std::vector<TraceAnalysis>& all) {
  std::vector<const TraceAnalysis*> out;
  for (const TraceAnalysis& a : all) out.push_back(&a);
  return out;
}

nlohmann::json JobToJson(const JobAnalysis& job) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankWait& w : job.ranks) {
    ranks.push_back({{"rank", w.rank},
                     {"trace", w.path},
                     {"host", w.host.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.host)},
                     {"clock_offset_us", NsToUs(w.clock_offset_ns)},
                     {"collectives", w.collectives},
                     {"waited_us", NsToUs(w.waited_ns)},
                     {"last_to_arrive", w.last_to_arrive},
                     {"kept_others_waiting_us", NsToUs(w.kept_waiting_ns)},
                     {"unmatched_kernels", w.unmatched}});
  }
  std::map<std::string, size_t> kinds;
  TimeNs transfer = 0;
  for (const auto& c : job.collectives) {
    ++kinds[c.name];
    transfer += c.transfer_ns;
  }
  return {{"world_size", job.world_size},
          {"missing_ranks", job.missing_ranks},
          {"collectives_matched", job.collectives.size()},
          {"collectives_by_kind", kinds},
          {"transfer_us", NsToUs(transfer)},
          {"ranks", ranks},
          {"critical_rank", job.critical_rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(job.critical_rank)},
          {"notes", job.notes},
          {"note", "waits and transfers over every matched collective of the traces (all their iterations), on one "
                   "clock"}};
}

}  // namespace emo::analysis
