// Following a clock policy inside the program (`emo run`): the schedule `emo run` hands the
// injection library, and the pure logic that turns the program's launch calls and iterations
// into clock switches. No CUDA, no threads: the tracer's control thread feeds it and an
// actuator carries the switches out (src/runtime/tracer_run.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emo/runtime/launch_period_finder.h"

namespace emo::runtime {

// One GPU's plan in launch-call terms (policy::RunGpu, as `emo run` writes it).
struct ScheduleGpu {
  int rank = -1;
  int device = 0;
  std::string gpu_name;
  uint32_t calls_per_iteration = 0;
  int64_t deadline_ns = 0;  // the plan's latency target per iteration (predicted)
  int64_t baseline_ns = 0;  // the plan's predicted iteration at the default clocks
  int64_t plan_ns = 0;      // the plan's predicted iteration (0: not given)
  struct Pack {
    int64_t first_call = 0;
    int64_t switch_call = 0;
    unsigned mhz = 0;
    // The switch waits, after the switch_call-th launch, until the op it launched has completed
    // on the GPU (the policy's gpu_switch_call), rather than being made at once.
    bool on_gpu = false;
  };
  std::vector<Pack> packs;
  // `emulate`: GPU time added after launch calls of the iteration (policy::RunGpu::spins).
  struct Spin {
    int64_t call = 0;
    int64_t ns = 0;
  };
  std::vector<Spin> spins;
};

struct ClockSchedule {
  std::string actuator;   // "nvml", "zeusd", "dry-run", "emulate"
  std::string log_path;   // dry-run / emulate switch log, "" = stderr
  std::string policy;     // the policy file, for messages
  std::string model;      // the device model the plan was made with ("h200 (file)"), for reports
  // Back to the default clock for good when iterations under the plan run longer than the plan
  // allows (deadline / baseline, applied to this run's own iterations before the plan) by more
  // than this, %; 0 = off.
  double guard_pct = 0;
  std::vector<ScheduleGpu> gpus;
};

// The schedule as text (`emo run` writes it to a file named by EMO_RUN_SCHEDULE) and back.
std::string FormatClockSchedule(const ClockSchedule& s);
bool ParseClockSchedule(const std::string& text, ClockSchedule* out, std::string* error);

// The entry a process follows: its rank's when the schedule names ranks, else the one for its
// CUDA device, else the only one; nullptr when none fits.
const ScheduleGpu* PickScheduleGpu(const ClockSchedule& s, int rank, int device);

// Turns launches into switches for one GPU. Switches for an iteration are placed when the
// previous one completes (the period finder reports it at the iteration's first launch), at
// launch positions; a launch at or past a switch's position fires it. It follows only while
// the finder's period equals the plan's calls per iteration; otherwise it asks once for the
// default clock and waits for the loop to come back.
//
// The guard measures rather than trusts the prediction: with it on, the plan starts only after
// 5 iterations of the planned loop were timed at the default clock in this run (the finder's
// first report usually holds them): their median is the run's own baseline. Then the median of
// the latest 15 iterations run wholly under the plan may exceed that baseline by the plan's
// allowed slowdown (deadline / predicted baseline) plus guard_pct. When it stays over for 3
// iterations in a row, the default clock is timed again at once: only if the plan's median is
// still over the limit against that fresh baseline does the guard trip, and the default clock
// stays for the rest of the run. Every 50 followed iterations the default clock is timed again
// anyway (a reset, the iteration in progress let pass, 5 timed), so a program whose own pace
// drifts or changes phase is not taken for a slow plan.
class ClockTrigger {
 public:
  struct Switch {
    unsigned mhz = 0;        // 0: back to the default clock
    int pack = -1;
    int64_t iteration = -1;  // loop_index of the iteration the pack belongs to
    const char* why = "";    // "pack", "fallback", "guard"
    uint64_t position = 0;   // the launch it was due at
    uint64_t late_by = 0;    // launches between its position and the one that fired it
    // A pack's switch: the first launch of the iteration the pack belongs to.
    uint64_t iteration_start = 0;
    uint32_t tag = 0;  // the caller's (ClockFollower: its switch-time record + 1)
    bool on_gpu = false;  // to be made once the launch at `position` has completed on the GPU
    uint64_t seq = 0;     // the caller's (ClockFollower: the application's number of that launch)
  };
  struct Counters {
    uint64_t switches = 0;         // asked for (locks and resets)
    uint64_t redundant = 0;        // skipped: the clock asked for was already in effect
    uint64_t late = 0;             // fired after their position (placed too late to be ahead)
    uint64_t fallbacks = 0;        // times the launch sequence stopped matching the plan
    uint64_t iterations_followed = 0;  // completed wholly under the plan
    bool guard_tripped = false;
    int64_t guard_baseline_ns = 0;     // this run's iteration at the default clock (0: none)
    int64_t guard_limit_ns = 0;        // the median the guard allows
    int64_t guard_median_ns = 0;       // the median that tripped it
    uint64_t probes = 0;               // re-timings of the default clock during the run
    uint64_t guard_checks = 0;         // of which to check a suspicion
  };

  ClockTrigger(const ScheduleGpu& gpu, double guard_pct);

  // The launch at `position` (0-based in the whole sequence), after the finder saw it: the
  // iterations it completed (in order), and whether the finder holds a lock. Appends the
  // switches due now to `out`, in order.
  void OnLaunch(uint64_t position, const std::vector<LaunchIteration>& completed, bool locked,
                std::vector<Switch>* out);

  unsigned current_mhz() const { return current_mhz_; }
  // Whether the plan governs the iterations from launch plan_from() on (following, not timing
  // the default clock, not tripped): where `emulate` adds the plan's slowdown.
  bool plan_in_force() const { return following_ && !timing_ && placed_any_ && !counters_.guard_tripped; }
  uint64_t plan_from() const { return plan_from_; }
  const Counters& counters() const { return counters_; }

 private:
  struct Pending {
    uint64_t position;
    unsigned mhz;
    int pack;
    int64_t iteration;
    uint64_t iteration_start;
    bool on_gpu;
  };
  void Ask(unsigned mhz, int pack, int64_t iteration, const char* why, uint64_t position, uint64_t now,
           std::vector<Switch>* out, uint64_t iteration_start = 0, bool on_gpu = false);
  void Fallback(uint64_t now, const char* why, std::vector<Switch>* out);
  void Place(const LaunchIteration& done);
  // Whether the iterations under the plan, `it` the latest, look too slow: then the default
  // clock is timed again, and the guard trips only if they are too slow against that.
  bool GuardSuspects(const LaunchIteration& it);
  double GuardLimit() const;

  ScheduleGpu gpu_;
  double guard_pct_ = 0;
  bool following_ = false;
  unsigned current_mhz_ = 0;   // 0: default
  uint64_t placed_from_ = 0;   // first launch of the latest iteration whose switches are placed
  bool placed_any_ = false;
  bool timing_ = false;        // the guard is timing the default clock (the plan waits)
  uint64_t timing_from_ = 0;   // iterations starting before this launch are not timed
  int64_t suspect_ns_ = 0;     // the plan's median the running timing is to judge (0: none)
  std::vector<int64_t> baseline_samples_;
  uint64_t since_probe_ = 0;   // followed iterations since the default clock was last timed
  int over_ = 0;               // consecutive guard checks over the limit
  uint64_t plan_from_ = 0;     // first launch of the first iteration placed since following began
  std::vector<Pending> pending_;  // by position
  std::vector<int64_t> recent_ns_;  // durations of the latest followed iterations, for the guard
  Counters counters_;
};

}  // namespace emo::runtime
