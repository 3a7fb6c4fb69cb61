// Internal: the problem in the form solvers work on (CSR adjacency, topological order, the
// useful options of every node and their lower convex hull). Not a public header.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "emo/opt/problem.h"

namespace emo::opt {

// Fills `order` with a topological order; returns -1, or a node on a cycle.
int64_t TopologicalOrder(const Problem& problem, std::vector<uint32_t>& order);

// Longest-path makespan with per-node durations (problem must be acyclic).
TimeNs Makespan(const Problem& problem, std::span<const TimeNs> durations);

struct Prepared {
  uint32_t n = 0;
  std::vector<uint32_t> topo;                    // topological order
  std::vector<uint32_t> succ_begin, succ;        // CSR successors
  std::vector<double> succ_delay;                // ns
  std::vector<uint32_t> pred_begin, pred;        // CSR predecessors
  std::vector<double> pred_delay;                // ns

  // Useful options per node: sorted by duration ascending with effective cost strictly
  // decreasing (an option is useful iff no other is at least as fast and at least as cheap).
  std::vector<uint32_t> opt_begin;
  std::vector<double> opt_dur;    // ns
  std::vector<double> opt_cost;   // effective cost c = e − P_idle·t (GPU nodes), J
  std::vector<uint32_t> opt_index;  // index into problem.options(i)

  // Lower convex hull of the useful options (a subset, same order): the continuous
  // relaxation's cost is the piecewise-linear function through these vertices.
  std::vector<uint32_t> hull_begin;
  std::vector<double> hull_dur, hull_cost;

  double idle_term_w = 0.0;  // P_idle · G: energy per second of makespan

  double fastest(uint32_t i) const { return opt_dur[opt_begin[i]]; }
  double slowest(uint32_t i) const { return opt_dur[opt_begin[i + 1] - 1]; }
  uint32_t num_useful(uint32_t i) const { return opt_begin[i + 1] - opt_begin[i]; }

  // Energy of a makespan and a sum of effective costs.
  double Energy(double cost_sum_j, double makespan_ns) const {
    return cost_sum_j + idle_term_w * makespan_ns * 1e-9;
  }
  // Index (into opt_*) of the slowest useful option of node i with duration ≤ d (the
  // fastest if none).
  uint32_t SlowestWithin(uint32_t i, double d) const;
};

// Builds the prepared form of a Validate()d problem.
Prepared Prepare(const Problem& problem);

// Earliest start of node u given the earliest finishes `ef` of its predecessors (the forward
// pass's step; the solvers that change durations during the pass call it directly).
double EarliestStart(const Prepared& p, const std::vector<double>& ef, uint32_t u);
// Earliest finish of every node with durations `dur` (ns); returns the makespan.
double ForwardPass(const Prepared& p, std::span<const double> dur, std::vector<double>& ef);
// Latest finish of node u given the latest finishes `lf` of its successors (the backward
// pass's step; the solvers that change durations during the pass call it directly).
double LatestFinish(const Prepared& p, std::span<const double> dur, const std::vector<double>& lf, uint32_t u,
                    double deadline);
// Latest finish of every node so that everything ends by `deadline`.
void BackwardPass(const Prepared& p, std::span<const double> dur, double deadline,
                  std::vector<double>& lf);

// Turns per-node useful-option indices (into opt_*) into a Plan of problem option indices.
Plan ToPlan(const Prepared& p, std::span<const uint32_t> useful_choice);

}  // namespace emo::opt
