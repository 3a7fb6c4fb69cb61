// Quiet phases: a settled tracer (its window traced, the loop followed without the launch
// callbacks) alternates in one run between its usual state ("engaged") and CUPTI detached with
// the GPU thread paused ("quiet"), so that the program's own step times, taken in neighbouring
// phases of the same run, measure what the tracer costs it without comparing fresh processes
// (whose pace differs by ±20 %; BENCHMARKS.md, Order 7). A benchmark knob, off unless
// EMO_TRACE_QUIET_MS is set (bench/gpu/overhead_quiet.sh). Pure: the tracer's control thread
// polls it with the time and the tracer's state and does what it returns.
//
// After a quiet phase CUPTI is attached again and the loop is found afresh (launch callbacks on
// until the anchor call is chosen again): that stretch ("relearn") is neither phase, and the
// next engaged phase begins once the tracer has settled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace emo::runtime {

class QuietPhases {
 public:
  enum class Action { kNone, kDetach, kDetachAtAnyExit, kReattach };
  enum class Phase { kWaiting, kEngaged, kDetaching, kQuiet, kRelearn };
  // A phase that began at `time_ns` (CLOCK_MONOTONIC).
  struct Mark {
    Phase phase = Phase::kWaiting;
    int64_t time_ns = 0;
  };

  // Each engaged and each quiet phase lasts `phase_ns` (> 0).
  explicit QuietPhases(int64_t phase_ns) : phase_ns_(phase_ns) {}

  // `now_ns`: CLOCK_MONOTONIC; `settled`: the tracer follows the loop without its launches and
  // has nothing left to flush; `detached`: CUPTI is detached, since `detached_at_ns` (the time the
  // program's thread detached it). Returns what the tracer is to do now: ask for a detach at the
  // exit of the next call that waits for the GPU (or, when none came for a phase, at any call's
  // exit), or attach again.
  Action Poll(int64_t now_ns, bool settled, bool detached, int64_t detached_at_ns);

  Phase phase() const { return phase_; }
  // Every phase begun so far, oldest first.
  const std::vector<Mark>& marks() const { return marks_; }
  // Number of quiet phases begun.
  uint64_t quiet_phases() const;

 private:
  void Begin(Phase phase, int64_t time_ns);

  int64_t phase_ns_;
  Phase phase_ = Phase::kWaiting;
  int64_t since_ns_ = 0;
  bool asked_any_exit_ = false;
  std::vector<Mark> marks_;
};

// "engaged", "quiet", "relearn", "detaching" or "waiting".
const char* QuietPhaseName(QuietPhases::Phase phase);

// The marks as lines "<phase> <time_ns>\n", for EMO_TRACE_QUIET_LOG.
std::string QuietMarksText(const std::vector<QuietPhases::Mark>& marks);

}  // namespace emo::runtime
