// A bounded lock-free queue from many producers (the application threads that launch kernels
// and make anchor calls) to one consumer (the tracer's control thread): Vyukov's bounded MPMC
// queue with a single consumer. A producer never blocks and never allocates; when the ring is
// full the event is counted as dropped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace emo::runtime {

struct LaunchEvent {
  uint64_t signature = 0;
  int64_t time_ns = 0;
  // 0 for a kernel or graph launch; for an anchor call (a host sync or copy, see
  // anchor_finder.h) its CUPTI domain << 24 | callback id, and for a copy its size.
  uint32_t anchor = 0;
  uint32_t bytes = 0;
  // The launch's number in the application's own count (`emo run` only; Emulator).
  uint64_t seq = 0;
};

class LaunchRing {
 public:
  // `capacity_log2`: the ring holds 2^capacity_log2 launches.
  explicit LaunchRing(uint32_t capacity_log2) : mask_((size_t{1} << capacity_log2) - 1), slots_(new Slot[mask_ + 1]) {
    for (size_t i = 0; i <= mask_; ++i) slots_[i].sequence.store(i, std::memory_order_relaxed);
  }

  // Adds one launch; false (and counted) when the ring is full. Safe from any thread.
  bool TryPush(const LaunchEvent& event) {
    size_t pos = enqueue_.load(std::memory_order_relaxed);
    while (true) {
      Slot& slot = slots_[pos & mask_];
      const size_t sequence = slot.sequence.load(std::memory_order_acquire);
      const auto diff = static_cast<intptr_t>(sequence) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (enqueue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          slot.event = event;
          slot.sequence.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      } else {
        pos = enqueue_.load(std::memory_order_relaxed);
      }
    }
  }

  // Takes the oldest launch; false when none is ready. Only one thread may call it.
  bool TryPop(LaunchEvent* event) {
    Slot& slot = slots_[dequeue_ & mask_];
    const size_t sequence = slot.sequence.load(std::memory_order_acquire);
    if (static_cast<intptr_t>(sequence) - static_cast<intptr_t>(dequeue_ + 1) < 0) return false;
    *event = slot.event;
    slot.sequence.store(dequeue_ + mask_ + 1, std::memory_order_release);
    ++dequeue_;
    return true;
  }

  // Launches lost because the ring was full.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::atomic<size_t> sequence{0};
    LaunchEvent event;
  };

  const size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<size_t> enqueue_{0};
  alignas(64) size_t dequeue_ = 0;
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace emo::runtime
