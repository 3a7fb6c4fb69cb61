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

// CUPTI's timestamp now, 0 when CUPTI does not answer. Like any CUPTI call, attaches CUPTI
// again after a detach (cuptiFinalize).
int64_t CuptiNow();

// CLOCK_MONOTONIC now, in ns (no CUPTI call).
int64_t MonotonicNow();

}  // namespace emo::runtime
