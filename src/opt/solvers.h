// Internal: solver factories and helpers shared by the solver implementations.
#pragma once

#include <memory>
#include <vector>

#include "emo/opt/solver.h"
#include "prepared.h"

namespace emo::opt {

std::unique_ptr<Solver> MakeFastSolver();
#ifdef EMO_HAVE_CBC
std::unique_ptr<Solver> MakeCbcSolver();
#endif

// The all-fastest makespan (ns).
TimeNs FastestMakespan(const Prepared& p);
// The makespan with every node at its slowest useful option (ns).
TimeNs SlowestMakespan(const Prepared& p);

// The deadlines a frontier is solved for, descending (integer ns values as doubles).
std::vector<double> FrontierDeadlines(const Prepared& p, const FrontierOptions& options);

// The order an expensive sweep solves `deadlines` (descending) in: those in `first` (in their
// order), then the two ends, then the rest coarse to fine (every 2^k-th, k falling), so that any
// prefix of the order spans the whole range.
std::vector<double> SweepOrder(const std::vector<double>& deadlines, const std::vector<TimeNs>& first);

// Sorts by makespan and keeps the points whose energy is strictly below every faster one.
std::vector<FrontierPoint> ParetoFilter(std::vector<FrontierPoint> points, bool keep_plans);

}  // namespace emo::opt
