// Solvers for the time–energy problem (problem.h), behind one interface: an exact MILP (COIN-OR
// CBC) for certificates on small and medium graphs, and a fast parametric min-cut solver for
// large ones. "Did the call work" (Status) is separate from "what the solver found" (Outcome).
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "emo/base/status.h"
#include "emo/opt/problem.h"

namespace emo::opt {

// What a solve found (STYLE §8): an infeasible deadline is an answer, not an error.
enum class Outcome {
  kOptimal,     // the plan is proven optimal (within SolveOptions::relative_gap)
  kFeasible,    // a plan meeting the deadline, with a lower bound but no optimality proof
  kInfeasible,  // no plan meets the deadline (it is below the all-fastest makespan)
  kTimeLimit,   // stopped at the time limit; a plan may or may not have been found
};
std::string_view OutcomeName(Outcome outcome);

struct SolveOptions {
  TimeNs deadline_ns = 0;       // makespan bound T (> 0)
  double time_limit_s = 60.0;   // exact solver: wall-clock limit
  double relative_gap = 1e-6;   // exact solver: stop once proven within this fraction
  // Fast solver: the exact parametric descent runs on graphs of at most this many nodes +
  // edges (and for a bounded amount of work); larger ones use linear-time water-filling.
  size_t descent_max_size = 20000;
};

// The best plan found for one deadline. It minimises E = Σ c + P_idle·G·makespan over plans
// with makespan ≤ deadline (so it may finish before the deadline when that saves idle energy).
struct Solution {
  Outcome outcome = Outcome::kInfeasible;
  Plan plan;                     // empty when no plan was found
  TimeNs makespan_ns = 0;
  double energy_j = 0.0;
  double lower_bound_j = 0.0;    // proven lower bound on the optimum energy (valid if has_bound)
  bool has_bound = false;
  double solve_ms = 0.0;
  bool has_plan() const { return !plan.empty(); }
  // 100·(energy − bound)/bound, or -1 without a plan or a bound.
  double gap_pct() const;
};

// One point of the time–energy frontier: a plan and what it costs.
struct FrontierPoint {
  TimeNs makespan_ns = 0;
  double energy_j = 0.0;
  double lower_bound_j = 0.0;  // lower bound on the optimum at this makespan (if has_bound)
  bool has_bound = false;
  Plan plan;                   // empty unless FrontierOptions::keep_plans
};

struct FrontierOptions {
  // Makespan bounds to solve for; when empty, a grid from the fastest to the slowest useful
  // makespan with `step_ns` spacing (0: (slowest − fastest) / max_points).
  std::vector<TimeNs> deadlines;
  std::vector<TimeNs> extra_deadlines;  // solved as well (e.g. a latency target)
  TimeNs step_ns = 0;
  size_t max_points = 1000;
  bool keep_plans = false;
  // Exact solver: wall-clock budget (s) of the whole sweep, shared by its deadlines (each solve
  // gets what is left). The extra deadlines are solved first, then the grid's ends, then the
  // grid from coarse to fine, so a sweep the budget cuts short still spans the range; the
  // frontier then says it is partial.
  double time_limit_s = 60.0;
  size_t descent_max_size = 20000;  // fast solver: as SolveOptions::descent_max_size
  // Called after each deadline is solved with how many are done and how many there are
  // (exact solver; the fast one sweeps in one go). May be empty.
  std::function<void(size_t done, size_t total)> progress;
};

// The Pareto frontier: points sorted by makespan ascending with energy strictly decreasing
// (a plan that is slower and no cheaper than another is dropped).
struct Frontier {
  std::vector<FrontierPoint> points;
  TimeNs fastest_ns = 0;        // the all-fastest makespan (no plan can be faster)
  double solve_ms = 0.0;
  size_t iterations = 0;        // solver-specific work count (min cuts, MILP solves)
  bool all_optimal = false;     // exact solver: every point proven optimal
  size_t deadlines = 0;         // deadlines the sweep was asked to solve
  size_t deadlines_solved = 0;  // of them, solved before the time limit ran out
  bool partial = false;         // the time limit ran out: deadlines_solved < deadlines
};

// The energy of the cheapest frontier point finishing within `deadline_ns`, or -1 if none.
double EnergyAtDeadline(const Frontier& frontier, TimeNs deadline_ns);

class Solver {
 public:
  virtual ~Solver() = default;
  virtual std::string_view name() const = 0;
  // Minimum-energy plan with makespan ≤ options.deadline_ns. `problem` must be Validate()d.
  virtual Result<Solution> Solve(const Problem& problem, const SolveOptions& options) = 0;
  // The time–energy frontier over deadlines.
  virtual Result<Frontier> SolveFrontier(const Problem& problem,
                                         const FrontierOptions& options) = 0;
};

enum class SolverKind { kFast, kExact };

// True when EMO was built with COIN-OR CBC (the exact solver).
bool HaveExactSolver();

// The solver of `kind`; kExact without CBC is an Unsupported error.
Result<std::unique_ptr<Solver>> MakeSolver(SolverKind kind);

}  // namespace emo::opt
