#include "emo/opt/solver.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "solvers.h"

namespace emo::opt {

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOptimal: return "optimal";
    case Outcome::kFeasible: return "feasible";
    case Outcome::kInfeasible: return "infeasible";
    case Outcome::kTimeLimit: return "time_limit";
  }
  return "unknown";
}

double Solution::gap_pct() const {
  if (!has_plan() || !has_bound || lower_bound_j == 0.0) return -1.0;
  return 100.0 * (energy_j - lower_bound_j) / std::abs(lower_bound_j);
}

double EnergyAtDeadline(const Frontier& frontier, TimeNs deadline_ns) {
  double best = -1.0;
  for (const FrontierPoint& pt : frontier.points) {
    if (pt.makespan_ns <= deadline_ns && (best < 0 || pt.energy_j < best)) best = pt.energy_j;
  }
  return best;
}

bool HaveExactSolver() {
#ifdef EMO_HAVE_CBC
  return true;
#else
  return false;
#endif
}

Result<std::unique_ptr<Solver>> MakeSolver(SolverKind kind) {
  switch (kind) {
    case SolverKind::kFast: return MakeFastSolver();
    case SolverKind::kExact:
#ifdef EMO_HAVE_CBC
      return MakeCbcSolver();
#else
      return Unsupported("this EMO was built without COIN-OR CBC: the exact solver is unavailable");
#endif
  }
  return InvalidArgument("unknown solver kind");
}

namespace {
TimeNs MakespanWith(const Prepared& p, const std::function<double(uint32_t)>& dur_of) {
  std::vector<double> d(p.n), ef;
  for (uint32_t i = 0; i < p.n; ++i) d[i] = dur_of(i);
  return static_cast<TimeNs>(std::llround(ForwardPass(p, d, ef)));
}
}  // namespace

TimeNs FastestMakespan(const Prepared& p) {
  return MakespanWith(p, [&](uint32_t i) { return p.fastest(i); });
}

TimeNs SlowestMakespan(const Prepared& p) {
  return MakespanWith(p, [&](uint32_t i) { return p.slowest(i); });
}

std::vector<double> FrontierDeadlines(const Prepared& p, const FrontierOptions& options) {
  std::vector<double> out;
  if (!options.deadlines.empty()) {
    for (TimeNs t : options.deadlines) out.push_back(static_cast<double>(t));
  } else {
    const TimeNs lo = FastestMakespan(p), hi = SlowestMakespan(p);
    TimeNs step = options.step_ns;
    if (step <= 0) {
      step = std::max<TimeNs>(
          1, (hi - lo) / static_cast<TimeNs>(std::max<size_t>(options.max_points, 1)));
    }
    out.push_back(static_cast<double>(hi));
    out.push_back(static_cast<double>(lo));
    for (TimeNs t = (hi / step) * step; t > lo; t -= step) out.push_back(static_cast<double>(t));
  }
  for (TimeNs t : options.extra_deadlines) out.push_back(static_cast<double>(t));
  std::sort(out.begin(), out.end(), std::greater<>());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<double> SweepOrder(const std::vector<double>& deadlines, const std::vector<TimeNs>& first) {
  const size_t n = deadlines.size();
  std::vector<double> out;
  std::vector<bool> taken(n, false);
  auto take = [&](size_t i) {
    if (taken[i]) return;
    taken[i] = true;
    out.push_back(deadlines[i]);
  };
  for (TimeNs t : first) {
    auto it = std::find(deadlines.begin(), deadlines.end(), static_cast<double>(t));
    if (it != deadlines.end()) take(static_cast<size_t>(it - deadlines.begin()));
  }
  if (n == 0) return out;
  take(0);
  take(n - 1);
  size_t stride = 1;
  while (stride < n) stride *= 2;
  for (; stride >= 1; stride /= 2) {
    for (size_t i = 0; i < n; i += stride) take(i);
  }
  return out;
}

std::vector<FrontierPoint> ParetoFilter(std::vector<FrontierPoint> points, bool keep_plans) {
  std::stable_sort(points.begin(), points.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    if (a.makespan_ns != b.makespan_ns) return a.makespan_ns < b.makespan_ns;
    return a.energy_j < b.energy_j;
  });
  std::vector<FrontierPoint> out;
  for (auto& pt : points) {
    if (!out.empty() && !(pt.energy_j < out.back().energy_j)) continue;  // dominated
    if (!keep_plans) pt.plan.clear();
    out.push_back(std::move(pt));
  }
  return out;
}

}  // namespace emo::opt
