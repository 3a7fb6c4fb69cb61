// When the injection library's CUPTI activities are on: the tracing window over the detected
// iterations. Pure (no CUDA), driven by the iteration starts the tracer finds.
//
// In trace mode activities are on from the start ("pretrace"), so a program whose iterations
// are never found is traced until it exits. When the first loop is found they go off until
// its iteration `warmup - 1` starts, a lead-in iteration that absorbs the delay between a
// launch and the tracer seeing it; iterations [warmup, warmup + iterations) of the loop are
// the window, then activities go off for good. A loop found while pretrace is still on may
// already be past its warmup: the window then starts at its iteration `warmup`, which pretrace
// recorded.
//
// Loops found early can be sub-loops (the layers of a first forward and backward pass, an
// initialisation loop) that the real iteration later supersedes, so a window is taken again,
// up to `max_windows` times, when a loop with a longer period appears after one, or when the
// loop changes while a window is open. Windows on sub-loops are a few short iterations each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace emo::runtime {

class TraceWindow {
 public:
  enum class Action { kNone, kEnable, kDisable };

  // One window: iterations [first, end) were traced; `complete` when all `iterations` of them
  // were, false when the loop changed first.
  struct Window {
    uint64_t first = 0;
    uint64_t end = 0;
    uint64_t loop = 0;
    bool complete = false;
  };

  // `pretrace`: activities are on from the start (trace mode).
  TraceWindow(int64_t warmup, int64_t iterations, bool pretrace, int max_windows = 8);

  // Iteration `index` (0-based over the run) starts; it is iteration `loop_index` of loop
  // `loop`, whose iterations have `period` launches (longer loops supersede shorter ones).
  // Returns what to do with the activities now.
  Action OnIterationStart(uint64_t index, uint64_t loop, uint64_t loop_index, uint64_t period);

  // True when iteration `index` lies inside a window (activities were on all through it).
  bool Traced(uint64_t index) const;
  // True while activities should be on.
  bool enabled() const { return enabled_; }
  // True while a window is open: its iterations have begun and not all have been seen.
  bool open() const { return state_ == State::kOpen; }
  // The windows taken so far, oldest first; the last one is open while enabled() and its
  // iterations are not all done.
  const std::vector<Window>& windows() const { return windows_; }

 private:
  enum class State { kPretrace, kArmed, kOpen, kDone };
  Action Set(bool on);

  int64_t warmup_;
  int64_t iterations_;
  int max_windows_;
  State state_;
  bool enabled_;
  bool have_loop_ = false;
  uint64_t loop_ = 0;
  uint64_t window_period_ = 0;
  std::vector<Window> windows_;
};

// The part of an NVTX range name that stays the same from one iteration to the next: every run
// of digits becomes "N" ("ProfilerStep#12" → "ProfilerStep#N"). The first name matching the
// iteration regex fixes the key; only ranges with that key start iterations.
std::string NvtxIterationKey(std::string_view name);

}  // namespace emo::runtime
