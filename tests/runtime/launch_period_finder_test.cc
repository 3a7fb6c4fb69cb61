// LaunchPeriodFinder on synthetic launch sequences: signatures are small integers, times are
// made up (no clock is read), so nothing here depends on how fast the test runs.
#include "emo/runtime/launch_period_finder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace emo::runtime {
namespace {

constexpr int64_t kUs = 1000;

// Feeds launches and keeps every iteration the finder reports.
class Feeder {
 public:
  explicit Feeder(LaunchPeriodFinder::Options options = {}) : finder_(options) {}

  // One launch `gap_ns` after the previous one.
  void Launch(uint64_t signature, int64_t gap_ns) {
    time_ += gap_ns;
    const size_t before = iterations_.size();
    finder_.Add(signature, time_, &iterations_);
    if (waited_ && finder_.settled()) {
      for (size_t i = before; i < iterations_.size(); ++i) settled_launches_.push_back(iterations_[i].launches);
    }
  }
  // The sequence once; the first launch after `top_gap`, the others after `gap`.
  void Loop(const std::vector<uint64_t>& body, int64_t top_gap = 5000 * kUs, int64_t gap = 20 * kUs) {
    for (size_t i = 0; i < body.size(); ++i) Launch(body[i], i == 0 ? top_gap : gap);
  }

  // `steps` repetitions of `body`, 3 ms before each one's first launch and 20 us before the
  // others; `waits(step, k)` reports the host waits made before launch k of that step.
  void Steps(const std::vector<uint64_t>& body, int steps, const std::function<void(int, size_t)>& waits) {
    for (int step = 0; step < steps; ++step) {
      for (size_t k = 0; k < body.size(); ++k) {
        waits(step, k);
        Launch(body[k], k == 0 ? 3000 * kUs : 20 * kUs);
      }
    }
  }
  // A host wait for the GPU before the next launch.
  void Wait(uint64_t call) {
    finder_.AddWait(call);
    waited_ = true;
  }

  LaunchPeriodFinder& finder() { return finder_; }
  const std::vector<LaunchIteration>& iterations() const { return iterations_; }
  // Launches per iteration of those reported while the finder was settled, from the first wait
  // on (before it nothing can tell a block from a step).
  const std::vector<uint32_t>& settled_launches() const { return settled_launches_; }

 private:
  LaunchPeriodFinder finder_;
  std::vector<LaunchIteration> iterations_;
  std::vector<uint32_t> settled_launches_;
  bool waited_ = false;
  int64_t time_ = 0;
};

// Every reported iteration has a positive length; one that ends where the next reported one
// starts (in launches) ends at that one's start time too.
void ExpectContiguous(const std::vector<LaunchIteration>& its) {
  for (size_t i = 0; i < its.size(); ++i) {
    EXPECT_LT(its[i].start_ns, its[i].end_ns) << i;
    if (i + 1 < its.size() && its[i].first_launch + its[i].launches == its[i + 1].first_launch) {
      EXPECT_EQ(its[i].end_ns, its[i + 1].start_ns) << i;
    }
  }
}

// Reported iterations never overlap, even across loops.
void ExpectDisjoint(const std::vector<LaunchIteration>& its) {
  for (size_t i = 1; i < its.size(); ++i) {
    EXPECT_LE(its[i - 1].first_launch + its[i - 1].launches, its[i].first_launch) << i;
  }
}

TEST(LaunchPeriodFinderTest, ExactPeriodStartsAtTheLoopTop) {
  Feeder f;
  const std::vector<uint64_t> body = {10, 11, 12, 13, 14};
  for (int rep = 0; rep < 12; ++rep) f.Loop(body);
  EXPECT_TRUE(f.finder().locked());
  EXPECT_EQ(f.finder().period(), 5u);
  EXPECT_EQ(f.finder().loops(), 1u);
  EXPECT_EQ(f.finder().lost(), 0u);
  const auto& its = f.iterations();
  // Twelve repetitions make eleven whole iterations: the last one has not ended.
  ASSERT_EQ(its.size(), 11u);
  for (size_t i = 0; i < its.size(); ++i) {
    EXPECT_EQ(its[i].launches, 5u);
    EXPECT_EQ(its[i].first_launch, 5 * i);
    EXPECT_EQ(its[i].loop, 1u);
    EXPECT_EQ(its[i].loop_index, i);
  }
  ExpectContiguous(its);
}

TEST(LaunchPeriodFinderTest, PhaseFollowsTheLargestGap) {
  // The host waits before the third launch of the body (a sync in the middle of the code
  // order): that launch is the loop top.
  Feeder f;
  const std::vector<uint64_t> body = {10, 11, 12, 13, 14, 15};
  for (int rep = 0; rep < 10; ++rep) {
    for (size_t i = 0; i < body.size(); ++i) f.Launch(body[i], i == 2 ? 8000 * kUs : 30 * kUs);
  }
  ASSERT_FALSE(f.iterations().empty());
  for (const LaunchIteration& it : f.iterations()) {
    EXPECT_EQ(it.first_launch % 6, 2u);
    EXPECT_EQ(it.launches, 6u);
  }
  ExpectContiguous(f.iterations());
}

TEST(LaunchPeriodFinderTest, OneSubstitutedLaunchKeepsTheLock) {
  Feeder f;
  std::vector<uint64_t> body = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<uint64_t> b = body;
    if (rep == 10) b[3] = 99;  // e.g. another algorithm chosen once
    f.Loop(b);
  }
  EXPECT_EQ(f.finder().lost(), 0u);
  EXPECT_EQ(f.finder().loops(), 1u);
  ASSERT_EQ(f.iterations().size(), 19u);
  for (const LaunchIteration& it : f.iterations()) EXPECT_EQ(it.launches, 8u);
  ExpectContiguous(f.iterations());
}

TEST(LaunchPeriodFinderTest, InsertedLaunchesDropAndRetakeTheSameLoop) {
  Feeder f;
  const std::vector<uint64_t> body = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int rep = 0; rep < 30; ++rep) {
    std::vector<uint64_t> b = body;
    if (rep == 10) b.insert(b.begin() + 4, {90, 91, 92, 93});  // e.g. a logging step
    f.Loop(b);
  }
  EXPECT_EQ(f.finder().lost(), 1u);
  EXPECT_EQ(f.finder().loops(), 1u);  // the same launches again: the same loop
  EXPECT_TRUE(f.finder().locked());
  const auto& its = f.iterations();
  // The odd iteration is not reported; the lock is retaken within three repetitions and the
  // iterations it verified are reported then.
  EXPECT_GE(its.size(), 26u);
  EXPECT_LE(its.size(), 28u);
  for (const LaunchIteration& it : its) {
    EXPECT_EQ(it.launches, 8u);
    EXPECT_EQ(it.loop, 1u);
  }
  // Indices stay consecutive within the loop; launches skip only the odd iteration.
  size_t gaps = 0;
  for (size_t i = 1; i < its.size(); ++i) {
    EXPECT_EQ(its[i].loop_index, its[i - 1].loop_index + 1);
    EXPECT_GT(its[i].first_launch, its[i - 1].first_launch);
    if (its[i - 1].first_launch + its[i - 1].launches != its[i].first_launch) ++gaps;
  }
  EXPECT_EQ(gaps, 1u);
  ExpectContiguous(its);
}

TEST(LaunchPeriodFinderTest, WarmupPrefixIsNotAnIteration) {
  Feeder f;
  // Start-up launches that never repeat (allocation, cuDNN autotuning, ...).
  for (uint64_t s = 1000; s < 1037; ++s) f.Launch(s, 50 * kUs);
  const std::vector<uint64_t> body = {1, 2, 3, 4, 5, 6, 7};
  for (int rep = 0; rep < 10; ++rep) f.Loop(body);
  EXPECT_EQ(f.finder().loops(), 1u);
  ASSERT_EQ(f.iterations().size(), 9u);
  for (size_t i = 0; i < f.iterations().size(); ++i) {
    EXPECT_EQ(f.iterations()[i].launches, 7u);
    EXPECT_EQ(f.iterations()[i].first_launch, 37 + 7 * i);
  }
}

TEST(LaunchPeriodFinderTest, RepeatedHalvesWithOneLoopTopMakeOneIteration) {
  // A B A B ...: the signatures repeat every 2 launches, but the host waits only before every
  // other A (two identical micro-batches per step): the iteration is 4 launches.
  Feeder f;
  for (int rep = 0; rep < 12; ++rep) {
    f.Launch(1, 9000 * kUs);
    f.Launch(2, 40 * kUs);
    f.Launch(1, 300 * kUs);
    f.Launch(2, 40 * kUs);
  }
  EXPECT_EQ(f.finder().period(), 4u);
  ASSERT_FALSE(f.iterations().empty());
  for (const LaunchIteration& it : f.iterations()) {
    EXPECT_EQ(it.launches, 4u);
    EXPECT_EQ(it.first_launch % 4, 0u);
  }
  ExpectContiguous(f.iterations());
}

TEST(LaunchPeriodFinderTest, RepeatedHalvesWithATopEachMakeTwoIterations) {
  Feeder f;
  for (int rep = 0; rep < 24; ++rep) {
    f.Launch(1, 9000 * kUs);
    f.Launch(2, 40 * kUs);
  }
  EXPECT_EQ(f.finder().period(), 2u);
  ASSERT_FALSE(f.iterations().empty());
  for (const LaunchIteration& it : f.iterations()) {
    EXPECT_EQ(it.launches, 2u);
    EXPECT_EQ(it.first_launch % 2, 0u);
  }
}

TEST(LaunchPeriodFinderTest, IdenticalLaunchesAndAHostSyncPerStepMakeOneIterationPerStep) {
  // N identical GEMMs and a read-back per step: the signatures repeat at every launch, only the
  // host's wait says where a step starts. The first three GEMMs lock the period 1; the steps'
  // gaps, six at equal spacing, re-lock it at N.
  for (const uint32_t n : {5u, 16u, 37u}) {
    SCOPED_TRACE(n);
    Feeder f;
    const std::vector<uint64_t> step(n, 42);
    for (int rep = 0; rep < 12; ++rep) f.Loop(step);
    EXPECT_TRUE(f.finder().locked());
    EXPECT_EQ(f.finder().period(), n);
    const auto& its = f.iterations();
    ASSERT_FALSE(its.empty());
    const uint64_t last_loop = its.back().loop;
    uint64_t first_step = UINT64_MAX;
    for (const LaunchIteration& it : its) {
      if (it.loop != last_loop) continue;
      EXPECT_EQ(it.launches, n);
      EXPECT_EQ(it.first_launch % n, 0u);
      first_step = std::min(first_step, it.first_launch);
    }
    // Six steps' tops are needed at equal spacing, and the period 1 may be taken only in the
    // second step (three launches after a k-gram repeats): the steps are found by the eighth.
    EXPECT_LE(first_step, 7u * n);
    EXPECT_EQ(its.back().first_launch, 10u * n);
    ExpectDisjoint(its);
    ExpectContiguous(its);
  }
}

TEST(LaunchPeriodFinderTest, ABlockRepeatedThroughTheWholeStepMakesOneIterationPerStep) {
  // A step that is eight identical layers and nothing else, with jitter in every gap.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> small(10 * kUs, 40 * kUs);
  std::uniform_int_distribution<int64_t> large(4000 * kUs, 6000 * kUs);
  Feeder f;
  const std::vector<uint64_t> layer = {1, 2, 3};
  for (int rep = 0; rep < 12; ++rep) {
    for (int l = 0; l < 8; ++l) {
      for (size_t i = 0; i < layer.size(); ++i) f.Launch(layer[i], l == 0 && i == 0 ? large(rng) : small(rng));
    }
  }
  EXPECT_EQ(f.finder().period(), 24u);
  ASSERT_FALSE(f.iterations().empty());
  EXPECT_EQ(f.iterations().back().launches, 24u);
  EXPECT_EQ(f.iterations().back().first_launch % 24, 0u);
  ExpectDisjoint(f.iterations());
}

TEST(LaunchPeriodFinderTest, AStepOfManyIdenticalBlocksIsFoundThroughStrayGaps) {
  // Launch-bound: a block of eight small kernels run 60 times per step, then a copy and a device
  // sync (neither a launch). The block's gaps are alike (11-26 us), the interpreter adds a
  // stray 30-60 us gap now and then, and the step's top waits about 150 us.
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> small(11 * kUs, 26 * kUs);
  std::uniform_int_distribution<int64_t> top(130 * kUs, 170 * kUs);
  std::uniform_int_distribution<int64_t> stray(30 * kUs, 60 * kUs);
  std::bernoulli_distribution strays(0.01);
  Feeder f;
  // The tracer starts near a step's end: the first repetitions it can lock on hold a step's top.
  for (int b = 0; b < 2; ++b) {
    for (uint64_t k = 0; k < 8; ++k) f.Launch(10 + k, small(rng));
  }
  for (int rep = 0; rep < 12; ++rep) {
    for (int b = 0; b < 60; ++b) {
      for (uint64_t k = 0; k < 8; ++k) {
        const int64_t gap = b == 0 && k == 0 ? top(rng) : strays(rng) ? stray(rng) : small(rng);
        f.Launch(10 + k, gap);
      }
    }
  }
  EXPECT_EQ(f.finder().period(), 480u);
  ASSERT_FALSE(f.iterations().empty());
  EXPECT_EQ(f.iterations().back().launches, 480u);
  EXPECT_EQ(f.iterations().back().first_launch % 480, 16u);
  ExpectDisjoint(f.iterations());
}

TEST(LaunchPeriodFinderTest, ALongerWaitEveryTenStepsDoesNotMergeTheSteps) {
  // A step with a distinct top (the data loader), and every tenth step a loss read back that
  // waits for the GPU: the step stays the iteration.
  Feeder f;
  const std::vector<uint64_t> body = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (int rep = 0; rep < 60; ++rep) f.Loop(body, rep % 10 == 0 ? 40000 * kUs : 5000 * kUs);
  EXPECT_EQ(f.finder().period(), 10u);
  EXPECT_EQ(f.finder().loops(), 1u);
  EXPECT_EQ(f.iterations().size(), 59u);
}

TEST(LaunchPeriodFinderTest, AnEpochsEndDoesNotMergeTheStepsOfADataLoader) {
  // The host waits for the next batch before each step, 0.3 to 9 ms, and before the step's last
  // launches (a loss read back) 0.2 to 7 ms, so neither wait is the largest in every step; every
  // 32 steps the loader starts a new epoch and the wait is 200 ms. The step stays the iteration.
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int64_t> wait(300 * kUs, 9000 * kUs);
  std::uniform_int_distribution<int64_t> read_back(200 * kUs, 7000 * kUs);
  Feeder f;
  const int64_t first[] = {200000 * kUs, 300 * kUs, 6000 * kUs, 1000 * kUs};  // uneven from the start
  for (int rep = 0; rep < 200; ++rep) {
    const int64_t top = rep < 4 ? first[rep] : rep % 32 == 0 ? 200000 * kUs : wait(rng);
    for (uint64_t k = 0; k < 12; ++k) f.Launch(k + 1, k == 0 ? top : k == 10 ? read_back(rng) : 20 * kUs);
  }
  EXPECT_EQ(f.finder().period(), 12u);
  EXPECT_EQ(f.finder().loops(), 1u);
  EXPECT_GE(f.iterations().size(), 190u);
}

TEST(LaunchPeriodFinderTest, OneLaunchPerStepStaysOneIteration) {
  // One kernel and a sync per step: the period 1 is the step, and its uneven gaps (no two
  // steps alike) make no longer loop.
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> gap(3000 * kUs, 9000 * kUs);
  Feeder f;
  for (int i = 0; i < 400; ++i) f.Launch(7, gap(rng));
  EXPECT_EQ(f.finder().period(), 1u);
  EXPECT_EQ(f.finder().loops(), 1u);
  EXPECT_GE(f.iterations().size(), 390u);
}

TEST(LaunchPeriodFinderTest, AStepOfIdenticalBlocksEndsAtTheHostsWait) {
  // Four identical blocks per step, each after a standout 80 us gap (the block locks first), the
  // step ending in a sync the host waits in for only 30 us: the step is the iteration, from the
  // launch after one wait to the launch after the next.
  Feeder f;
  const std::vector<uint64_t> block = {1, 2, 3, 4, 5, 6};
  constexpr uint64_t kSync = 99;
  for (int step = 0; step < 40; ++step) {
    for (int b = 0; b < 4; ++b) f.Loop(block, b == 0 ? 30 * kUs : 80 * kUs, 10 * kUs);
    f.Wait(kSync);
  }
  EXPECT_EQ(f.finder().period(), 24u);
  EXPECT_EQ(f.finder().loops(), 2u);
  const auto& its = f.iterations();
  ASSERT_FALSE(its.empty());
  EXPECT_EQ(its.back().launches, 24u);
  EXPECT_EQ(its.back().first_launch % 24, 0u);  // the launch after a wait
  ExpectDisjoint(its);
  // The blocks were never settled: a window or an anchor is taken on the step only.
  ASSERT_FALSE(f.settled_launches().empty());
  for (const uint32_t n : f.settled_launches()) EXPECT_EQ(n, 24u);
}

TEST(LaunchPeriodFinderTest, AStepThatWaitsEveryIterationIsSettledDespiteAOneOffSyncAndALogEveryTenSteps) {
  // The loss read back in every step, a device sync once (the start of a timed region, seen on
  // the H200: it held the window back 110 steps with the tracer's activities on), and another
  // sync every ten steps (logging): the step stays the iteration, settled throughout.
  Feeder f;
  f.Steps({1, 2, 3, 4, 5, 6}, 120, [&f](int step, size_t k) {
    if (k == 5) f.Wait(50);  // the read back before the step's last launch
    if (k == 0 && step == 30) f.Wait(60);
    if (k == 0 && step % 10 == 0) f.Wait(61);
  });
  EXPECT_EQ(f.finder().period(), 6u);
  EXPECT_EQ(f.finder().loops(), 1u);
  EXPECT_TRUE(f.finder().settled());
  // Settled from the second step on: every iteration but the first few.
  EXPECT_GE(f.settled_launches().size(), 110u);
}

TEST(LaunchPeriodFinderTest, ALockWithoutWaitsIsSettledAtOnceOrAfter128IterationsIfTheProgramWaitedBefore) {
  // A program that never waited: nothing to wait for.
  const std::vector<uint64_t> body = {1, 2, 3, 4, 5};
  Feeder never;
  for (int rep = 0; rep < 4; ++rep) never.Loop(body);
  ASSERT_TRUE(never.finder().locked());
  EXPECT_TRUE(never.finder().settled());
  // One that waited in its set-up: the loop's first wait might still end a step of many
  // repetitions, for 128 of them.
  Feeder waited;
  waited.Launch(9, 20 * kUs);
  waited.Wait(77);
  for (int rep = 0; rep < 100; ++rep) waited.Loop(body);
  ASSERT_TRUE(waited.finder().locked());
  EXPECT_FALSE(waited.finder().settled());
  for (int rep = 0; rep < 40; ++rep) waited.Loop(body);
  EXPECT_TRUE(waited.finder().settled());
  EXPECT_EQ(waited.finder().period(), 5u);
}

TEST(LaunchPeriodFinderTest, AWaitInEveryStepOrAtUnevenSpacingLeavesTheStep) {
  // A step with a distinct top and a read-back wait in every step, plus another call waited on
  // every few steps at no fixed spacing (a check the program makes now and then): the step stays.
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> every(2, 7);
  Feeder f;
  int next_check = every(rng);
  f.Steps({1, 2, 3, 4, 5, 6, 7, 8}, 200, [&](int step, size_t k) {
    if (k == 6) f.Wait(50);  // the loss read back, mid-step
    if (k == 0 && step == next_check) {
      f.Wait(51);
      next_check += every(rng);
    }
  });
  EXPECT_EQ(f.finder().period(), 8u);
  EXPECT_EQ(f.finder().loops(), 1u);
  EXPECT_GE(f.iterations().size(), 190u);
  EXPECT_GE(f.settled_launches().size(), 150u);  // not held back for long by the uneven check
}

TEST(LaunchPeriodFinderTest, AGapThatAppearsLaterMovesTheLoopTopOfAnUndecidedLock) {
  // No gap stands out while the lock is taken, so its phase is a guess; then the host starts
  // to wait before the third launch of every repetition: the iterations start there, in the
  // same loop, and none overlaps.
  Feeder f;
  const std::vector<uint64_t> body = {1, 2, 3, 4};
  for (int rep = 0; rep < 5; ++rep) {
    for (const uint64_t s : body) f.Launch(s, 20 * kUs);
  }
  ASSERT_TRUE(f.finder().locked());
  for (int rep = 0; rep < 10; ++rep) {
    for (size_t i = 0; i < body.size(); ++i) f.Launch(body[i], i == 2 ? 5000 * kUs : 20 * kUs);
  }
  EXPECT_EQ(f.finder().period(), 4u);
  EXPECT_EQ(f.finder().loops(), 1u);
  ASSERT_FALSE(f.iterations().empty());
  EXPECT_EQ(f.iterations().back().first_launch % 4, 2u);
  EXPECT_EQ(f.iterations().back().launches, 4u);
  ExpectDisjoint(f.iterations());
}

TEST(LaunchPeriodFinderTest, NoPeriodInRandomLaunches) {
  Feeder f;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> signature(1, 1'000'000);
  for (int i = 0; i < 20000; ++i) f.Launch(signature(rng), 25 * kUs);
  EXPECT_EQ(f.finder().loops(), 0u);
  EXPECT_FALSE(f.finder().locked());
  EXPECT_TRUE(f.iterations().empty());
  EXPECT_EQ(f.finder().launches(), 20000u);
}

TEST(LaunchPeriodFinderTest, LayersInsideTheStepDoNotHideTheStep) {
  // A training step: embedding, 6 identical layers forward, head, 6 identical layers backward,
  // optimizer. Inside one step the layers repeat 6 times; the step is what repeats for good.
  std::vector<uint64_t> step = {100, 101};
  for (int l = 0; l < 6; ++l) step.insert(step.end(), {1, 2, 3});
  step.insert(step.end(), {200, 201, 202});
  for (int l = 0; l < 6; ++l) step.insert(step.end(), {11, 12, 13, 14});
  step.insert(step.end(), {300, 300, 300, 300, 301});
  const uint32_t p = static_cast<uint32_t>(step.size());
  Feeder f;
  for (int rep = 0; rep < 12; ++rep) f.Loop(step);
  EXPECT_TRUE(f.finder().locked());
  EXPECT_EQ(f.finder().period(), p);
  const auto& its = f.iterations();
  ASSERT_FALSE(its.empty());
  // The first step, seen once, cannot tell its layers from a loop (those inner iterations
  // are reported, as an earlier loop); from the second step on, nothing but whole steps is.
  size_t whole = 0;
  uint64_t step_loop = 0;
  for (const LaunchIteration& it : its) {
    if (it.first_launch < p) {
      EXPECT_LT(it.launches, p);
      continue;
    }
    EXPECT_EQ(it.launches, p) << "iteration at launch " << it.first_launch;
    EXPECT_EQ(it.first_launch % p, 0u);
    if (step_loop == 0) step_loop = it.loop;
    EXPECT_EQ(it.loop, step_loop);
    ++whole;
  }
  // Steps 1..10: step 0 overlaps its inner loops' iterations, step 11 has not ended.
  EXPECT_EQ(whole, 10u);
  EXPECT_EQ(its.back().first_launch, 10u * p);
}

TEST(LaunchPeriodFinderTest, LongStepOfALargeModel) {
  // 60 layers of 300 kernels forward and 400 backward, plus head and optimizer: 42,010 launches.
  std::vector<uint64_t> step;
  for (uint64_t s = 0; s < 5; ++s) step.push_back(1'000'000 + s);
  for (int l = 0; l < 60; ++l) {
    for (uint64_t s = 0; s < 300; ++s) step.push_back(10'000 + s);
  }
  for (uint64_t s = 0; s < 5; ++s) step.push_back(2'000'000 + s);
  for (int l = 0; l < 60; ++l) {
    for (uint64_t s = 0; s < 400; ++s) step.push_back(20'000 + s);
  }
  const auto p = static_cast<uint32_t>(step.size());
  Feeder f;
  for (int rep = 0; rep < 5; ++rep) f.Loop(step);
  EXPECT_EQ(f.finder().period(), p);
  ASSERT_FALSE(f.iterations().empty());
  EXPECT_EQ(f.iterations().back().launches, p);
  EXPECT_EQ(f.iterations().back().first_launch, 3u * p);
}

TEST(LaunchPeriodFinderTest, ANewLoopGetsANewId) {
  Feeder f;
  for (int rep = 0; rep < 8; ++rep) f.Loop({1, 2, 3, 4});
  for (int rep = 0; rep < 8; ++rep) f.Loop({5, 6, 7, 8, 9, 10});
  EXPECT_EQ(f.finder().loops(), 2u);
  EXPECT_EQ(f.finder().period(), 6u);
  uint64_t last_loop = 0;
  for (const LaunchIteration& it : f.iterations()) {
    EXPECT_EQ(it.launches, it.loop == 1 ? 4u : 6u);
    EXPECT_GE(it.loop, last_loop);
    last_loop = it.loop;
  }
  EXPECT_EQ(last_loop, 2u);
}

TEST(LaunchPeriodFinderTest, PeriodLongerThanTheLimitIsNotFound) {
  LaunchPeriodFinder::Options options;
  options.max_period = 16;
  options.history_log2 = 10;
  Feeder f(options);
  std::vector<uint64_t> body;
  for (uint64_t s = 0; s < 40; ++s) body.push_back(s);
  for (int rep = 0; rep < 10; ++rep) f.Loop(body);
  EXPECT_EQ(f.finder().loops(), 0u);
}

// Real launch sequences: two programs on the H200 traced whole by `emo trace`, each launch's
// kernel and host time (data/h200_emo/launch_sequences, bench/research/launch_sequence.py).
struct Replayed {
  uint32_t period = 0;
  uint64_t launches = 0;
  std::vector<LaunchIteration> iterations;
  // Launches per iteration of those reported while the finder was settled (the tracer takes
  // its window and anchor only then), from the program's first wait on, in order.
  std::vector<uint32_t> settled_launches;
  uint64_t waits = 0;
};

Replayed Replay(const std::string& name) {
  const std::string path = std::string(EMO_SOURCE_DIR) + "/data/h200_emo/launch_sequences/" + name + ".txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  LaunchPeriodFinder finder;
  Replayed r;
  int64_t time = 0;
  std::string first;
  std::string second;
  // "<signature> <ns since the previous launch>", or "wait <call>" (bench/research/launch_sequence.py).
  bool waited = false;
  while (in >> first >> second) {
    if (first == "wait") {
      finder.AddWait(std::hash<std::string>{}(second));
      waited = true;
      ++r.waits;
      continue;
    }
    time += std::stoll(second);
    const size_t before = r.iterations.size();
    finder.Add(std::stoull(first), time, &r.iterations);
    if (waited && finder.settled()) {
      for (size_t i = before; i < r.iterations.size(); ++i) r.settled_launches.push_back(r.iterations[i].launches);
    }
  }
  r.period = finder.period();
  r.launches = finder.launches();
  return r;
}

// The replayed sequence of `launches` launches ends locked on the step of `period` launches,
// and reports no iterations that overlap. With waits in the sequence, every iteration reported
// while the finder was settled (from the program's first wait on) is a whole step too: a
// window or an anchor taken then is on the step.
void ExpectTheStep(const Replayed& r, uint64_t launches, uint32_t period) {
  EXPECT_EQ(r.launches, launches);
  EXPECT_EQ(r.period, period);
  ASSERT_FALSE(r.iterations.empty());
  EXPECT_EQ(r.iterations.back().launches, period);
  ExpectDisjoint(r.iterations);
  EXPECT_TRUE(r.waits == 0 || !r.settled_launches.empty());
  for (size_t i = 0; i < r.settled_launches.size(); ++i) EXPECT_EQ(r.settled_launches[i], period) << i;
}

TEST(LaunchPeriodFinderH200Test, TinyOpsStepIsItsSixtyBlocksNotOneBlock) {
  // tiny_ops (bench/h200/record_workloads.py): 60 blocks of 8 kernels and a copy per step, the
  // step ending in a device sync; under the tracer its in-step gaps reach 28-100 us and its
  // tops 100-150 us. Without its waits: the gaps alone tell the step.
  ExpectTheStep(Replay("tiny_ops"), 16002, 480);
}

TEST(LaunchPeriodFinderH200Test, ADataLoadersStepIsNotMergedIntoItsEpoch) {
  // cnn_dataload_train: 95 launches per step, the host waiting for the next batch before each
  // (sometimes less than before the loss read back), and for the loader's workers at an epoch's
  // end every 32 steps.
  ExpectTheStep(Replay("cnn_dataload_train"), 9405, 95);
}

TEST(LaunchPeriodFinderH200Test, TinyOpsWithItsSyncsIsSettledOnlyOnTheStep) {
  // tiny_ops again, on a host about 1.7x slower (6.6 ms steps), with the step's device sync
  // recorded: its 110 us blocks once took the window before the step was found
  // (docs/runtime.md, "Settled").
  ExpectTheStep(Replay("tiny_ops_with_waits"), 16002, 480);
}

TEST(LaunchPeriodFinderH200Test, ADataLoadersStepWithItsReadBackWaitsStaysTheStep) {
  // cnn_dataload_train with its waits: the loss read back in every step is part of the step.
  ExpectTheStep(Replay("cnn_dataload_train_with_waits"), 9405, 95);
}

TEST(LaunchPeriodFinderH200Test, APrefillStepOfEightIdenticalLayersEndsAtItsDeviceSync) {
  // llm_prefill_infer: 8 identical decoder layers of 14 launches each, the host waiting ~70 us
  // before each layer (a standout gap: the layer locks first) and ~8.5 ms in cudaDeviceSynchronize
  // after the last.
  ExpectTheStep(Replay("llm_prefill_infer"), 12000, 112);
}

TEST(LaunchPeriodFinderH200Test, AHostBoundEncoderStepEndsAtItsDeviceSyncThoughEachLayerWaitsLonger) {
  // bert_infer: 12 identical encoder layers of 9 launches; the host's own work makes a ~100 us
  // gap inside each layer, longer than the step's sync (~60 us traced whole). No gap tells the
  // step; the sync once per 12 layers does.
  ExpectTheStep(Replay("bert_infer"), 12000, 108);
}

}  // namespace
}  // namespace emo::runtime
