// ClockTrigger (include/emo/runtime/clock_trigger.h): a plan's switches placed at launch
// positions, fired in order ahead of their packs, skipped when redundant, abandoned for the
// default clock when the loop changes or the guard trips; and the schedule's text form.
#include "emo/runtime/clock_trigger.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace emo::runtime {
namespace {

// A loop of `n` launches per iteration, `step_ns` long, reported the way LaunchPeriodFinder
// does once locked: iteration i completes at the first launch of iteration i + 1. With
// `lock_after` > 1, the first that many iterations are reported together when the last of them
// completes, as the finder reports the iterations it verified when it takes its lock.
class Loop {
 public:
  Loop(ClockTrigger* trigger, uint32_t n, int64_t step_ns, int lock_after = 1)
      : trigger_(trigger), n_(n), step_ns_(step_ns), lock_after_(lock_after) {}
  void set_step_ns(int64_t ns) { step_ns_ = ns; }
  // The iteration's length from the clock the trigger holds when it starts (0: the default).
  void set_step_of_clock(std::function<int64_t(unsigned mhz)> f) { step_of_clock_ = std::move(f); }

  // Runs `iterations` iterations of `n` launches (n may differ from the plan's), locked or not.
  void Run(int iterations, uint32_t n, bool locked = true) {
    for (int i = 0; i < iterations; ++i) {
      for (uint32_t k = 0; k < n; ++k) {
        std::vector<LaunchIteration> done;
        if (k == 0 && have_previous_) {
          LaunchIteration it;
          it.first_launch = previous_first_;
          it.launches = static_cast<uint32_t>(position_ - previous_first_);
          it.start_ns = previous_start_;
          it.end_ns = time_;
          it.loop_index = loop_index_++;
          held_.push_back(it);
          if (static_cast<int>(loop_index_) >= lock_after_) done.swap(held_);
        }
        if (k == 0 && step_of_clock_) step_ns_ = step_of_clock_(trigger_->current_mhz());
        if (k == 0) {
          previous_first_ = position_;
          previous_start_ = time_;
          have_previous_ = true;
        }
        std::vector<ClockTrigger::Switch> out;
        trigger_->OnLaunch(position_, done, locked, &out);
        for (auto& s : out) switches.push_back(s);
        ++position_;
        time_ += step_ns_ / n;
      }
    }
  }
  uint64_t position() const { return position_; }

  std::vector<ClockTrigger::Switch> switches;

 private:
  ClockTrigger* trigger_;
  uint32_t n_;
  int64_t step_ns_;
  int lock_after_;
  std::vector<LaunchIteration> held_;
  std::function<int64_t(unsigned)> step_of_clock_;
  uint64_t position_ = 0;
  int64_t time_ = 0;
  bool have_previous_ = false;
  uint64_t previous_first_ = 0;
  int64_t previous_start_ = 0;
  uint64_t loop_index_ = 0;
};

ScheduleGpu TwoPacks() {
  ScheduleGpu g;
  g.calls_per_iteration = 10;
  g.deadline_ns = 10'000'000;
  g.gpu_name = "NVIDIA H200";
  g.packs = {{0, -2, 1200}, {5, 3, 1500}};
  return g;
}

// The plan predicts 10 ms per iteration at the default clocks and allows 2 % more.
ScheduleGpu GuardedPlan() {
  ScheduleGpu g = TwoPacks();
  g.baseline_ns = 10'000'000;
  g.deadline_ns = 10'200'000;
  return g;
}

TEST(ClockTriggerTest, EverySwitchOfThePlanFiresInOrderAheadOfItsPack) {
  ClockTrigger trigger(TwoPacks(), 0);
  Loop loop(&trigger, 10, 10'000'000);
  loop.Run(8, 10);
  const auto& s = loop.switches;
  // Iteration 0 completes at launch 10; from then on each iteration has its two switches.
  ASSERT_GE(s.size(), 12u);
  // The first one, for pack 0 of iteration 1, was due two launches before it was placed.
  EXPECT_STREQ(s[0].why, "pack");
  EXPECT_EQ(s[0].pack, 0);
  EXPECT_EQ(s[0].mhz, 1200u);
  EXPECT_EQ(s[0].position, 8u);
  EXPECT_EQ(s[0].late_by, 2u);
  EXPECT_EQ(s[0].iteration_start, 10u);
  for (size_t i = 1; i < s.size(); ++i) {
    // Alternating packs, each at its planned launch: pack 1 at call 3 of its iteration, pack 0
    // at call 8 (two before the next iteration's first call), never late, ahead of its pack.
    EXPECT_EQ(s[i].pack, static_cast<int>(i % 2)) << i;
    EXPECT_EQ(s[i].late_by, 0u) << i;
    const uint64_t iteration_start = static_cast<uint64_t>(s[i].iteration) * 10;
    EXPECT_EQ(s[i].iteration_start, iteration_start);  // the pack's iteration
    if (s[i].pack == 1) {
      EXPECT_EQ(s[i].mhz, 1500u);
      EXPECT_EQ(s[i].position, iteration_start + 3);
      EXPECT_LT(s[i].position, iteration_start + 5);  // ahead of the pack's first call
    } else {
      EXPECT_EQ(s[i].mhz, 1200u);
      EXPECT_EQ(s[i].position, iteration_start - 2);
    }
    EXPECT_GT(s[i].position, s[i - 1].position);
  }
  EXPECT_EQ(trigger.counters().late, 1u);
  EXPECT_EQ(trigger.counters().fallbacks, 0u);
  EXPECT_EQ(trigger.counters().switches, s.size());
}

// Packs switched on the GPU: each switch says so (the follower waits for the op launched at its
// position), except the first, placed after its launch was made: nothing behind it to wait for.
TEST(ClockTriggerTest, SwitchesOnTheGpuSaySoExceptOnePlacedTooLate) {
  ScheduleGpu g = TwoPacks();
  for (auto& p : g.packs) p.on_gpu = true;
  ClockTrigger trigger(g, 0);
  Loop loop(&trigger, 10, 10'000'000);
  loop.Run(6, 10);
  const auto& s = loop.switches;
  ASSERT_GE(s.size(), 8u);
  EXPECT_EQ(s[0].late_by, 2u);
  EXPECT_FALSE(s[0].on_gpu);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_TRUE(s[i].on_gpu) << i;
    EXPECT_EQ(s[i].late_by, 0u) << i;
  }
}

TEST(ClockTriggerTest, ASwitchToTheClockInEffectIsSkipped) {
  ScheduleGpu g = TwoPacks();
  g.packs = {{0, -1, 1400}};
  ClockTrigger trigger(g, 0);
  Loop loop(&trigger, 10, 1'000'000);
  loop.Run(6, 10);
  ASSERT_EQ(loop.switches.size(), 1u);
  EXPECT_EQ(loop.switches[0].mhz, 1400u);
  EXPECT_EQ(trigger.counters().redundant, 5u);  // iterations 2..6 asked again
  EXPECT_EQ(trigger.current_mhz(), 1400u);
}

TEST(ClockTriggerTest, ALoopThatStopsMatchingThePlanGoesBackToTheDefaultClockOnceAndResumes) {
  ClockTrigger trigger(TwoPacks(), 0);
  Loop loop(&trigger, 10, 1'000'000);
  loop.Run(4, 10);
  const size_t before = loop.switches.size();
  ASSERT_GT(before, 0u);
  loop.Run(5, 7);  // another loop (7 launches per iteration)
  // The last planned iteration completes at the new loop's first launch and may still place a
  // switch; the first iteration of 7 launches ends the following, with one reset.
  size_t fallback = before;
  while (fallback < loop.switches.size() && std::string(loop.switches[fallback].why) != "fallback") ++fallback;
  ASSERT_LT(fallback, loop.switches.size());
  EXPECT_LE(fallback, before + 1);
  EXPECT_EQ(loop.switches[fallback].mhz, 0u);
  EXPECT_EQ(loop.switches.size(), fallback + 1);  // then nothing while it runs
  EXPECT_EQ(trigger.counters().fallbacks, 1u);
  EXPECT_EQ(trigger.current_mhz(), 0u);
  loop.Run(4, 10);  // the plan's loop again
  ASSERT_GT(loop.switches.size(), fallback + 1);
  EXPECT_STREQ(loop.switches[fallback + 1].why, "pack");
  EXPECT_NE(loop.switches.back().mhz, 0u);
  EXPECT_EQ(trigger.counters().fallbacks, 1u);
}

TEST(ClockTriggerTest, ALostLockFallsBack) {
  ClockTrigger trigger(TwoPacks(), 0);
  Loop loop(&trigger, 10, 1'000'000);
  loop.Run(4, 10);
  loop.Run(1, 10, /*locked=*/false);
  ASSERT_FALSE(loop.switches.empty());
  const auto& last = loop.switches.back();
  EXPECT_EQ(last.mhz, 0u);
  EXPECT_STREQ(last.why, "fallback");
}

TEST(ClockTriggerTest, WithTheGuardOnThePlanStartsAfterFiveIterationsAtTheDefaultClock) {
  const ScheduleGpu g = GuardedPlan();
  ClockTrigger trigger(g, 5.0);
  Loop loop(&trigger, 10, 12'000'000, /*lock_after=*/3);
  loop.Run(8, 10);  // the finder's first report (iterations 0-2, at launch 30) is not timed
  EXPECT_TRUE(loop.switches.empty());
  loop.Run(2, 10);
  ASSERT_FALSE(loop.switches.empty());
  EXPECT_EQ(trigger.counters().guard_baseline_ns, 12'000'000);
  // Iterations 3-7 timed; the plan starts when the eighth completes (at launch 80).
  EXPECT_EQ(loop.switches.front().position, 78u);
  EXPECT_EQ(loop.switches.front().late_by, 2u);
}

// The plan allows 2 % over the predicted baseline; the guard allows 5 % more than that, against
// this run's own iterations at the default clock (here twice as slow as the traced run's).
TEST(ClockTriggerTest, TheGuardJudgesThePlanAgainstTheRunsOwnDefaultClock) {
  const ScheduleGpu g = GuardedPlan();
  for (const int64_t planned : {21'200'000, 21'600'000}) {  // +6 %: within 2 % + 5 %; +8 %: not
    ClockTrigger trigger(g, 5.0);
    Loop loop(&trigger, 10, 20'000'000, /*lock_after=*/5);
    loop.set_step_of_clock([planned](unsigned mhz) { return mhz == 0 ? 20'000'000 : planned; });
    loop.Run(45, 10);
    EXPECT_EQ(trigger.counters().guard_baseline_ns, 20'000'000) << planned;
    EXPECT_EQ(trigger.counters().guard_limit_ns, 21'420'000) << planned;
    if (planned < 21'420'000) {
      EXPECT_FALSE(trigger.counters().guard_tripped);
      EXPECT_EQ(trigger.counters().guard_checks, 0u);
      EXPECT_GE(trigger.counters().iterations_followed, 30u);
    } else {
      // 15 iterations fill the window, 3 in a row over the limit raise a suspicion, the default
      // clock timed again confirms it.
      EXPECT_TRUE(trigger.counters().guard_tripped);
      EXPECT_EQ(trigger.counters().guard_checks, 1u);
      EXPECT_EQ(trigger.counters().guard_median_ns, planned);
      EXPECT_EQ(trigger.counters().iterations_followed, 17u);
      EXPECT_STREQ(loop.switches.back().why, "guard check");  // the clock went back then
      EXPECT_EQ(trigger.current_mhz(), 0u);
      const size_t n = loop.switches.size();
      loop.Run(5, 10);
      EXPECT_EQ(loop.switches.size(), n);  // for good
    }
  }
}

// A program that changes pace by itself (here 20 % slower from iteration 30 on, whatever the
// clock) raises a suspicion, which the default clock's own pace then clears.
TEST(ClockTriggerTest, ASuspicionTheDefaultClockExplainsDoesNotTripTheGuard) {
  const ScheduleGpu g = GuardedPlan();
  ClockTrigger trigger(g, 5.0);
  Loop loop(&trigger, 10, 10'000'000, /*lock_after=*/5);
  loop.Run(30, 10);
  loop.set_step_ns(12'000'000);
  loop.Run(40, 10);
  EXPECT_FALSE(trigger.counters().guard_tripped);
  EXPECT_EQ(trigger.counters().guard_checks, 1u);
  EXPECT_EQ(trigger.counters().guard_baseline_ns, 12'000'000);
  EXPECT_NE(trigger.current_mhz(), 0u);  // following again
}

TEST(ClockTriggerTest, OneSlowStepDoesNotTripTheGuard) {
  ScheduleGpu g = TwoPacks();
  g.baseline_ns = 10'000'000;
  g.deadline_ns = 10'000'000;
  ClockTrigger trigger(g, 5.0);
  Loop loop(&trigger, 10, 10'000'000, /*lock_after=*/5);
  loop.Run(25, 10);
  loop.set_step_ns(40'000'000);  // three slow steps: a collection, a checkpoint
  loop.Run(3, 10);
  loop.set_step_ns(10'000'000);
  loop.Run(20, 10);
  EXPECT_FALSE(trigger.counters().guard_tripped);
}

// A decoder whose steps grow by themselves (0.1 % per step, +22 % over 200 steps) while the plan
// changes nothing: the default clock is re-timed every 50 followed steps, so the guard never
// blames the plan. Without the re-timing the limit (+7.1 %) is passed after ~70 steps.
TEST(ClockTriggerTest, AProgramThatSlowsByItselfIsReTimedNotBlamed) {
  const ScheduleGpu g = GuardedPlan();
  ClockTrigger trigger(g, 5.0);
  Loop loop(&trigger, 10, 10'000'000, /*lock_after=*/5);
  double step = 10'000'000;
  loop.set_step_of_clock([&step](unsigned) { return static_cast<int64_t>(step *= 1.001); });
  loop.Run(200, 10);
  EXPECT_FALSE(trigger.counters().guard_tripped);
  EXPECT_GE(trigger.counters().probes, 2u);
  EXPECT_GT(trigger.counters().guard_baseline_ns, 11'000'000);  // re-timed, not the first 10 ms
  size_t probes = 0;
  for (const auto& sw : loop.switches) probes += std::string(sw.why) == "probe";
  EXPECT_EQ(probes, trigger.counters().probes);
}

// A plan that really slows the loop by 10 % (the model was wrong) is caught after its first 17
// iterations under it and the check of the default clock's pace.
TEST(ClockTriggerTest, APlanThatSlowsTheLoopTripsTheGuard) {
  const ScheduleGpu g = GuardedPlan();
  ClockTrigger trigger(g, 5.0);
  Loop loop(&trigger, 10, 10'000'000, /*lock_after=*/5);
  loop.set_step_of_clock([](unsigned mhz) { return mhz == 0 ? 10'000'000 : 11'000'000; });
  loop.Run(60, 10);
  EXPECT_TRUE(trigger.counters().guard_tripped);
  EXPECT_EQ(trigger.counters().guard_baseline_ns, 10'000'000);
  EXPECT_EQ(trigger.counters().iterations_followed, 17u);
  EXPECT_EQ(trigger.current_mhz(), 0u);
}

TEST(ClockScheduleTest, TextRoundTripAndRankPick) {
  ClockSchedule s;
  s.actuator = "dry-run";
  s.log_path = "/tmp/x y.jsonl";
  s.policy = "p.json";
  s.guard_pct = 5;
  s.model = "h200 (devices/h200.json)";
  ScheduleGpu a = TwoPacks();
  a.rank = 0;
  a.plan_ns = 10'150'000;
  a.spins = {{2, 30'000}, {7, 5'000}};
  ScheduleGpu b = TwoPacks();
  b.rank = 1;
  b.device = 1;
  b.packs = {{0, -3, 990, /*on_gpu=*/true}};
  s.gpus = {a, b};
  ClockSchedule back;
  std::string error;
  ASSERT_TRUE(ParseClockSchedule(FormatClockSchedule(s), &back, &error)) << error;
  EXPECT_EQ(back.actuator, "dry-run");
  EXPECT_EQ(back.log_path, "/tmp/x y.jsonl");
  EXPECT_EQ(back.guard_pct, 5);
  ASSERT_EQ(back.gpus.size(), 2u);
  EXPECT_EQ(back.gpus[0].gpu_name, "NVIDIA H200");
  EXPECT_EQ(back.gpus[0].deadline_ns, 10'000'000);
  EXPECT_EQ(back.model, "h200 (devices/h200.json)");
  EXPECT_EQ(back.gpus[0].plan_ns, 10'150'000);
  ASSERT_EQ(back.gpus[0].spins.size(), 2u);
  EXPECT_EQ(back.gpus[0].spins[1].call, 7);
  EXPECT_EQ(back.gpus[0].spins[1].ns, 5'000);
  EXPECT_EQ(back.gpus[1].plan_ns, 0);
  EXPECT_TRUE(back.gpus[1].spins.empty());
  EXPECT_EQ(back.gpus[1].packs.size(), 1u);
  EXPECT_EQ(back.gpus[1].packs[0].switch_call, -3);
  EXPECT_EQ(back.gpus[1].packs[0].mhz, 990u);
  EXPECT_TRUE(back.gpus[1].packs[0].on_gpu);
  EXPECT_FALSE(back.gpus[0].packs[0].on_gpu);
  EXPECT_EQ(PickScheduleGpu(back, 1, 0), &back.gpus[1]);
  EXPECT_EQ(PickScheduleGpu(back, 7, 0), nullptr);
  EXPECT_EQ(PickScheduleGpu(back, -1, 0), nullptr);  // ranked entries need a rank
}

TEST(ClockScheduleTest, BrokenSchedulesAreRefusedWithTheLine) {
  ClockSchedule s;
  std::string error;
  EXPECT_FALSE(ParseClockSchedule("hello\n", &s, &error));
  EXPECT_NE(error.find("not an emo clock schedule"), std::string::npos);
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator nvml\npack 0 0 100\n", &s, &error));
  EXPECT_EQ(error, "line 3 of the clock schedule is not understood: pack 0 0 100");
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator nvml\ngpu 0 0 0 5 5 X\n", &s, &error));
  EXPECT_NE(error.find("line 3"), std::string::npos);
  // A spin outside the iteration's calls, or of no time.
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator emulate\ngpu 0 0 5 5 5 X\nspin 5 100\n", &s, &error));
  EXPECT_EQ(error, "line 4 of the clock schedule is not understood: spin 5 100");
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator emulate\ngpu 0 0 5 5 5 X\nspin 4 0\n", &s, &error));
  // A pack's last word is "gpu" or nothing.
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator nvml\ngpu 0 0 5 5 5 X\npack 0 1 900 cpu\n", &s, &error));
  EXPECT_EQ(error, "line 4 of the clock schedule is not understood: pack 0 1 900 cpu");
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator nvml\ngpu 0 0 5 5 5 X\npack 0 1 900 gpu 2\n", &s, &error));
  EXPECT_FALSE(ParseClockSchedule("emo-clock-schedule 1\nactuator nvml\n", &s, &error));
  EXPECT_EQ(error, "the clock schedule names no actuator or no GPU");
}

}  // namespace
}  // namespace emo::runtime
