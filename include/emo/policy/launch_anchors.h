// Where a plan's packs start, and where their clock switches go, counted in the launch calls
// EMO's tracer follows at run time (trace::emo_format::IsCountedLaunchApi): the policy's
// run-time anchors (docs/policy.md, "Anchors").
#pragma once

#include <cstdint>
#include <limits>
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
  // Per pack, anchored in the GPU's progress instead: the iteration's call (negative: counted
  // back) whose op is the last of the device to end at least `lead` before the pack's first op
  // starts; at run time the switch waits until that op has completed on the GPU. kNoCall where
  // no op of the device ends within an iteration before the pack. The lead the trace shows
  // between that op's end and the pack's start, ns.
  std::vector<int64_t> gpu_switch_call;
  std::vector<TimeNs> gpu_switch_lead_ns;
  // Packs none of whose ops has a counted launch call (a memcpy-only pack): anchored at the next
  // counted call.
  size_t packs_without_call = 0;
  // `emo run --actuator emulate`: extra GPU time to add after a call of the iteration (0-based,
  // in call order), on the stream of the op it launched, so each stream runs as long as the plan's
  // clocks would make it (PlannedPack::op_extra_ns). One pack's extra on one stream is carried
  // from op to op and added where it reaches kSpinMinNs, after an op another stream or the CPU
  // waits for (an event wait, a host sync), and after the pack's last op there.
  struct Spin {
    int64_t call = 0;
    int64_t ns = 0;
  };
  std::vector<Spin> spins;
  int64_t extra_ns = 0;              // the plan's extra per iteration (what the spins add up to)
  int64_t extra_without_call_ns = 0;  // of ops none of whose stream's ops had a call: not emulated
};

inline constexpr int64_t kNoCall = std::numeric_limits<int64_t>::min();

// Spins shorter than this are carried to a later op of the pack on the stream: a spin costs its
// launch on the CPU (about 5 us measured on the H200, emulate.sh's run.emulate_launch_ns over
// run.emulate_spins) and a kernel's start on the GPU (about 1 us); carried to 100 us, that cost
// stays under 5 % of the time it adds (at 20 us it was a quarter, 4.5-5.8 % of a CPU-bound step).
inline constexpr int64_t kSpinMinNs = 100'000;

// The anchors of `packs` (one device's, in time order) in the steady iteration of `a`.
LaunchAnchors AnchorPacks(const analysis::TraceAnalysis& a, const std::vector<const opt::PlannedPack*>& packs,
                          TimeNs lead_ns);

}  // namespace emo::policy
