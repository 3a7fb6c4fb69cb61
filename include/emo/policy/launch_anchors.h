// Where a plan's packs start, and where their clock switches go, counted in the launch calls
// EMO's tracer follows at run time (trace::emo_format::IsCountedLaunchApi): the policy's
// run-time anchors (docs/policy.md, "Anchors").
#pragma once

#include <cstdint>
#include <vector>

#include "emo/analysis/analyze.h"
#include "emo/opt/trace_plan.h"

namespace emo::policy {

struct LaunchAnchors {
  // Counted launch calls the program makes in the steady iteration (all its threads).
  uint32_t calls_per_iteration = 0;
  // Per pack: the iteration's call (0-based) that launches the pack's first op, and the call
  // after which its clock should be asked for, so that it is in effect `lead` before the pack's
  // first op starts on the GPU (the traced lag between launch and start included). A negative
  // switch call counts back from the iteration's first call (-1: the previous iteration's last).
  std::vector<int64_t> first_call;
  std::vector<int64_t> switch_call;
  // Packs none of whose ops has a counted launch call (a memcpy-only pack): anchored at the next
  // counted call.
  size_t packs_without_call = 0;
};

// The anchors of `packs` (one device's, in time order) in the steady iteration of `a`.
LaunchAnchors AnchorPacks(const analysis::TraceAnalysis& a, const std::vector<const opt::PlannedPack*>& packs,
                          TimeNs lead_ns);

}  // namespace emo::policy
