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

// CUPTI's timestamp now, 0 when CUPTI does not answer. From BeginCuptiDetach to EndCuptiAttach
// (CUPTI being detached, detached, being attached again), CLOCK_MONOTONIC moved onto CUPTI's clock
// by the offset read as the detach began: no CUPTI call, which would race with cuptiFinalize,
// attach CUPTI again, or race with the subscription that attaches it.
int64_t CuptiNow();

// The gate between cuptiFinalize and the library's other CUPTI calls. CUPTI is process-wide, and
// cuptiFinalize must not run beside another thread's CUPTI call (pytorch/kineto#686 met a SIGSEGV
// so; an abort in the quiet phases, BENCHMARKS.md Order 7, had the NVML thread's clock reads at
// 50 ms as its likely cause), nor may a call follow it until the library attaches again on
// purpose (any CUPTI call attaches CUPTI lazily), nor run beside the call that attaches it again:
// CUPTI's lazy initialization is not thread-safe (on an H100, the NVML thread's cuptiGetTimestamp
// beside the control thread's cuptiSubscribe_v2 freed one buffer twice; AddressSanitizer,
// BENCHMARKS.md Order 7). The thread detaching calls BeginCuptiDetach, cuptiFinalize,
// EndCuptiDetach; the one attaching again BeginCuptiAttach, its subscription, EndCuptiAttach.
//
// Waits up to `patience_ns` for the CUPTI calls in flight through the gate (CuptiNow, CuptiUse)
// to end, holding new ones off. False, with the gate open again, if one outlasts it: the caller
// then does not detach (a later call's exit tries again). Never waits for another thread's
// callback, so it may be called inside one.
bool BeginCuptiDetach(int64_t patience_ns);
void EndCuptiDetach();
// True once a detach (EndCuptiDetach) has happened in this process, in any session.
bool CuptiDetachedBefore();
// Holds the other threads' CUPTI calls off (waiting for those in flight) while this thread
// attaches CUPTI; EndCuptiAttach lets them through again, CuptiNow reading CUPTI's clock.
void BeginCuptiAttach();
void EndCuptiAttach();
// Opens the gate where no other thread of the library runs (a session starting after an earlier
// one's detach): the caller's own next CUPTI call attaches CUPTI.
void OpenCuptiGate();

// A stretch of CUPTI calls made on one of the library's own threads (the writer decoding a
// buffer): waits while a detach or an attach is under way, and holds the next one off until it
// ends.
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
