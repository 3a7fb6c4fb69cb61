// The three clocks of one instant (CUPTI's, CLOCK_REALTIME, CLOCK_MONOTONIC), so that times on
// CUPTI's clock can be put on wall time and NVML's wall-clock samples on CUPTI's clock.
#pragma once

#include <cstdint>

namespace emo::runtime {

struct ClockReference {
  int64_t cupti_ns = 0;
  int64_t realtime_ns = 0;
  int64_t monotonic_ns = 0;

  // A CLOCK_REALTIME time in ns on CUPTI's clock (the two run at the same rate; the offset
  // is taken once, at the start).
  int64_t FromRealtime(int64_t realtime) const { return cupti_ns + (realtime - realtime_ns); }
};

// Reads the three clocks as close together as it can: the tightest of a few tries of
// CUPTI-before, the two system clocks, CUPTI-after, taking CUPTI's midpoint.
ClockReference ReadClockReference();

// CUPTI's timestamp now, 0 when CUPTI does not answer. While CUPTI is being detached or is
// detached (BeginCuptiDetach to CuptiAttaching), CLOCK_MONOTONIC moved onto CUPTI's clock by the
// offset read as the detach began: no CUPTI call, which would race with cuptiFinalize or attach
// CUPTI again.
int64_t CuptiNow();

// The gate between cuptiFinalize and the library's other CUPTI calls. CUPTI is process-wide, and
// cuptiFinalize must not run beside another thread's CUPTI call (pytorch/kineto#686 met a SIGSEGV
// so; an abort in the quiet phases, BENCHMARKS.md Order 7, had the NVML thread's clock reads at
// 50 ms as its likely cause), nor may a call follow it until the library attaches again on
// purpose (any CUPTI call attaches CUPTI lazily). The thread detaching calls BeginCuptiDetach,
// cuptiFinalize, EndCuptiDetach; a subscription opens the gate again (CuptiAttaching).
//
// Waits up to `patience_ns` for the CUPTI calls in flight through the gate (CuptiNow, CuptiUse)
// to end, holding new ones off. False, with the gate open again, if one outlasts it: the caller
// then does not detach (a later call's exit tries again). Never waits for another thread's
// callback, so it may be called inside one.
bool BeginCuptiDetach(int64_t patience_ns);
void EndCuptiDetach();
// CUPTI is (about to be) attached on purpose: CuptiNow reads CUPTI's clock again.
void CuptiAttaching();

// A stretch of CUPTI calls made on one of the library's own threads (the writer decoding a
// buffer): waits while a detach is under way, and holds the next one off until it ends.
class CuptiUse {
 public:
  CuptiUse();
  ~CuptiUse();
  CuptiUse(const CuptiUse&) = delete;
  CuptiUse& operator=(const CuptiUse&) = delete;
};

// CLOCK_MONOTONIC now, in ns (no CUPTI call).
int64_t MonotonicNow();

}  // namespace emo::runtime
