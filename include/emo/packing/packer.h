// Packing (BRIEF stage 4): the SM clock is GPU-wide, so a decision unit is a time window of
// one GPU covering every op running in it on any stream. The packer cuts the steady
// iteration's GPU timeline of each device into packs no shorter than a minimum length (a
// multiple of the clock-switch latency), with boundaries where the ops' slack class changes.
#pragma once

#include <vector>

#include "emo/analysis/analyze.h"

namespace emo::packing {

struct PackOptions {
  // Minimum pack length. The H200 clock-switch latency is not measured yet; 10 ms is a
  // stated assumption (issue Order 4) until it is.
  TimeNs min_pack_ns = 10'000'000;
  // An op "has slack" when its slack exceeds this share of its duration.
  double slack_share = 0.05;
};

// One pack: a window of one device's timeline and the GPU ops that start in it, in start
// order. `first_launch` is the index of its first op in the iteration's launch order on the
// device (the anchor a run-time policy uses).
struct Pack {
  int32_t device = 0;
  TimeNs start = 0;  // first op start (timeline)
  TimeNs end = 0;    // next pack's start, or the iteration end
  std::vector<graph::NodeId> ops;
  size_t first_launch = 0;
  bool has_slack = false;  // the majority of its busy time has slack
};

// Packs of the analysis' steady iteration, per device in time order.
std::vector<Pack> PackSteadyIteration(const analysis::TraceAnalysis& a, const PackOptions& options);

}  // namespace emo::packing
