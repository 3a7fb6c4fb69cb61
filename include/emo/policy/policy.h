// The versioned JSON clock policy (BRIEF stage 7): per GPU, packs anchored to launch-sequence
// positions in the steady iteration, the clock of each, predicted time and energy, how sure
// the timeline under them is, and which device model produced them. docs/policy.md documents
// the format.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/opt/trace_plan.h"

namespace emo::policy {

inline constexpr int kPolicyVersion = 2;

// One policy for every planned trace (one per rank): a plan per GPU.
nlohmann::json PolicyJson(const std::vector<opt::PlannedTrace>& plans);

}  // namespace emo::policy
