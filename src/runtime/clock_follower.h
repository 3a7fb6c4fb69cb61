// The injection library's part of `emo run`: it reads the clock schedule `emo run` wrote
// (EMO_RUN_SCHEDULE), checks the process's GPU against the plan's, and carries out the switches
// ClockTrigger finds in the program's launches on a thread of its own, through an actuator. The
// clock it changed goes back to the default when the program exits normally; `emo run`'s
// watchdog covers every other ending (docs/actuators.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "driver_api.h"
#include "emulator.h"
#include "switch_marks.h"
#include "emo/runtime/actuator.h"
#include "emo/runtime/clock_trigger.h"

namespace emo::runtime {

inline constexpr const char* kRunScheduleEnv = "EMO_RUN_SCHEDULE";
inline constexpr const char* kRunJournalEnv = "EMO_RUN_JOURNAL";
// The pid of `emo run`: when it is gone, nothing would reset the clock the program leaves, so the
// plan is dropped and the clock reset at once.
inline constexpr const char* kRunPidEnv = "EMO_RUN_PID";

class ClockFollower {
 public:
  ClockFollower() = default;
  ClockFollower(const ClockFollower&) = delete;
  ClockFollower& operator=(const ClockFollower&) = delete;

  // Reads the schedule and makes its actuator; false with `error` when either fails.
  bool Load(const std::string& schedule_path, std::string* error);
  // Starts the switching thread.
  void Start(const DriverApi* driver);
  // A CUDA device the process uses; the first one is the GPU the plan is followed on. Any thread.
  void OnDevice(uint32_t ordinal);
  // Control thread: the launch at `position` and the iterations it completed (LaunchPeriodFinder);
  // `seq` is the same launch's number as the application thread counted it (Emulator).
  void OnLaunch(uint64_t position, uint64_t seq, int64_t time_ns, const std::vector<LaunchIteration>& completed,
                bool locked);
  // Anchored following (the tracer's launch callbacks off, iterations timed by a host call the loop
  // makes a fixed number of times: AnchorFollower). Only for a plan that needs no launch after its
  // first lock: every GPU's packs at one clock, nothing to emulate. Fixed by Load.
  bool may_follow_by_anchor() const { return may_follow_by_anchor_; }
  // Control thread: whether the launch callbacks may go off now (the plan's clock asked for and in
  // force; the guard not timing the default clock).
  bool SettledForAnchor() const;
  // Control thread: an iteration between anchor calls, while the launch callbacks are off. It
  // stands for the plan's calls per iteration: the guard times it, a probe or the plan's lock is
  // made at once at its end.
  void OnAnchoredIteration(int64_t start_ns, int64_t end_ns);
  // Control thread: the tracer gave the anchor up; its launch positions start again from 0.
  void OnAnchorLost();
  // Whether the launch-exit callbacks hand each launch to AfterLaunch (emulate, or switches on the
  // GPU); fixed by Load, before the callbacks start.
  bool wants_launch_exits() const { return emulator_ != nullptr || marks_ != nullptr; }
  // Application thread, once launch `seq` returned (its stream as Emulator::AfterLaunch takes it):
  // the emulator's spin and the switch mark behind it, in that order.
  void AfterLaunch(uint64_t seq, void* stream, bool stream_known);
  // Stops the thread and puts the clock back if it was changed. Returns meta lines
  // ("run.<key>=<value>\n") for the trace.
  std::string Stop();

 private:
  void Run();
  // OnLaunch in this follower's positions (which go on across the tracer's finders).
  void Follow(uint64_t position, uint64_t seq, int64_t time_ns, const std::vector<LaunchIteration>& completed,
              bool locked, bool at_once);
  // Switching thread: identifies the GPU, checks it against the plan, opens the actuator.
  bool Attach(uint32_t ordinal);
  void Apply(const ClockTrigger::Switch& s);
  void Journal(const std::string& pci_bus_id);
  // Switching thread: the open plan span ends at `now` (a reset was applied).
  void CloseSpan(int64_t now);
  static constexpr size_t kMaxPlanSpans = 4096;
  // Switching thread: drops the plan and resets the clock when `emo run` is gone.
  void CheckEmo();

  ClockSchedule schedule_;
  std::string schedule_path_;
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<Emulator> emulator_;
  std::unique_ptr<SwitchMarks> marks_;  // when a pack switches on the GPU (SwitchMarks::Wanted)
  bool marks_usable_ = false;           // switching thread's: Configure succeeded
  // Set with a switch to make at once (or at Stop): the switching thread stops waiting for the
  // GPU's progress. Written under mutex_.
  std::atomic<bool> interrupt_{false};
  const DriverApi* driver_ = nullptr;
  int rank_ = -1;
  int emo_pid_ = 0;  // 0: not watched

  const ScheduleGpu* plan_ = nullptr;    // the schedule's entry for this GPU (set with trigger_)
  std::optional<ClockTrigger> trigger_;  // set by the switching thread before `ready_`
  std::atomic<bool> ready_{false};
  std::atomic<bool> no_plan_{false};  // no plan fits this process (said at its first launch)
  bool told_no_plan_ = false;         // control thread's
  std::vector<ClockTrigger::Switch> due_;  // control thread's scratch

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::optional<uint32_t> device_;  // the first device seen
  bool attached_ = false;           // the switching thread looked at the device
  std::deque<ClockTrigger::Switch> queue_;
  std::thread thread_;

  // Switching thread's state (read by Stop after the join).
  int slot_ = -1;
  ActuatorGpu gpu_;
  std::string refused_;       // why the plan is not followed on this GPU
  std::string last_error_;
  uint64_t applied_ = 0, failed_ = 0, coalesced_ = 0;
  unsigned applied_mhz_ = 0;  // 0: default
  int64_t plan_stopped_ns_ = -1;  // of the reset that ended the plan for good (guard, error, emo gone)
  int64_t last_reset_ns_ = -1;    // of the latest reset applied
  // Spans (CUPTI ns) from a lock applied at the default clock to the next reset: the plan's
  // clocks in force; the end is -1 while open; the first starts at the first lock applied.
  // Bounded: a run that flaps keeps the first ones.
  std::vector<std::pair<int64_t, int64_t>> plan_spans_;
  // Each pack switch asked for (the first kMaxSwitchTimes), for `emo run` to set against its
  // pack's start on the GPU where the run traced a window: when its lock took effect (switching
  // thread; -1: coalesced into a later one) and when the pack's iteration began (its first
  // launch's time; control thread; -1: not seen). Guarded by mutex_.
  struct SwitchTime {
    int pack = -1;
    uint64_t iteration_start = 0;  // position of that launch
    int64_t applied_ns = -1;
    int64_t iteration_start_ns = -1;
  };
  std::vector<SwitchTime> switch_times_;
  static constexpr size_t kMaxSwitchTimes = 4096;
  // Control thread's: switch times whose iteration has not begun yet, and the times of the
  // latest launches by position (a switch asked for during its pack's iteration looks back).
  std::vector<uint32_t> awaiting_;
  static constexpr uint64_t kLaunchTimesKept = 4096;
  std::vector<int64_t> launch_times_ = std::vector<int64_t>(kLaunchTimesKept, -1);
  // Control thread's, for anchored following: the launch position the tracer's current finder
  // counts from, the next position not yet followed, and the anchored iterations made up.
  bool may_follow_by_anchor_ = false;
  uint64_t position_base_ = 0;
  uint64_t next_position_ = 0;
  uint64_t next_loop_index_ = 0;
  uint64_t anchored_iterations_ = 0;
  uint64_t anchors_lost_ = 0;
  std::vector<LaunchIteration> shifted_;  // scratch
  bool journaled_ = false;
  bool stopped_ = false;
};

}  // namespace emo::runtime
