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

inline constexpr int kPolicyVersion = 3;

// How long before a pack's first op starts on the GPU its clock is asked for: the switch
// latency the plan assumed, plus 1 ms for the tracer's control thread, which looks at the
// program's launches once per millisecond.
inline constexpr TimeNs kRuntimeReactionNs = 1'000'000;
inline TimeNs SwitchLeadNs(const opt::TracePlan& plan) { return plan.switch_latency_ns + kRuntimeReactionNs; }

// One policy for every planned trace (one per rank): a plan per GPU. `job` (the ranks of one job
// planned together: report::JobPlanToJson) becomes the policy's `job` object, with the job's
// predicted energy per iteration summed over its GPUs.
nlohmann::json PolicyJson(const std::vector<opt::PlannedTrace>& plans, const nlohmann::json* job = nullptr);

}  // namespace emo::policy
