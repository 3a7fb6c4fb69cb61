// The ranks of one job planned together (include/emo/opt/job_plan.h), on a hand-built two-rank
// job: the rank that waits for its peer in every all-reduce gets that wait as slack, the job
// meets the target with every plan at once, and planned alone (--per-rank) the waiting rank
// cannot see its slack.
#include "emo/opt/job_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "emo/analysis/job.h"
#include "emo/model/device.h"
#include "job_builder.h"
#include "test_util.h"

namespace emo::opt {
namespace {

// One rank: 6 iterations of 20 ms, all-reduces ending 500 us after the slower rank's compute
// (tests/job_builder.h).
analysis::TraceAnalysis Rank(int64_t rank, double compute_us, double slowest_us) {
  return testing::JobRank(rank, compute_us, slowest_us, 20000, 6, 500, "ampere_sgemm_128x64_nn");
}

TEST(JobPlanTest, TheRankThatWaitsForItsPeerSpendsTheWaitAtALowerClock) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  const analysis::TraceAnalysis r0 = Rank(0, 6000, 15000), r1 = Rank(1, 15000, 15000);
  const std::vector<const analysis::TraceAnalysis*> ranks = {&r0, &r1};
  auto job = analysis::AnalyzeJob(std::span<const analysis::TraceAnalysis* const>(ranks));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_EQ(job->collectives.size(), 6u);
  TracePlanOptions options;
  options.packing.min_pack_ns = 1'000'000;
  std::vector<std::string> said;
  auto progress = [&](size_t i, double target, bool with_peers) {
    said.push_back(std::to_string(i) + (with_peers ? " with peers" : " alone") + " " + std::to_string(target));
  };
  auto joint = PlanJob(*job, ranks, *device, options, /*per_rank=*/false, progress);
  ASSERT_TRUE(joint.ok()) << joint.status().ToString();
  auto alone = PlanJob(*job, ranks, *device, options, /*per_rank=*/true, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();

  // Every plan at once, replayed jointly, within the target.
  EXPECT_TRUE(joint->jointly);
  EXPECT_TRUE(joint->converged);
  EXPECT_TRUE(joint->met()) << joint->planned_ns << " against " << joint->baseline_ns;
  EXPECT_GT(joint->baseline_ns, 0);
  ASSERT_EQ(joint->plans.size(), 2u);
  ASSERT_GE(said.size(), 2u);
  EXPECT_EQ(said[0].rfind("0 with peers", 0), 0u) << said[0];
  // Rank 0 computes 6 ms and waits 9 ms for rank 1: with its peer held, the wait is slack, so
  // its plan goes far lower than the 2 % target allows a rank alone.
  const double joint0 = joint->plans[0].plan.energy_j, alone0 = alone->plans[0].plan.energy_j;
  const double base0 = joint->plans[0].baseline.energy_j;
  EXPECT_LT(joint0, alone0) << "jointly " << joint0 << " J, alone " << alone0 << " J";
  EXPECT_LT(joint0, 0.9 * base0);
  // The slower rank has no slack either way: its saving is the target's.
  EXPECT_NEAR(joint->plans[1].plan.energy_j, alone->plans[1].plan.energy_j, 0.05 * alone->plans[1].plan.energy_j);
  // Per rank: one planning, not timed with the peers, still checked jointly.
  EXPECT_FALSE(alone->jointly);
  ASSERT_EQ(alone->rounds.size(), 1u);
  EXPECT_TRUE(alone->rounds[0].per_rank);
  EXPECT_GT(alone->planned_ns, 0);
}

}  // namespace
}  // namespace emo::opt
