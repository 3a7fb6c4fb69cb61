// AnchorFinder and AnchorFollower on synthetic calls and iterations: signatures are small
// integers and times are made up, so nothing depends on how fast the test runs.
#include "emo/runtime/anchor_finder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace emo::runtime {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kLossRead = 7;  // once per iteration, near its end
constexpr uint64_t kBatchCopy = 8;  // twice per iteration
constexpr uint64_t kCheckpoint = 9;  // now and then

// A loop of 10 ms iterations: each iteration's calls at the given offsets (ms), then the
// iteration itself, as the tracer's control thread sees them (calls first).
class Loop {
 public:
  explicit Loop(AnchorFinder* finder, uint64_t loop = 1, int64_t start_ns = 1000 * kMs)
      : finder_(finder), loop_(loop), t_(start_ns) {}
  void Iteration(const std::vector<std::pair<uint64_t, int64_t>>& calls, int64_t length = 10 * kMs) {
    for (const auto& [signature, offset] : calls) finder_->AddEvent(signature, t_ + offset);
    LaunchIteration it;
    it.start_ns = t_;
    it.end_ns = t_ + length;
    it.launches = 500;
    it.loop = loop_;
    it.loop_index = index_++;
    finder_->AddIteration(it);
    t_ += length;
  }
  int64_t time() const { return t_; }

 private:
  AnchorFinder* finder_;
  uint64_t loop_;
  uint64_t index_ = 0;
  int64_t t_;
};

TEST(AnchorFinderTest, ChoosesTheCallMadeOncePerIterationAfterItIsStable) {
  AnchorFinder f;
  Loop loop(&f);
  const std::vector<std::pair<uint64_t, int64_t>> calls = {{kBatchCopy, 1 * kMs}, {kBatchCopy, 2 * kMs}, {kLossRead, 9 * kMs}};
  for (int i = 0; i < 15; ++i) {
    loop.Iteration(calls);
    EXPECT_FALSE(f.choice().has_value()) << "chosen after " << i + 1 << " iterations";
  }
  loop.Iteration(calls);
  const auto choice = f.choice();
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->signature, kLossRead);  // once per iteration beats twice
  EXPECT_EQ(choice->count, 1u);
  EXPECT_EQ(choice->median_ns, 10 * kMs);
  EXPECT_EQ(choice->loop, 1u);
  EXPECT_EQ(choice->period, 500u);
}

TEST(AnchorFinderTest, TakesACallMadeSeveralTimesWhenNoneIsMadeOnce) {
  AnchorFinder f;
  Loop loop(&f);
  for (int i = 0; i < 16; ++i) loop.Iteration({{kBatchCopy, 1 * kMs}, {kBatchCopy, 2 * kMs}});
  const auto choice = f.choice();
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->signature, kBatchCopy);
  EXPECT_EQ(choice->count, 2u);
}

TEST(AnchorFinderTest, NoAnchorWhenTheCountVariesOrTheCallIsMissing) {
  AnchorFinder f;
  Loop loop(&f);
  for (int i = 0; i < 40; ++i) {
    // The checkpoint call comes every third iteration; the loss read skips every eighth.
    std::vector<std::pair<uint64_t, int64_t>> calls;
    if (i % 3 == 0) calls.push_back({kCheckpoint, 5 * kMs});
    if (i % 8 != 7) calls.push_back({kLossRead, 9 * kMs});
    loop.Iteration(calls);
  }
  EXPECT_FALSE(f.choice().has_value());
}

TEST(AnchorFinderTest, TooManyCallsPerIterationAreNoAnchor) {
  AnchorFinder f;
  Loop loop(&f);
  std::vector<std::pair<uint64_t, int64_t>> calls;
  for (int k = 0; k < 5; ++k) calls.push_back({kBatchCopy, (k + 1) * kMs});
  for (int i = 0; i < 20; ++i) loop.Iteration(calls);
  EXPECT_FALSE(f.choice().has_value());
}

TEST(AnchorFinderTest, ANewLoopStartsTheCountAgain) {
  AnchorFinder f;
  Loop first(&f, 1);
  for (int i = 0; i < 10; ++i) first.Iteration({{kLossRead, 9 * kMs}});
  Loop second(&f, 2, first.time());
  for (int i = 0; i < 15; ++i) second.Iteration({{kLossRead, 9 * kMs}});
  EXPECT_FALSE(f.choice().has_value());
  second.Iteration({{kLossRead, 9 * kMs}});
  ASSERT_TRUE(f.choice().has_value());
  EXPECT_EQ(f.choice()->loop, 2u);
  f.Reset();
  EXPECT_FALSE(f.choice().has_value());
}

TEST(AnchorFinderTest, IterationsWhoseCallsWereDroppedBreakTheRun) {
  AnchorFinder::Options o;
  o.max_events = 4;  // a burst of calls pushes the loss reads out
  AnchorFinder f(o);
  Loop loop(&f);
  for (int i = 0; i < 20; ++i) {
    std::vector<std::pair<uint64_t, int64_t>> calls = {{kLossRead, 1 * kMs}};
    if (i == 10) {
      for (int k = 0; k < 6; ++k) calls.push_back({kCheckpoint, (2 + k) * kMs});
    }
    loop.Iteration(calls);
  }
  // Iteration 10 lost its loss read from view: the run restarts after it (9 iterations so far).
  EXPECT_FALSE(f.choice().has_value());
  for (int i = 0; i < 7; ++i) loop.Iteration({{kLossRead, 1 * kMs}});
  EXPECT_TRUE(f.choice().has_value());
}

AnchorChoice Choice(uint32_t count) {
  AnchorChoice c;
  c.signature = kLossRead;
  c.count = count;
  c.median_ns = 10 * kMs;
  c.loop = 1;
  c.period = 500;
  return c;
}

TEST(AnchorFollowerTest, EachNthCallEndsAnIteration) {
  AnchorFollower follow(Choice(2), 0);
  AnchorIteration it;
  std::vector<AnchorIteration> its;
  int64_t t = 0;
  for (int k = 0; k < 9; ++k) {
    t += k % 2 == 0 ? 7 * kMs : 3 * kMs;
    EXPECT_EQ(follow.OnEvent(kBatchCopy, t, &it), AnchorFollower::Result::kNone);  // not the anchor
    const auto r = follow.OnEvent(kLossRead, t, &it);
    if (r == AnchorFollower::Result::kIteration) its.push_back(it);
    EXPECT_NE(r, AnchorFollower::Result::kLost);
  }
  // The first call starts the first iteration; then every second one ends one.
  ASSERT_EQ(its.size(), 4u);
  for (size_t i = 0; i < its.size(); ++i) {
    EXPECT_EQ(its[i].end_ns - its[i].start_ns, 10 * kMs) << i;
    if (i > 0) {
      EXPECT_EQ(its[i].start_ns, its[i - 1].end_ns);
    }
  }
}

TEST(AnchorFollowerTest, AShortIterationMeansTheLoopNoLongerHolds) {
  AnchorFollower follow(Choice(1), 0);
  AnchorIteration it;
  EXPECT_EQ(follow.OnEvent(kLossRead, 10 * kMs, &it), AnchorFollower::Result::kNone);
  EXPECT_EQ(follow.OnEvent(kLossRead, 20 * kMs, &it), AnchorFollower::Result::kIteration);
  EXPECT_EQ(follow.OnEvent(kLossRead, 26 * kMs, &it), AnchorFollower::Result::kIteration);  // 0.6 of the loop's
  EXPECT_EQ(follow.OnEvent(kLossRead, 30 * kMs, &it), AnchorFollower::Result::kLost);       // 0.4
}

TEST(AnchorFollowerTest, SilenceIsMeasuredFromTheLastCallOrTheStart) {
  AnchorFollower follow(Choice(1), 100 * kMs);
  // 20 medians are 200 ms, under the 1 s floor.
  EXPECT_FALSE(follow.Silent(1099 * kMs));
  EXPECT_TRUE(follow.Silent(1101 * kMs));
  AnchorIteration it;
  follow.OnEvent(kLossRead, 1050 * kMs, &it);
  EXPECT_FALSE(follow.Silent(1101 * kMs));
  EXPECT_TRUE(follow.Silent(2051 * kMs));
}

}  // namespace
}  // namespace emo::runtime
