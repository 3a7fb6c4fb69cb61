// What-if: per-node durations changed by rules (BRIEF stage 3).
#pragma once

#include <string>
#include <vector>

#include "emo/base/status.h"
#include "emo/graph/graph.h"

namespace emo::analysis {

// Scale the durations of GPU ops whose name matches `regex` (ECMAScript, searched, not
// anchored: "spin_kernel" matches "at::cuda::(anonymous namespace)::spin_kernel(long)").
struct ScaleRule {
  std::string regex;
  double factor = 1.0;
};

// Parses "REGEX=FACTOR" (the last '=' splits, so a regex may contain '=').
Result<ScaleRule> ParseScaleRule(const std::string& text);

// Durations with every rule applied (later rules multiply earlier ones on the same op).
// `matched` receives, per rule, how many GPU ops it matched.
Result<std::vector<TimeNs>> ScaledDurations(const graph::Graph& g, const std::vector<TimeNs>& base,
                                            const std::vector<ScaleRule>& rules,
                                            std::vector<size_t>* matched = nullptr);

}  // namespace emo::analysis
