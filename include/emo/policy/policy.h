// The versioned JSON clock policy (BRIEF stage 7): per GPU, packs anchored to launch-sequence
// positions in the steady iteration, the clock of each, predicted time and energy, and which
// device model produced them. docs/policy.md documents the format.
#pragma once

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/opt/trace_plan.h"

namespace emo::policy {

inline constexpr int kPolicyVersion = 1;

// The policy of `plan`, made for the trace analysed in `a`.
nlohmann::json PolicyJson(const analysis::TraceAnalysis& a, const opt::TracePlan& plan);

}  // namespace emo::policy
