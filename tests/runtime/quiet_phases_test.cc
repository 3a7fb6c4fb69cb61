// The quiet phases' schedule (EMO_TRACE_QUIET_MS): one engaged and one quiet phase of the set
// length once settled, the detach at the program's next wait, nothing after the attach.
#include "emo/runtime/quiet_phases.h"

#include <gtest/gtest.h>

namespace emo::runtime {
namespace {

using Action = QuietPhases::Action;
using Phase = QuietPhases::Phase;
constexpr int64_t kMs = 1'000'000;

TEST(QuietPhasesTest, OneEngagedAndOneQuietPhaseOnceSettled) {
  QuietPhases q(100 * kMs);
  // Not settled yet (the window, the anchor): nothing happens.
  EXPECT_EQ(q.Poll(10 * kMs, false, false, 0), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kWaiting);
  EXPECT_EQ(q.Poll(20 * kMs, true, false, 0), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kEngaged);
  EXPECT_EQ(q.Poll(119 * kMs, true, false, 0), Action::kNone);
  EXPECT_EQ(q.Poll(120 * kMs, true, false, 0), Action::kDetach);
  EXPECT_EQ(q.phase(), Phase::kDetaching);
  // The program's next wait detaches at 123 ms: the quiet phase runs from then.
  EXPECT_EQ(q.Poll(121 * kMs, true, false, 0), Action::kNone);
  EXPECT_EQ(q.Poll(125 * kMs, false, true, 123 * kMs), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kQuiet);
  EXPECT_EQ(q.Poll(222 * kMs, false, true, 123 * kMs), Action::kNone);
  EXPECT_EQ(q.Poll(223 * kMs, false, true, 123 * kMs), Action::kReattach);
  EXPECT_EQ(q.phase(), Phase::kAfter);
  // Attached again: settled or not, no second phase, however long the run goes on.
  EXPECT_EQ(q.Poll(230 * kMs, false, false, 123 * kMs), Action::kNone);
  EXPECT_EQ(q.Poll(260 * kMs, true, false, 123 * kMs), Action::kNone);
  EXPECT_EQ(q.Poll(5000 * kMs, true, false, 123 * kMs), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kAfter);
  EXPECT_EQ(q.quiet_phases(), 1u);
  EXPECT_EQ(QuietMarksText(q.marks()), "engaged 20000000\ndetaching 120000000\nquiet 123000000\nafter 223000000\n");
}

TEST(QuietPhasesTest, ALoopThatNeverWaitsIsDetachedAtAnyCallAfterAPhase) {
  QuietPhases q(50 * kMs);
  q.Poll(0, true, false, 0);
  EXPECT_EQ(q.Poll(50 * kMs, true, false, 0), Action::kDetach);
  EXPECT_EQ(q.Poll(99 * kMs, true, false, 0), Action::kNone);
  EXPECT_EQ(q.Poll(100 * kMs, true, false, 0), Action::kDetachAtAnyExit);
  EXPECT_EQ(q.Poll(140 * kMs, true, false, 0), Action::kNone);  // asked once
  EXPECT_EQ(q.Poll(141 * kMs, false, true, 140 * kMs), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kQuiet);
}

TEST(QuietPhasesTest, ADetachOrAttachFromElsewhereMovesThePhase) {
  QuietPhases q(50 * kMs);
  q.Poll(0, true, false, 0);
  EXPECT_EQ(q.Poll(10 * kMs, false, true, 9 * kMs), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kQuiet);
  EXPECT_EQ(q.marks().back().time_ns, 9 * kMs);
  EXPECT_EQ(q.Poll(20 * kMs, false, false, 9 * kMs), Action::kNone);
  EXPECT_EQ(q.phase(), Phase::kAfter);
}

}  // namespace
}  // namespace emo::runtime
