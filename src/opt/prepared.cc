#include "prepared.h"

#include <algorithm>
#include <numeric>

namespace emo::opt {

int64_t TopologicalOrder(const Problem& problem, std::vector<uint32_t>& order) {
  const uint32_t n = problem.num_nodes();
  std::vector<uint32_t> indeg(n, 0), begin(n + 1, 0), adj(problem.num_edges());
  for (size_t e = 0; e < problem.num_edges(); ++e) {
    ++indeg[problem.edge_to(e)];
    ++begin[problem.edge_from(e) + 1];
  }
  std::partial_sum(begin.begin(), begin.end(), begin.begin());
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t e = 0; e < problem.num_edges(); ++e) adj[fill[problem.edge_from(e)]++] = problem.edge_to(e);
  order.clear();
  order.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (indeg[i] == 0) order.push_back(i);
  }
  for (size_t head = 0; head < order.size(); ++head) {
    const uint32_t u = order[head];
    for (uint32_t k = begin[u]; k < begin[u + 1]; ++k) {
      if (--indeg[adj[k]] == 0) order.push_back(adj[k]);
    }
  }
  if (order.size() == n) return -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (indeg[i] > 0) return i;
  }
  return 0;
}

TimeNs Makespan(const Problem& problem, std::span<const TimeNs> durations) {
  std::vector<uint32_t> order;
  TopologicalOrder(problem, order);
  const uint32_t n = problem.num_nodes();
  // Edge list sorted by source for a forward sweep.
  std::vector<uint32_t> begin(n + 1, 0), idx(problem.num_edges());
  for (size_t e = 0; e < problem.num_edges(); ++e) ++begin[problem.edge_from(e) + 1];
  std::partial_sum(begin.begin(), begin.end(), begin.begin());
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t e = 0; e < problem.num_edges(); ++e) idx[fill[problem.edge_from(e)]++] = static_cast<uint32_t>(e);
  std::vector<TimeNs> es(n, 0);
  TimeNs makespan = 0;
  for (uint32_t u : order) {
    const TimeNs ef = es[u] + durations[u];
    makespan = std::max(makespan, ef);
    for (uint32_t k = begin[u]; k < begin[u + 1]; ++k) {
      const uint32_t e = idx[k];
      TimeNs& s = es[problem.edge_to(e)];
      s = std::max(s, ef + problem.edge_delay(e));
    }
  }
  return makespan;
}

uint32_t Prepared::SlowestWithin(uint32_t i, double d) const {
  // opt_dur is ascending within the node: the last index with dur ≤ d.
  const double* first = opt_dur.data() + opt_begin[i];
  const double* last = opt_dur.data() + opt_begin[i + 1];
  const double* it = std::upper_bound(first, last, d);
  if (it == first) return opt_begin[i];
  return static_cast<uint32_t>(it - opt_dur.data()) - 1;
}

Prepared Prepare(const Problem& problem) {
  Prepared p;
  const uint32_t n = problem.num_nodes();
  p.n = n;
  TopologicalOrder(problem, p.topo);
  const size_t m = problem.num_edges();
  p.succ_begin.assign(n + 1, 0);
  p.pred_begin.assign(n + 1, 0);
  for (size_t e = 0; e < m; ++e) {
    ++p.succ_begin[problem.edge_from(e) + 1];
    ++p.pred_begin[problem.edge_to(e) + 1];
  }
  std::partial_sum(p.succ_begin.begin(), p.succ_begin.end(), p.succ_begin.begin());
  std::partial_sum(p.pred_begin.begin(), p.pred_begin.end(), p.pred_begin.begin());
  p.succ.resize(m);
  p.succ_delay.resize(m);
  p.pred.resize(m);
  p.pred_delay.resize(m);
  {
    std::vector<uint32_t> sf(p.succ_begin.begin(), p.succ_begin.end() - 1);
    std::vector<uint32_t> pf(p.pred_begin.begin(), p.pred_begin.end() - 1);
    for (size_t e = 0; e < m; ++e) {
      const uint32_t u = problem.edge_from(e), v = problem.edge_to(e);
      const double w = static_cast<double>(problem.edge_delay(e));
      p.succ[sf[u]] = v;
      p.succ_delay[sf[u]++] = w;
      p.pred[pf[v]] = u;
      p.pred_delay[pf[v]++] = w;
    }
  }
  const double idle = problem.idle_power_w();
  p.idle_term_w = idle * problem.num_gpus();
  p.opt_begin.assign(1, 0);
  p.hull_begin.assign(1, 0);
  std::vector<uint32_t> ord;
  for (uint32_t i = 0; i < n; ++i) {
    auto opts = problem.options(i);
    const double charge = problem.gpu(i) == kNoGpu ? 0.0 : idle;
    auto cost = [&](uint32_t k) {
      return opts[k].energy_j - charge * NsToS(opts[k].duration_ns);
    };
    ord.resize(opts.size());
    std::iota(ord.begin(), ord.end(), 0u);
    std::sort(ord.begin(), ord.end(), [&](uint32_t a, uint32_t b) {
      if (opts[a].duration_ns != opts[b].duration_ns) return opts[a].duration_ns < opts[b].duration_ns;
      return cost(a) < cost(b);
    });
    // Pareto filter on (duration, effective cost): keep an option only if strictly cheaper
    // than every faster-or-equal one. A dominated option (e.g. a clock that is slower and
    // costlier than a higher one) is dropped here, so it can never block the search.
    const size_t first = p.opt_dur.size();
    double best = 0.0;
    for (size_t r = 0; r < ord.size(); ++r) {
      const double c = cost(ord[r]);
      if (r > 0 && !(c < best)) continue;
      const double d = static_cast<double>(opts[ord[r]].duration_ns);
      if (p.opt_dur.size() > first && p.opt_dur.back() == d) continue;  // equal time: kept cheaper
      best = c;
      p.opt_dur.push_back(d);
      p.opt_cost.push_back(c);
      p.opt_index.push_back(ord[r]);
    }
    p.opt_begin.push_back(static_cast<uint32_t>(p.opt_dur.size()));
    // Lower convex hull (monotone chain over points sorted by duration).
    const size_t hull_first = p.hull_dur.size();
    for (size_t k = first; k < p.opt_dur.size(); ++k) {
      const double x = p.opt_dur[k], y = p.opt_cost[k];
      while (p.hull_dur.size() >= hull_first + 2) {
        const size_t b = p.hull_dur.size() - 1, a = b - 1;
        const double cross = (p.hull_dur[b] - p.hull_dur[a]) * (y - p.hull_cost[a]) -
                             (p.hull_cost[b] - p.hull_cost[a]) * (x - p.hull_dur[a]);
        if (cross <= 0) {  // b lies on or above the segment a→(x,y)
          p.hull_dur.pop_back();
          p.hull_cost.pop_back();
        } else {
          break;
        }
      }
      p.hull_dur.push_back(x);
      p.hull_cost.push_back(y);
    }
    p.hull_begin.push_back(static_cast<uint32_t>(p.hull_dur.size()));
  }
  return p;
}

double EarliestStart(const Prepared& p, const std::vector<double>& ef, uint32_t u) {
  double es = 0.0;
  for (uint32_t k = p.pred_begin[u]; k < p.pred_begin[u + 1]; ++k) {
    es = std::max(es, ef[p.pred[k]] + p.pred_delay[k]);
  }
  return es;
}

double ForwardPass(const Prepared& p, std::span<const double> dur, std::vector<double>& ef) {
  ef.assign(p.n, 0.0);
  double makespan = 0.0;
  for (uint32_t u : p.topo) {
    ef[u] = EarliestStart(p, ef, u) + dur[u];
    makespan = std::max(makespan, ef[u]);
  }
  return makespan;
}

double LatestFinish(const Prepared& p, std::span<const double> dur, const std::vector<double>& lf, uint32_t u,
                    double deadline) {
  double f = deadline;
  for (uint32_t k = p.succ_begin[u]; k < p.succ_begin[u + 1]; ++k) {
    const uint32_t v = p.succ[k];
    f = std::min(f, lf[v] - dur[v] - p.succ_delay[k]);
  }
  return f;
}

void BackwardPass(const Prepared& p, std::span<const double> dur, double deadline,
                  std::vector<double>& lf) {
  lf.assign(p.n, deadline);
  for (auto it = p.topo.rbegin(); it != p.topo.rend(); ++it) lf[*it] = LatestFinish(p, dur, lf, *it, deadline);
}

Plan ToPlan(const Prepared& p, std::span<const uint32_t> useful_choice) {
  Plan plan(p.n);
  for (uint32_t i = 0; i < p.n; ++i) plan[i] = p.opt_index[useful_choice[i]];
  return plan;
}

}  // namespace emo::opt
