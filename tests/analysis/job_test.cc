// The ranks of one job (include/emo/analysis/job.h): their collectives and transfers matched
// across ranks, the waits for peers, the rank the others waited on, and the refusals.
#include "emo/analysis/job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace emo::analysis {
namespace {

constexpr TimeNs kUs = 1000;

RankInput Rank(int64_t rank, int64_t world = 2, std::string host = "") {
  RankInput r;
  r.path = "rank" + std::to_string(rank) + ".json";
  r.rank = rank;
  r.world_size = world;
  r.host = std::move(host);
  return r;
}

RankCollective Coll(const char* name, int64_t nelems, TimeNs start_us, TimeNs end_us, int64_t peer = -1,
                    int64_t seq = -1) {
  RankCollective c;
  c.name = name;
  c.process_group = "0";
  c.group_size = 2;
  c.group_ranks = {0, 1};
  c.nelems = nelems;
  c.peer = peer;
  c.seq = seq;
  c.start = start_us * kUs;
  c.end = end_us * kUs;
  return c;
}

const RankWait& Of(const JobAnalysis& j, int64_t rank) {
  for (const auto& w : j.ranks) {
    if (w.rank == rank) return w;
  }
  static const RankWait none;
  ADD_FAILURE() << "no rank " << rank;
  return none;
}

// Rank 1 arrives 2 ms late at each of three all-reduces; the transfer takes 100 us once both
// are there.
TEST(JobTest, WaitsForTheLastRankAndTheRankTheOthersWaitedOn) {
  RankInput r0 = Rank(0), r1 = Rank(1);
  for (int k = 0; k < 3; ++k) {
    const TimeNs t = 10'000 * k;
    r0.collectives.push_back(Coll("allreduce", 1000, t, t + 2100));
    r1.collectives.push_back(Coll("allreduce", 1000, t + 2000, t + 2100));
  }
  const auto job = AnalyzeJob({r0, r1});
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_EQ(job->collectives.size(), 3u);
  EXPECT_EQ(job->collectives[0].transfer_ns, 100 * kUs);
  EXPECT_EQ(Of(*job, 0).waited_ns, 3 * 2000 * kUs);
  EXPECT_EQ(Of(*job, 1).waited_ns, 0);
  EXPECT_EQ(Of(*job, 1).last_to_arrive, 3u);
  EXPECT_EQ(Of(*job, 1).kept_waiting_ns, 3 * 2000 * kUs);
  EXPECT_EQ(job->critical_rank, 1);
  EXPECT_TRUE(job->missing_ranks.empty());
}

// Rank 0's window starts one iteration earlier: its first all-reduce has no partner, and
// matching in order must not pair it with rank 1's first (same size, 10 ms apart).
TEST(JobTest, WindowsThatStartApartAreAlignedByWhenCollectivesEnd) {
  RankInput r0 = Rank(0), r1 = Rank(1);
  for (int k = 0; k < 4; ++k) r0.collectives.push_back(Coll("allreduce", 1000, 10'000 * k, 10'000 * k + 500));
  for (int k = 1; k < 4; ++k) r1.collectives.push_back(Coll("allreduce", 1000, 10'000 * k + 300, 10'000 * k + 505));
  const auto job = AnalyzeJob({r0, r1});
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->collectives.size(), 3u);
  EXPECT_EQ(Of(*job, 0).unmatched, 1u);
  EXPECT_EQ(Of(*job, 1).unmatched, 0u);
  EXPECT_EQ(Of(*job, 0).waited_ns, 3 * 300 * kUs);
}

// A pipeline's transfers: rank 0 sends to rank 1 (recorded with its Dst Rank), rank 1's receive
// waits 5 ms for it; a send that finishes before its receiver arrives waited no longer than it ran.
TEST(JobTest, PointToPointTransfersPairEachSendWithItsReceive) {
  RankInput r0 = Rank(0), r1 = Rank(1);
  r0.collectives.push_back(Coll("send", 4096, 5000, 5040, /*peer=*/1));
  r1.collectives.push_back(Coll("recv", 4096, 0, 5050, /*peer=*/0));
  r1.collectives.push_back(Coll("send", 4096, 9000, 9040));  // no Dst Rank: the other of a 2-rank group
  r0.collectives.push_back(Coll("recv", 4096, 12'000, 12'030));
  const auto job = AnalyzeJob({r0, r1});
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_EQ(job->collectives.size(), 2u);
  EXPECT_EQ(job->collectives[0].name, "send/recv");
  EXPECT_EQ(Of(*job, 1).unmatched, 0u);
  // The receive waited 5000 us for the send; rank 1's send (9000-9040) finished before rank 0's
  // receive began (12000): it waited no longer than it ran, 40 us (not 3000).
  EXPECT_EQ(Of(*job, 1).waited_ns, (5000 + 40) * kUs);
  EXPECT_EQ(Of(*job, 0).waited_ns, 0);
  EXPECT_EQ(job->critical_rank, 0);
}

TEST(JobTest, SeqMatchesWhateverTheOrder) {
  RankInput r0 = Rank(0), r1 = Rank(1);
  r0.collectives.push_back(Coll("allreduce", 8, 0, 200, -1, /*seq=*/7));
  r0.collectives.push_back(Coll("allreduce", 8, 1000, 1200, -1, 8));
  r1.collectives.push_back(Coll("allreduce", 8, 1100, 1205, -1, 8));  // its seq 7 is outside its window
  const auto job = AnalyzeJob({r0, r1});
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_EQ(job->collectives.size(), 1u);
  EXPECT_EQ(Of(*job, 0).waited_ns, 100 * kUs);
  EXPECT_EQ(Of(*job, 0).unmatched, 1u);
}

// Rank 1's host clock reads 5 s ahead: the ends of the matched collectives, which finish
// together, give the offset back.
TEST(JobTest, RanksOnAnotherHostArePutOnOneClockByTheirCollectivesEnds) {
  RankInput r0 = Rank(0, 2, "a"), r1 = Rank(1, 2, "b");
  const TimeNs skew_us = 5'000'000;
  for (int k = 0; k < 5; ++k) {
    const TimeNs t = 10'000 * k;
    r0.collectives.push_back(Coll("allreduce", 64, t + 1000, t + 1500));
    r1.collectives.push_back(Coll("allreduce", 64, t + skew_us, t + skew_us + 1502));
  }
  const auto job = AnalyzeJob({r0, r1});
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->collectives.size(), 5u);
  EXPECT_EQ(Of(*job, 1).clock_offset_ns, -(skew_us + 2) * kUs);
  // On one clock rank 1 arrived 1002 us before rank 0 each time.
  EXPECT_EQ(Of(*job, 1).waited_ns, 5 * 1002 * kUs);
  EXPECT_EQ(job->critical_rank, 0);
}

TEST(JobTest, TracesThatAreNotOneJobAreRefused) {
  RankInput r0 = Rank(0), r1 = Rank(1);
  auto twice = AnalyzeJob({r0, r0});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "rank0.json is given twice: a job takes each rank's trace once");
  RankInput other = Rank(0);
  other.path = "other.json";
  auto same_rank = AnalyzeJob({r0, other});
  ASSERT_FALSE(same_rank.ok());
  EXPECT_EQ(same_rank.status().message(), "rank 0 is in rank0.json and in other.json: traces of different runs?");
  RankInput big = Rank(3, 8);
  auto worlds = AnalyzeJob({r0, big});
  ASSERT_FALSE(worlds.ok());
  EXPECT_EQ(worlds.status().message(), "rank0.json is rank 0 of 2 and rank3.json rank 3 of 8: ranks of different jobs");
  RankInput none = Rank(-1);
  none.path = "single.json";
  auto unranked = AnalyzeJob({r0, none});
  ASSERT_FALSE(unranked.ok());
  EXPECT_NE(unranked.status().message().find("single.json has no rank"), std::string::npos);
  RankInput r5 = Rank(5, 8), r2 = Rank(2, 8);
  auto partial = AnalyzeJob({r5, r2});
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  EXPECT_EQ(partial->missing_ranks, (std::vector<int64_t>{0, 1, 3, 4, 6, 7}));
}

// Our H200 traces: a 2-GPU DDP step (all-reduces of the gradient buckets) and a 2-stage
// pipeline (sends and receives of activations and gradients).
TEST(JobSharedTest, H200DdpAndPipelineRanksMatchEveryCollective) {
  EMO_REQUIRE_SHARED();
  AnalyzeOptions options;
  for (const char* job_name : {"ddp_gpt", "pp_gpt"}) {
    std::vector<RankInput> ranks;
    for (int r = 0; r < 2; ++r) {
      auto a = AnalyzeTrace(SharedPath("traces/h200/" + std::string(job_name) + "_rank" + std::to_string(r) + ".json.gz"),
                            options);
      ASSERT_TRUE(a.ok()) << a.status().message();
      ranks.push_back(RankInputOf(*a));
    }
    const auto job = AnalyzeJob(ranks);
    ASSERT_TRUE(job.ok()) << job.status().message();
    SCOPED_TRACE(job_name);
    EXPECT_EQ(Of(*job, 0).unmatched, 0u);
    EXPECT_EQ(Of(*job, 1).unmatched, 0u);
    if (std::string(job_name) == "ddp_gpt") {
      EXPECT_EQ(job->collectives.size(), 42u);
    } else {
      // The later stage waits for the earlier one's activations: the pipeline's bubbles.
      EXPECT_EQ(job->collectives.size(), 24u);
      EXPECT_GT(Of(*job, 1).waited_ns, 10 * Of(*job, 0).waited_ns);
      EXPECT_EQ(job->critical_rank, 0);
    }
  }
}

// The 8-rank DLRM step (PARAM, V100; no collective metadata: matched by kernel name): the
// ranks wait in its all-to-all exchanges for rank 7, the straggler.
TEST(JobSharedTest, TheDlrmStragglerIsTheRankTheOthersWaitOn) {
  EMO_REQUIRE_SHARED();
  const std::string dir = ::testing::TempDir() + "emo_job_dlrm_" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "' && tar xzf '" + SharedPath("traces/param/dlrm_kineto_8ranks_v100.tar.gz") +
                         "' -C '" + dir + "'").c_str()),
            0);
  std::vector<RankInput> ranks;
  AnalyzeOptions options;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/dlrm_kineto")) {
    auto a = AnalyzeTrace(entry.path().string(), options);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ranks.push_back(RankInputOf(*a));
  }
  std::filesystem::remove_all(dir);
  ASSERT_EQ(ranks.size(), 8u);
  const auto job = AnalyzeJob(ranks);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_TRUE(job->missing_ranks.empty());
  EXPECT_EQ(job->collectives.size(), 8u);  // 5 all-to-all exchanges and 3 all-reduces
  EXPECT_EQ(job->critical_rank, 7);
  EXPECT_EQ(Of(*job, 7).last_to_arrive, 5u);
}

// emo trace's own traces of a DDP job carry no collective metadata: the NCCL kernels' names say
// which collective each is, and the clock references put both processes on one clock. The
// ranks traced windows one iteration apart (8 collectives per iteration).
TEST(JobSharedTest, EmoTracesOfADdpJobMatchByKernelNameAndWallClock) {
  AnalyzeOptions options;
  std::vector<RankInput> ranks;
  for (int r = 0; r < 2; ++r) {
    auto a = AnalyzeTrace(testing::SourceDir() + "/data/h200_emo/ddp_train_rank" + std::to_string(r) + ".emotrace",
                          options);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ranks.push_back(RankInputOf(*a));
  }
  EXPECT_EQ(ranks[0].collectives.size(), 48u);
  const auto job = AnalyzeJob(ranks);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->collectives.size(), 40u);
  EXPECT_EQ(Of(*job, 0).unmatched, 8u);
  EXPECT_EQ(Of(*job, 1).unmatched, 8u);
  for (const auto& c : job->collectives) {
    if (c.name != "allreduce") continue;
    // An all-reduce ends together on both ranks once they are on one clock.
    EXPECT_LE(std::abs(c.members[0].end - c.members[1].end), 50 * kUs);
  }
}

}  // namespace
}  // namespace emo::analysis
