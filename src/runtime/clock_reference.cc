#include "clock_reference.h"

#include <cupti.h>
#include <time.h>

namespace emo::runtime {
namespace {

int64_t Ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t MonotonicNow() { return Ns(CLOCK_MONOTONIC); }

int64_t CuptiNow() {
  uint64_t t = 0;
  return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? static_cast<int64_t>(t) : 0;
}

ClockReference ReadClockReference() {
  ClockReference best;
  int64_t best_width = -1;
  for (int attempt = 0; attempt < 7; ++attempt) {
    const int64_t before = CuptiNow();
    const int64_t realtime = Ns(CLOCK_REALTIME);
    const int64_t monotonic = Ns(CLOCK_MONOTONIC);
    const int64_t after = CuptiNow();
    const int64_t width = after - before;
    if (width < 0) continue;
    if (best_width < 0 || width < best_width) {
      best_width = width;
      best.cupti_ns = before + width / 2;
      best.realtime_ns = realtime;
      best.monotonic_ns = monotonic;
    }
  }
  if (best_width < 0) {
    best.realtime_ns = Ns(CLOCK_REALTIME);
    best.monotonic_ns = Ns(CLOCK_MONOTONIC);
  }
  return best;
}

}  // namespace emo::runtime
