// Which call of the plan's iteration an application launch is, once the plan is in force: the
// emulator's spins and the switch marks are both given per call of the iteration (the policy's
// launch calls), and both see the application's launches by their running number.
//
// Threads: Publish on the control thread, CallOf on the application's threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

namespace emo::runtime {

class PlanCalls {
 public:
  void SetCallsPerIteration(uint64_t calls) { calls_ = calls; }
  // The plan is in force from launch `from_seq` on (an iteration's first launch), or (`active`
  // false) not at all. True when this turned it on.
  bool Publish(bool active, uint64_t from_seq) {
    const uint64_t want = active ? from_seq : kOff;
    return from_seq_.exchange(want, std::memory_order_acq_rel) == kOff && want != kOff;
  }
  void Off() { from_seq_.store(kOff, std::memory_order_release); }
  // The call of the iteration launch `seq` is; -1 while the plan is not in force.
  int64_t CallOf(uint64_t seq) const {
    const uint64_t from = from_seq_.load(std::memory_order_acquire);
    if (from == kOff || seq < from || calls_ == 0) return -1;
    return static_cast<int64_t>((seq - from) % calls_);
  }

 private:
  static constexpr uint64_t kOff = std::numeric_limits<uint64_t>::max();
  uint64_t calls_ = 0;
  std::atomic<uint64_t> from_seq_{kOff};
};

}  // namespace emo::runtime
