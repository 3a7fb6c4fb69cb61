// TraceWindow: when activities go on and off, from iteration starts alone.
#include "emo/runtime/trace_window.h"

#include <gtest/gtest.h>

namespace emo::runtime {
namespace {

using Action = TraceWindow::Action;

TEST(TraceWindowTest, PretraceStopsAtTheFirstLoopThenLeadInAndWindow) {
  TraceWindow w(/*warmup=*/5, /*iterations=*/3, /*pretrace=*/true);
  EXPECT_TRUE(w.enabled());
  // The finder reports a loop at its iteration 2 (0 and 1 retroactively).
  EXPECT_EQ(w.OnIterationStart(2, 1, 2, 50), Action::kDisable);
  EXPECT_EQ(w.OnIterationStart(3, 1, 3, 50), Action::kNone);
  EXPECT_FALSE(w.open());
  EXPECT_EQ(w.OnIterationStart(4, 1, 4, 50), Action::kEnable);  // lead-in
  EXPECT_FALSE(w.Traced(4));
  EXPECT_TRUE(w.open());  // the tracer feeds it iteration starts until it closes
  EXPECT_EQ(w.OnIterationStart(5, 1, 5, 50), Action::kNone);
  EXPECT_EQ(w.OnIterationStart(6, 1, 6, 50), Action::kNone);
  EXPECT_EQ(w.OnIterationStart(7, 1, 7, 50), Action::kNone);
  EXPECT_TRUE(w.open());
  EXPECT_EQ(w.OnIterationStart(8, 1, 8, 50), Action::kDisable);
  EXPECT_FALSE(w.open());
  EXPECT_EQ(w.OnIterationStart(9, 1, 9, 50), Action::kNone);
  for (uint64_t i = 0; i < 12; ++i) EXPECT_EQ(w.Traced(i), i >= 5 && i < 8) << i;
  ASSERT_EQ(w.windows().size(), 1u);
  EXPECT_TRUE(w.windows()[0].complete);
  EXPECT_EQ(w.windows()[0].first, 5u);
  EXPECT_EQ(w.windows()[0].end, 8u);
}

TEST(TraceWindowTest, LoopFoundAfterItsWarmupUsesWhatPretraceRecorded) {
  TraceWindow w(/*warmup=*/2, /*iterations=*/3, /*pretrace=*/true);
  // Found at loop iteration 4 (global 10): iterations 2..4 of the loop (global 8..10) are
  // traced already; the window is global 8..10 and ends when global 11 starts.
  EXPECT_EQ(w.OnIterationStart(10, 1, 4, 20), Action::kNone);
  EXPECT_TRUE(w.enabled());
  EXPECT_EQ(w.OnIterationStart(11, 1, 5, 20), Action::kDisable);
  EXPECT_TRUE(w.Traced(8));
  EXPECT_TRUE(w.Traced(10));
  EXPECT_FALSE(w.Traced(7));
  EXPECT_FALSE(w.Traced(11));
}

TEST(TraceWindowTest, WarmupZeroTracesFromTheFirstIteration) {
  TraceWindow w(/*warmup=*/0, /*iterations=*/2, /*pretrace=*/true);
  EXPECT_EQ(w.OnIterationStart(2, 1, 2, 10), Action::kDisable);  // iterations 0, 1 were traced
  EXPECT_TRUE(w.Traced(0));
  EXPECT_TRUE(w.Traced(1));
  EXPECT_FALSE(w.Traced(2));
}

TEST(TraceWindowTest, WithoutPretraceNothingIsOnUntilTheLeadIn) {
  TraceWindow w(/*warmup=*/1, /*iterations=*/1, /*pretrace=*/false);
  EXPECT_FALSE(w.enabled());
  EXPECT_EQ(w.OnIterationStart(0, 1, 0, 10), Action::kEnable);  // iteration 0 is the lead-in
  EXPECT_EQ(w.OnIterationStart(1, 1, 1, 10), Action::kNone);
  EXPECT_EQ(w.OnIterationStart(2, 1, 2, 10), Action::kDisable);
  EXPECT_TRUE(w.Traced(1));
  EXPECT_FALSE(w.Traced(0));
}

TEST(TraceWindowTest, ALongerLoopSupersedesTheWindowOfAShortOne) {
  TraceWindow w(/*warmup=*/2, /*iterations=*/2, /*pretrace=*/false);
  // Loop 1: the layers of a first forward pass, 3 launches each.
  EXPECT_EQ(w.OnIterationStart(2, 1, 2, 3), Action::kEnable);  // lead-in 2, window 3..4
  EXPECT_EQ(w.windows().size(), 1u);
  EXPECT_EQ(w.OnIterationStart(5, 1, 5, 3), Action::kDisable);
  ASSERT_TRUE(w.windows()[0].complete);
  // Loop 2: the whole step, 60 launches.
  EXPECT_EQ(w.OnIterationStart(9, 2, 2, 60), Action::kEnable);
  EXPECT_EQ(w.OnIterationStart(10, 2, 3, 60), Action::kNone);
  EXPECT_EQ(w.OnIterationStart(11, 2, 4, 60), Action::kNone);
  EXPECT_EQ(w.OnIterationStart(12, 2, 5, 60), Action::kDisable);
  ASSERT_EQ(w.windows().size(), 2u);
  EXPECT_EQ(w.windows()[1].first, 10u);
  EXPECT_EQ(w.windows()[1].end, 12u);
  EXPECT_TRUE(w.windows()[1].complete);
  // A shorter loop later (an evaluation pass) does not take a third window.
  EXPECT_EQ(w.OnIterationStart(20, 3, 5, 30), Action::kNone);
  EXPECT_FALSE(w.enabled());
  EXPECT_EQ(w.windows().size(), 2u);
}

TEST(TraceWindowTest, LoopChangeCutsAnOpenWindow) {
  TraceWindow w(/*warmup=*/1, /*iterations=*/5, /*pretrace=*/false);
  EXPECT_EQ(w.OnIterationStart(0, 1, 0, 8), Action::kEnable);
  EXPECT_EQ(w.OnIterationStart(1, 1, 1, 8), Action::kNone);
  EXPECT_EQ(w.OnIterationStart(2, 1, 2, 8), Action::kNone);
  // A different loop starts at iteration 3: the first window keeps 1..2.
  EXPECT_EQ(w.OnIterationStart(3, 2, 0, 8), Action::kNone);  // lead-in of the new window
  ASSERT_EQ(w.windows().size(), 2u);
  EXPECT_FALSE(w.windows()[0].complete);
  EXPECT_EQ(w.windows()[0].end, 3u);
  EXPECT_TRUE(w.Traced(2));
  EXPECT_FALSE(w.Traced(3));
  EXPECT_EQ(w.windows()[1].first, 4u);
}

TEST(TraceWindowTest, NvtxIterationKeyIgnoresNumbers) {
  EXPECT_EQ(NvtxIterationKey("ProfilerStep#12"), "ProfilerStep#N");
  EXPECT_EQ(NvtxIterationKey("ProfilerStep#7"), "ProfilerStep#N");
  EXPECT_EQ(NvtxIterationKey("iter 3 of 100"), "iter N of N");
  EXPECT_EQ(NvtxIterationKey("train_step"), "train_step");
  EXPECT_EQ(NvtxIterationKey(""), "");
}

}  // namespace
}  // namespace emo::runtime
