// The fast solver: the parametric min-cut descent on the convex relaxation (descent.h), with
// every requested deadline rounded to a discrete plan and repaired. Its gap is measured
// against its own relaxation (a proven lower bound), and against CBC in tests/benchmarks.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "descent.h"
#include "water_fill.h"
#include "solvers.h"

namespace emo::opt {

namespace {

// The exact descent costs about one minimum cut over the critical subgraph per breakpoint of
// the relaxed frontier, and the number of breakpoints grows with the graph: it runs on graphs
// of at most SolveOptions::descent_max_size nodes + edges, and stops after kDescentWork (cuts × (nodes +
// edges)). Beyond either, the solver uses water-filling (water_fill.h): linear per deadline
// and within ~1% of the descent where both run, but without a lower bound.
constexpr double kDescentWork = 1.5e7;

size_t CutBudget(const Prepared& p, size_t max_size) {
  const size_t size = p.n + p.succ.size();
  if (size > max_size) return 0;
  return static_cast<size_t>(kDescentWork / static_cast<double>(size + 1));
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Lower bound on min{E(plan) : makespan(plan) ≤ T} from the relaxation's breakpoints: the
// relaxed energy C(T') + P·G·T' is piecewise linear between breakpoints, so its minimum over
// T' ≤ T is at a breakpoint or at T itself.
class RelaxedBound {
 public:
  RelaxedBound(const Prepared& p, const std::vector<std::pair<double, double>>& breakpoints)
      : bp_(breakpoints.rbegin(), breakpoints.rend()) {  // makespan ascending
    prefix_min_.resize(bp_.size());
    double m = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < bp_.size(); ++k) {
      bp_[k].second = p.Energy(bp_[k].second, bp_[k].first);
      m = std::min(m, bp_[k].second);
      prefix_min_[k] = m;
    }
  }
  bool empty() const { return bp_.empty(); }
  double fastest() const { return bp_.front().first; }
  // Valid for T ≥ the fastest breakpoint.
  double At(double t) const {
    auto it = std::upper_bound(bp_.begin(), bp_.end(), std::make_pair(t, std::numeric_limits<double>::infinity()));
    const size_t k = static_cast<size_t>(it - bp_.begin());
    if (k == 0) return std::numeric_limits<double>::infinity();
    double best = prefix_min_[k - 1];
    if (k < bp_.size()) {
      const auto& a = bp_[k - 1];
      const auto& b = bp_[k];
      const double interp = a.second + (b.second - a.second) * (t - a.first) / (b.first - a.first);
      best = std::min(best, interp);
    }
    return best;
  }

 private:
  std::vector<std::pair<double, double>> bp_;
  std::vector<double> prefix_min_;
};

class FastSolver final : public Solver {
 public:
  std::string_view name() const override { return "fast"; }

  Result<Solution> Solve(const Problem& problem, const SolveOptions& options) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (options.deadline_ns <= 0) return InvalidArgument("the deadline must be > 0 ns");
    const Prepared p = Prepare(problem);
    Solution sol;
    const double deadline = static_cast<double>(options.deadline_ns);
    if (static_cast<double>(FastestMakespan(p)) > deadline) {
      sol.outcome = Outcome::kInfeasible;
      sol.solve_ms = MsSince(t0);
      return sol;
    }
    Descent descent(p);
    std::vector<std::vector<uint32_t>> candidates;
    std::vector<double> targets{deadline};
    // Round at the deadline, then (if faster is cheaper because idle power dominates) once
    // more where the marginal cost of speed reaches the idle power.
    descent.Run(
        targets, [&](size_t) { candidates.push_back(RoundAndRepair(p, descent.durations(), deadline)); },
        /*continue_while_cheaper=*/true, CutBudget(p, options.descent_max_size));
    if (descent.makespan() < deadline - 1e-3 && !descent.budget_exhausted()) {
      candidates.push_back(RoundAndRepair(p, descent.durations(), descent.makespan()));
    }
    // Linear-time water-filling: always tried (it is cheap), the only answer when
    // the descent ran out of budget before the deadline.
    candidates.push_back(WaterFill(p, deadline));
    double best = std::numeric_limits<double>::infinity();
    for (const auto& c : candidates) {
      Plan plan = ToPlan(p, c);
      const Evaluation ev = Evaluate(problem, plan);
      if (ev.makespan_ns <= options.deadline_ns && ev.energy_j < best) {
        best = ev.energy_j;
        sol.plan = std::move(plan);
        sol.makespan_ns = ev.makespan_ns;
        sol.energy_j = ev.energy_j;
      }
    }
    if (descent.budget_exhausted()) {
      // The relaxation was not followed far enough to bound the optimum at the deadline.
      sol.outcome = Outcome::kFeasible;
      sol.solve_ms = MsSince(t0);
      return sol;
    }
    const RelaxedBound bound(p, descent.breakpoints());
    const double lb = bound.At(deadline);
    sol.has_bound = std::isfinite(lb);
    sol.lower_bound_j = sol.has_bound ? std::min(lb, sol.energy_j) : 0.0;
    sol.outcome = sol.has_bound && sol.energy_j - sol.lower_bound_j <= 1e-9 * std::abs(sol.energy_j)
                      ? Outcome::kOptimal
                      : Outcome::kFeasible;
    sol.solve_ms = MsSince(t0);
    return sol;
  }

  Result<Frontier> SolveFrontier(const Problem& problem, const FrontierOptions& options) override {
    const auto t0 = std::chrono::steady_clock::now();
    const Prepared p = Prepare(problem);
    std::vector<double> targets = FrontierDeadlines(p, options);
    Descent descent(p);
    std::vector<FrontierPoint> raw;
    raw.reserve(targets.size());
    std::vector<double> dur(p.n), ef;
    auto add_point = [&](const std::vector<uint32_t>& c, bool from_descent) {
      FrontierPoint pt;
      pt.plan = ToPlan(p, c);
      double cost = 0.0;
      for (uint32_t i = 0; i < p.n; ++i) {
        dur[i] = p.opt_dur[c[i]];
        cost += p.opt_cost[c[i]];
      }
      const double makespan = ForwardPass(p, dur, ef);
      pt.makespan_ns = static_cast<TimeNs>(std::llround(makespan));
      pt.energy_j = p.Energy(cost, makespan);
      pt.has_bound = from_descent;
      raw.push_back(std::move(pt));
    };
    size_t reached = 0;
    descent.Run(
        targets,
        [&](size_t ti) {
          add_point(RoundAndRepair(p, descent.durations(), targets[ti]), true);
          reached = ti + 1;
        },
        /*continue_while_cheaper=*/false, CutBudget(p, options.descent_max_size));
    // Deadlines the descent's budget did not reach: water-filling.
    const double fastest = static_cast<double>(FastestMakespan(p));
    for (size_t ti = reached; ti < targets.size(); ++ti) {
      if (targets[ti] >= fastest) add_point(WaterFill(p, targets[ti]), false);
    }
    Frontier f;
    f.fastest_ns = FastestMakespan(p);
    f.iterations = descent.iterations();
    f.deadlines = f.deadlines_solved = targets.size();
    const RelaxedBound bound(p, descent.breakpoints());
    for (auto& pt : raw) {
      if (!pt.has_bound) continue;
      // The relaxation is exact only down to where the descent got.
      if (static_cast<double>(pt.makespan_ns) < descent.makespan() - 1e-3) {
        pt.has_bound = false;
        continue;
      }
      const double lb = bound.At(static_cast<double>(pt.makespan_ns));
      pt.has_bound = std::isfinite(lb);
      pt.lower_bound_j = pt.has_bound ? std::min(lb, pt.energy_j) : 0.0;
    }
    f.points = ParetoFilter(std::move(raw), options.keep_plans);
    f.solve_ms = MsSince(t0);
    return f;
  }
};

}  // namespace

std::unique_ptr<Solver> MakeFastSolver() { return std::make_unique<FastSolver>(); }

}  // namespace emo::opt
