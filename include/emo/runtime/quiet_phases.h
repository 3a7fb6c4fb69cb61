// Quiet phases: once a tracer has settled (its window traced, the loop followed without the
// launch callbacks), one stretch of its usual state ("engaged"), then one of CUPTI detached with
// the GPU thread paused ("quiet"), then CUPTI attached again to the end of the run ("after").
// A benchmark knob, off unless EMO_TRACE_QUIET_MS is set: it makes a mid-run detach and attach
// of `emo trace` on demand (bench/gpu/detach_stress.sh, detach_diag.sh). Pure: the tracer's
// control thread polls it with the time and the tracer's state and does what it returns.
//
// Once: CUPTI 13.0 aborted programs whose launch callbacks were switched between repeated
// detaches, so a tracer keeps them on after a detach and never settles again (docs/runtime.md,
// "Quiet phases").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace emo::runtime {

class QuietPhases {
 public:
  enum class Action { kNone, kDetach, kDetachAtAnyExit, kReattach };
  enum class Phase { kWaiting, kEngaged, kDetaching, kQuiet, kAfter };
  // A phase that began at `time_ns` (CLOCK_MONOTONIC).
  struct Mark {
    Phase phase = Phase::kWaiting;
    int64_t time_ns = 0;
  };

  // The engaged and the quiet phase each last `phase_ns` (> 0).
  explicit QuietPhases(int64_t phase_ns) : phase_ns_(phase_ns) {}

  // `now_ns`: CLOCK_MONOTONIC; `settled`: the tracer follows the loop without its launches and
  // has nothing left to flush; `detached`: CUPTI is detached, since `detached_at_ns` (the time the
  // program's thread detached it). Returns what the tracer is to do now: ask for a detach at the
  // exit of the next call that waits for the GPU (or, when none came for a phase, at any call's
  // exit), or attach again. Nothing once the quiet phase is over.
  Action Poll(int64_t now_ns, bool settled, bool detached, int64_t detached_at_ns);

  Phase phase() const { return phase_; }
  // Every phase begun so far, oldest first.
  const std::vector<Mark>& marks() const { return marks_; }
  // Number of quiet phases begun: 0 or 1.
  uint64_t quiet_phases() const;

 private:
  void Begin(Phase phase, int64_t time_ns);

  int64_t phase_ns_;
  Phase phase_ = Phase::kWaiting;
  int64_t since_ns_ = 0;
  bool asked_any_exit_ = false;
  std::vector<Mark> marks_;
};

// "engaged", "quiet", "after", "detaching" or "waiting".
const char* QuietPhaseName(QuietPhases::Phase phase);

// The marks as lines "<phase> <time_ns>\n", for EMO_TRACE_QUIET_LOG.
std::string QuietMarksText(const std::vector<QuietPhases::Mark>& marks);

}  // namespace emo::runtime
