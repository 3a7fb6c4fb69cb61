// Internal: the linear-time heuristic the fast solver uses on graphs too large for the exact
// parametric descent (descent.h).
//
// Water-filling by saving rate: start with every node at its fastest option and hand out the
// slack in rounds of decreasing threshold θ (geometric, then 0): in each round, forward and
// backward greedy passes let a node step to a slower option that still fits (exact earliest
// starts from the updated side, latest finishes from the unchanged side, so the deadline always
// holds) when that step saves ≥ θ J per ns. The steepest savings are served first wherever
// they are, which approximates the relaxation's optimality condition (equal marginal rates
// along shared paths). O(levels × passes × (V + E)) per deadline; no lower bound.
#pragma once

#include <vector>

#include "prepared.h"

namespace emo::opt {

// Useful-option indices of a plan meeting `deadline` (≥ the all-fastest makespan).
std::vector<uint32_t> WaterFill(const Prepared& p, double deadline);

}  // namespace emo::opt
