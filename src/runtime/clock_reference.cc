#include "clock_reference.h"

#include <cupti.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace emo::runtime {
namespace {

int64_t Ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The gate (BeginCuptiDetach). Sequentially consistent on both sides: a caller counts itself in,
// then looks at the state; the detaching thread sets the state, then waits for the count.
enum class GateState { kOpen, kDetaching, kDetached, kAttaching };
std::atomic<GateState> g_gate{GateState::kOpen};
std::atomic<int> g_in_flight{0};
// A cuptiFinalize has run in this process (CuptiDetachedBefore).
std::atomic<bool> g_detached_before{false};
// CUPTI's clock minus CLOCK_MONOTONIC, read as the last detach began.
std::atomic<int64_t> g_monotonic_to_cupti{0};

int64_t ReadCuptiClock() {
  uint64_t t = 0;
  return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? static_cast<int64_t>(t) : 0;
}

}  // namespace

int64_t MonotonicNow() { return Ns(CLOCK_MONOTONIC); }

int64_t CuptiNow() {
  if (g_gate.load() == GateState::kOpen) {
    g_in_flight.fetch_add(1);
    if (g_gate.load() == GateState::kOpen) {
      const int64_t t = ReadCuptiClock();
      g_in_flight.fetch_sub(1);
      return t;
    }
    g_in_flight.fetch_sub(1);
  }
  return MonotonicNow() + g_monotonic_to_cupti.load(std::memory_order_relaxed);
}

bool BeginCuptiDetach(int64_t patience_ns) {
  // Read while the gate is open: this thread's own call, none in flight for it to wait on.
  const int64_t cupti = ReadCuptiClock();
  const int64_t monotonic = MonotonicNow();
  if (cupti != 0) g_monotonic_to_cupti.store(cupti - monotonic, std::memory_order_relaxed);
  g_gate.store(GateState::kDetaching);
  const int64_t give_up_at = monotonic + patience_ns;
  while (g_in_flight.load() != 0) {
    if (MonotonicNow() > give_up_at) {
      g_gate.store(GateState::kOpen);
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

void EndCuptiDetach() {
  g_detached_before.store(true);
  g_gate.store(GateState::kDetached);
}

bool CuptiDetachedBefore() { return g_detached_before.load(); }

void BeginCuptiAttach() {
  g_gate.store(GateState::kAttaching);
  // The calls in flight are short (a clock read, a buffer's decoding) and wait on nothing of the
  // caller's: no patience needed.
  while (g_in_flight.load() != 0) std::this_thread::yield();
}

void EndCuptiAttach() { g_gate.store(GateState::kOpen); }

void OpenCuptiGate() {
  BeginCuptiAttach();
  EndCuptiAttach();
}

CuptiUse::CuptiUse() {
  while (true) {
    g_in_flight.fetch_add(1);
    if (const GateState state = g_gate.load(); state != GateState::kDetaching && state != GateState::kAttaching) return;
    g_in_flight.fetch_sub(1);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

CuptiUse::~CuptiUse() { g_in_flight.fetch_sub(1); }

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
