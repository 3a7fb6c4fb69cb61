// The exact solver: a MILP solved with COIN-OR CBC.
//   x_ik ∈ {0,1}   node i runs its useful option k (Σ_k x_ik = 1)
//   s_i ≥ 0        start time;  M ≤ T  makespan
//   s_j ≥ s_i + Σ_k t_ik x_ik + w_ij for every edge;  M ≥ s_i + Σ_k t_ik x_ik
//   min Σ c_ik x_ik + P_idle·G·M      (c = e − P_idle·t, problem.h)
// Only useful options enter (a dominated option is never needed in an optimum). Times are
// scaled so the longest option is ~1e3 units, keeping coefficients well conditioned. The fast
// solver's plan is handed to CBC as a MIP start.
#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "solvers.h"

namespace emo::opt {

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct CbcModelDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

class CbcSolver final : public Solver {
 public:
  std::string_view name() const override { return "exact"; }

  Result<Solution> Solve(const Problem& problem, const SolveOptions& options) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (options.deadline_ns <= 0) return InvalidArgument("the deadline must be > 0 ns");
    const Prepared p = Prepare(problem);
    Solution sol;
    if (FastestMakespan(p) > options.deadline_ns) {
      sol.outcome = Outcome::kInfeasible;
      sol.solve_ms = MsSince(t0);
      return sol;
    }
    // Warm start from the fast solver.
    Solution warm;
    {
      auto fast = MakeFastSolver();
      auto r = fast->Solve(problem, options);
      if (r.ok()) warm = std::move(r).value();
    }

    double max_dur = 1.0;
    for (uint32_t i = 0; i < p.n; ++i) max_dur = std::max(max_dur, p.slowest(i));
    const double unit = std::max(1.0, std::pow(10.0, std::floor(std::log10(max_dur)) - 3.0));
    const double deadline_u = static_cast<double>(options.deadline_ns) / unit;

    // Columns: x (binary, nodes with ≥ 2 useful options), then s_i, then M.
    std::vector<int32_t> x_first(p.n, -1);
    int32_t cols = 0;
    double offset = 0.0;
    for (uint32_t i = 0; i < p.n; ++i) {
      if (p.num_useful(i) >= 2) {
        x_first[i] = cols;
        cols += static_cast<int32_t>(p.num_useful(i));
      } else {
        offset += p.opt_cost[p.opt_begin[i]];
      }
    }
    const int32_t s_first = cols;
    cols += static_cast<int32_t>(p.n);
    const int32_t m_col = cols++;

    // Rows, built as triplets then turned column-major.
    struct Entry {
      int32_t row, col;
      double v;
    };
    std::vector<Entry> nz;
    std::vector<double> row_lo, row_hi;
    auto add_duration_terms = [&](int32_t row, uint32_t i, double sign) -> double {
      // Adds sign·duration_i to the row; returns the constant part (fixed nodes).
      if (x_first[i] < 0) return sign * p.opt_dur[p.opt_begin[i]] / unit;
      for (uint32_t k = 0; k < p.num_useful(i); ++k) {
        nz.push_back({row, x_first[i] + static_cast<int32_t>(k), sign * p.opt_dur[p.opt_begin[i] + k] / unit});
      }
      return 0.0;
    };
    for (uint32_t i = 0; i < p.n; ++i) {
      if (x_first[i] < 0) continue;
      const int32_t r = static_cast<int32_t>(row_lo.size());
      for (uint32_t k = 0; k < p.num_useful(i); ++k) nz.push_back({r, x_first[i] + static_cast<int32_t>(k), 1.0});
      row_lo.push_back(1.0);
      row_hi.push_back(1.0);
    }
    for (uint32_t i = 0; i < p.n; ++i) {
      for (uint32_t e = p.succ_begin[i]; e < p.succ_begin[i + 1]; ++e) {
        // s_j − s_i − dur_i ≥ w
        const int32_t r = static_cast<int32_t>(row_lo.size());
        nz.push_back({r, s_first + static_cast<int32_t>(p.succ[e]), 1.0});
        nz.push_back({r, s_first + static_cast<int32_t>(i), -1.0});
        const double c = add_duration_terms(r, i, -1.0);
        row_lo.push_back(p.succ_delay[e] / unit - c);
        row_hi.push_back(std::numeric_limits<double>::max());
      }
      if (p.succ_begin[i] == p.succ_begin[i + 1]) {
        // M − s_i − dur_i ≥ 0
        const int32_t r = static_cast<int32_t>(row_lo.size());
        nz.push_back({r, m_col, 1.0});
        nz.push_back({r, s_first + static_cast<int32_t>(i), -1.0});
        const double c = add_duration_terms(r, i, -1.0);
        row_lo.push_back(-c);
        row_hi.push_back(std::numeric_limits<double>::max());
      }
    }
    std::sort(nz.begin(), nz.end(), [](const Entry& a, const Entry& b) {
      return a.col != b.col ? a.col < b.col : a.row < b.row;
    });
    std::vector<CoinBigIndex> start(static_cast<size_t>(cols) + 1, 0);
    std::vector<int> index(nz.size());
    std::vector<double> value(nz.size());
    for (size_t k = 0; k < nz.size(); ++k) {
      ++start[static_cast<size_t>(nz[k].col) + 1];
      index[k] = nz[k].row;
      value[k] = nz[k].v;
    }
    for (size_t c = 0; c < static_cast<size_t>(cols); ++c) start[c + 1] += start[c];
    std::vector<double> col_lo(static_cast<size_t>(cols), 0.0), col_hi(static_cast<size_t>(cols), 1.0),
        obj(static_cast<size_t>(cols), 0.0);
    for (uint32_t i = 0; i < p.n; ++i) {
      if (x_first[i] >= 0) {
        for (uint32_t k = 0; k < p.num_useful(i); ++k) {
          obj[static_cast<size_t>(x_first[i]) + k] = p.opt_cost[p.opt_begin[i] + k];
        }
      }
      col_hi[static_cast<size_t>(s_first) + i] = deadline_u;
    }
    col_hi[static_cast<size_t>(m_col)] = deadline_u;
    obj[static_cast<size_t>(m_col)] = p.idle_term_w * unit * 1e-9;

    std::unique_ptr<Cbc_Model, CbcModelDeleter> model(Cbc_newModel());
    Cbc_Model* m = model.get();
    Cbc_loadProblem(m, cols, static_cast<int>(row_lo.size()), start.data(), index.data(), value.data(),
                    col_lo.data(), col_hi.data(), obj.data(), row_lo.data(), row_hi.data());
    for (int32_t c = 0; c < s_first; ++c) Cbc_setInteger(m, c);
    Cbc_setObjSense(m, 1.0);
    Cbc_setLogLevel(m, 0);
    // The limit is wall-clock time (CBC counts CPU time by default, which runs slower than the
    // clock on a loaded machine).
    Cbc_setParameter(m, "timeMode", "elapsed");
    Cbc_setMaximumSeconds(m, options.time_limit_s);
    Cbc_setAllowableFractionGap(m, options.relative_gap);
    if (warm.has_plan()) {
      std::vector<int> idx;
      std::vector<double> val;
      for (uint32_t i = 0; i < p.n; ++i) {
        if (x_first[i] < 0) continue;
        for (uint32_t k = 0; k < p.num_useful(i); ++k) {
          idx.push_back(x_first[i] + static_cast<int32_t>(k));
          val.push_back(p.opt_index[p.opt_begin[i] + k] == warm.plan[i] ? 1.0 : 0.0);
        }
      }
      Cbc_setMIPStartI(m, static_cast<int>(idx.size()), idx.data(), val.data());
    }
    Cbc_solve(m);

    const bool proven_optimal = Cbc_isProvenOptimal(m) != 0;
    const bool proven_infeasible = Cbc_isProvenInfeasible(m) != 0;
    const bool have_solution = Cbc_numberSavedSolutions(m) > 0 || proven_optimal;
    if (have_solution) {
      const double* x = Cbc_getColSolution(m);
      Plan plan(p.n);
      for (uint32_t i = 0; i < p.n; ++i) {
        if (x_first[i] < 0) {
          plan[i] = p.opt_index[p.opt_begin[i]];
          continue;
        }
        uint32_t best = 0;
        for (uint32_t k = 1; k < p.num_useful(i); ++k) {
          if (x[x_first[i] + static_cast<int32_t>(k)] > x[x_first[i] + static_cast<int32_t>(best)]) best = k;
        }
        plan[i] = p.opt_index[p.opt_begin[i] + best];
      }
      const Evaluation ev = Evaluate(problem, plan);
      if (ev.makespan_ns <= options.deadline_ns) {
        sol.plan = std::move(plan);
        sol.makespan_ns = ev.makespan_ns;
        sol.energy_j = ev.energy_j;
      }
    }
    // Never return worse than the warm start (CBC may stop at the limit before improving it).
    if (warm.has_plan() && (!sol.has_plan() || warm.energy_j < sol.energy_j - 1e-12)) {
      sol.plan = warm.plan;
      sol.makespan_ns = warm.makespan_ns;
      sol.energy_j = warm.energy_j;
    }
    const double bound = Cbc_getBestPossibleObjValue(m) + offset;
    if (std::isfinite(bound) && std::abs(bound) < 1e29) {
      sol.lower_bound_j = std::min(bound, sol.has_plan() ? sol.energy_j : bound);
      sol.has_bound = true;
    }
    if (warm.has_bound) {
      sol.lower_bound_j = sol.has_bound ? std::max(sol.lower_bound_j, warm.lower_bound_j) : warm.lower_bound_j;
      sol.has_bound = true;
    }
    if (proven_infeasible && !sol.has_plan()) {
      sol.outcome = Outcome::kInfeasible;
    } else if (proven_optimal && sol.has_plan()) {
      sol.outcome = Outcome::kOptimal;
      sol.lower_bound_j = std::max(sol.lower_bound_j,
                                   sol.energy_j - options.relative_gap * std::abs(sol.energy_j));
    } else if (Cbc_isSecondsLimitReached(m) != 0) {
      sol.outcome = Outcome::kTimeLimit;
    } else {
      sol.outcome = sol.has_plan() ? Outcome::kFeasible : Outcome::kTimeLimit;
    }
    sol.solve_ms = MsSince(t0);
    return sol;
  }

  Result<Frontier> SolveFrontier(const Problem& problem, const FrontierOptions& options) override {
    const auto t0 = std::chrono::steady_clock::now();
    const Prepared p = Prepare(problem);
    Frontier f;
    f.fastest_ns = FastestMakespan(p);
    f.all_optimal = true;
    std::vector<FrontierPoint> raw;
    // One budget for the whole sweep, in an order whose every prefix spans the range: the
    // latency targets first, then coarse to fine. A target may take half of what is left; any
    // other deadline an equal share of what is left, but at least kMinShareS (a MILP needs some
    // time to improve on its warm start), so a budget too small for every deadline ends the
    // sweep early with the range still covered, coarsely.
    constexpr double kMinShareS = 1.0;
    const std::vector<double> order = SweepOrder(FrontierDeadlines(p, options), options.extra_deadlines);
    std::vector<TimeNs> targets = options.extra_deadlines;
    std::sort(targets.begin(), targets.end());
    const size_t num_targets = static_cast<size_t>(std::unique(targets.begin(), targets.end()) - targets.begin());
    f.deadlines = order.size();
    for (size_t k = 0; k < order.size(); ++k) {
      // The first deadline is always solved (the frontier is never empty): its plan is at
      // worst the fast solver's warm start.
      const double left_s = options.time_limit_s - MsSince(t0) / 1e3;
      if (left_s <= 0 && f.deadlines_solved > 0) {
        f.partial = true;
        break;
      }
      const double share_s = k < num_targets ? left_s / 2
                                             : std::max(left_s / static_cast<double>(order.size() - k),
                                                        std::min(left_s, kMinShareS));
      SolveOptions so;
      so.deadline_ns = static_cast<TimeNs>(std::llround(order[k]));
      so.time_limit_s = std::max(share_s, 1e-3);
      EMO_ASSIGN_OR_RETURN(Solution s, Solve(problem, so));
      ++f.iterations;
      ++f.deadlines_solved;
      if (options.progress) options.progress(f.deadlines_solved, f.deadlines);
      if (s.outcome != Outcome::kOptimal) f.all_optimal = false;
      if (!s.has_plan()) continue;
      FrontierPoint pt;
      pt.makespan_ns = s.makespan_ns;
      pt.energy_j = s.energy_j;
      pt.lower_bound_j = s.lower_bound_j;
      pt.has_bound = s.has_bound;
      pt.plan = std::move(s.plan);
      raw.push_back(std::move(pt));
    }
    f.points = ParetoFilter(std::move(raw), options.keep_plans);
    f.solve_ms = MsSince(t0);
    return f;
  }
};

}  // namespace

std::unique_ptr<Solver> MakeCbcSolver() { return std::make_unique<CbcSolver>(); }

}  // namespace emo::opt
