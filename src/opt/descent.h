// Internal: the parametric min-cut descent behind the fast solver.
//
// It solves the continuous relaxation of the problem — every node's cost is the lower convex
// hull of its useful options, and a node may be "stretched" past its slowest option at no
// cost (it finishes early and idles, which the idle term already pays for) — for every
// makespan from the all-slowest one down to the all-fastest, by the Fulkerson / Phillips–
// Dessouky time–cost trade-off: at each step a minimum cut of the critical subgraph (flow
// bounds: lb = saving per ns of slowing a node, ub = cost per ns of speeding it) says which
// nodes to speed up (S→T) and which to slow down (T→S), and the step runs until the next hull
// vertex, a new critical path, or the next requested makespan.
//
// Departures from lowtime's implementation (research/energy-optimizers.md §1.4), on purpose:
//  - steps are exact breakpoints (variable length), not one time unit each, so the number of
//    iterations does not grow with 1/unit_time; a step that stopped only at a requested
//    makespan reuses its cut instead of recomputing it;
//  - the cost is the convex hull of the MEASURED options, not a fitted exponential;
//  - options are filtered on effective cost (e − P_idle·t), so clocks below the raw-energy
//    minimum stay available where there is slack, and dominated clocks never appear;
//  - stretching replaces "an op at its maximum duration cannot be slowed" (a lowtime stop
//    condition);
//  - the minimum cut with flow lower bounds is ONE ordinary max-flow (a node-excess
//    reformulation, see FindCut), so there is no feasible-flow phase that can fail and end
//    the search (lowtime's LowtimeFlowError).
// Being exact on a convex problem, the relaxation's cost at makespan T is a lower bound on
// any discrete plan's cost at T.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "maxflow.h"
#include "prepared.h"

namespace emo::opt {

class Descent {
 public:
  explicit Descent(const Prepared& p);

  // Called when the makespan reaches a requested value (index into the targets), with the
  // relaxation's durations at that point.
  using TargetFn = std::function<void(size_t target)>;

  // Descends from the all-slowest relaxation. `targets` must be sorted descending. Stops after
  // the last target, or — if `continue_while_cheaper` — once the marginal cost of a faster
  // makespan reaches P_idle·G (going faster no longer saves energy), or at the fastest
  // makespan. Targets below the fastest makespan are never reached.
  // At most `max_cuts` minimum cuts are computed; budget_exhausted() tells if that stopped it.
  void Run(std::span<const double> targets, const TargetFn& on_target,
           bool continue_while_cheaper, size_t max_cuts = SIZE_MAX);
  bool budget_exhausted() const { return budget_exhausted_; }

  const std::vector<double>& durations() const { return d_; }
  double makespan() const { return makespan_; }
  // Σ of hull costs at the current durations (J).
  double RelaxedCost() const;
  // Marginal cost of the last cut (W): what one more second of speed-up costs.
  double marginal_w() const { return marginal_w_; }
  size_t iterations() const { return iterations_; }
  bool reached_fastest() const { return reached_fastest_; }
  // (makespan, relaxed cost) after every step, makespans descending.
  const std::vector<std::pair<double, double>>& breakpoints() const { return breakpoints_; }

 private:
  double HullCost(uint32_t i, double d) const;
  double SpeedSlope(uint32_t i, double d) const;  // W; 1e30 when at its fastest
  double SlowSlope(uint32_t i, double d) const;   // W; 0 when at/over slowest
  double NextLower(uint32_t i, double d) const;
  double NextUpper(uint32_t i, double d) const;   // +inf when at/over slowest
  void Cpm();
  bool FindCut();                    // fills dir_; false when no finite cut exists
  double StepLimit(double target) const;
  double LimitByOtherPaths(double delta);
  void Apply(double delta);

  const Prepared& p_;
  std::vector<double> d_, ef_, lf_;
  std::vector<int8_t> dir_;          // −1 speed up, +1 slow down, 0 unchanged
  std::vector<uint32_t> moved_;      // nodes with dir_ ≠ 0
  std::vector<int32_t> net_id_;
  std::vector<uint32_t> crit_;
  std::vector<double> excess_, ub_, lb_;
  std::vector<char> reach_;
  std::vector<double> lp_val_, lp_a_;
  std::vector<int32_t> lp_k_;
  MaxFlow flow_;
  double makespan_ = 0.0;
  double marginal_w_ = 0.0;
  size_t iterations_ = 0;
  bool reached_fastest_ = false;
  bool budget_exhausted_ = false;
  std::vector<std::pair<double, double>> breakpoints_;
};

// Rounds relaxed durations to a discrete plan meeting `deadline` (each node takes its slowest
// useful option not longer than its relaxed duration), then gives leftover slack back with a
// forward and a backward greedy pass. Returns useful-option indices (into p.opt_*).
std::vector<uint32_t> RoundAndRepair(const Prepared& p, std::span<const double> durations,
                                     double deadline);

}  // namespace emo::opt
