// The ranks of one job replayed as one (include/emo/analysis/joint_replay.h): the identity on
// hand-built and real jobs, and a straggler's delay reaching its peers through the collectives.
#include "emo/analysis/joint_replay.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "job_builder.h"

namespace emo::analysis {
namespace {

constexpr TimeNs kUs = 1000;

// One rank of a two-rank job: 4 iterations of 1 ms, all-reduces ending 50 us after the slower
// rank's compute (tests/job_builder.h).
TraceAnalysis Rank(int64_t rank, double compute_us, double slowest_us) {
  return testing::JobRank(rank, compute_us, slowest_us);
}

JobAnalysis JobOf(const std::vector<const TraceAnalysis*>& ranks) {
  auto job = AnalyzeJob(std::span<const TraceAnalysis* const>(ranks));
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return std::move(job).value();
}

TEST(JointReplayTest, TracedDurationsReplayJointlyToTheTraces) {
  const TraceAnalysis r0 = Rank(0, 100, 300), r1 = Rank(1, 300, 300);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  const JobAnalysis job = JobOf(ranks);
  ASSERT_EQ(job.collectives.size(), 4u);
  const std::vector<const std::vector<TimeNs>*> d = {&r0.traced_durations, &r1.traced_durations};
  const JointSchedule s = JointReplay(job, ranks, d);
  EXPECT_TRUE(s.converged);
  EXPECT_EQ(s.members_bound, 8u);  // both members of each all-reduce end with its transfer
  for (size_t i = 0; i < ranks.size(); ++i) {
    EXPECT_EQ(s.ranks[i].start, ranks[i]->measured.start) << i;
    EXPECT_EQ(s.ranks[i].end, ranks[i]->measured.end) << i;
  }
  // Each arrival is rank 1's all-reduce start.
  for (size_t c = 0; c < 4; ++c) EXPECT_EQ(s.arrival[c], (1000 * static_cast<TimeNs>(c) + 320) * kUs) << c;
}

// Rank 1's compute twice as long: rank 0's all-reduce waits 300 us longer in every iteration,
// which its own graph alone cannot see (its all-reduce keeps its measured wait).
TEST(JointReplayTest, AStragglerDelaysItsPeerThroughTheCollective) {
  const TraceAnalysis r0 = Rank(0, 100, 300), r1 = Rank(1, 300, 300);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  const JobAnalysis job = JobOf(ranks);
  auto w = RunJobWhatIf(job, ranks, {}, {{1, 2.0}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->ranks.size(), 2u);
  EXPECT_TRUE(w->converged);
  EXPECT_EQ(w->ranks[0].whatif_ns - w->ranks[0].baseline_ns, 300 * kUs);
  EXPECT_EQ(w->ranks[1].whatif_ns - w->ranks[1].baseline_ns, 300 * kUs);
  EXPECT_EQ(w->ranks[0].alone_ns, w->ranks[0].baseline_ns);
  EXPECT_EQ(w->job_whatif_ns - w->job_baseline_ns, 300 * kUs);
}

// Rank 0's compute twice as long still ends before rank 1 arrives: the wait absorbs it.
TEST(JointReplayTest, ARankThatWaitsForItsPeerAbsorbsItsOwnSlowdown) {
  const TraceAnalysis r0 = Rank(0, 100, 300), r1 = Rank(1, 300, 300);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  const JobAnalysis job = JobOf(ranks);
  auto w = RunJobWhatIf(job, ranks, {}, {{0, 2.0}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->ranks[0].whatif_ns, w->ranks[0].baseline_ns);
  EXPECT_EQ(w->ranks[1].whatif_ns, w->ranks[1].baseline_ns);
  // Three times as long (300 us) it arrives with rank 1; four times, 100 us after it.
  auto slower = RunJobWhatIf(job, ranks, {}, {{0, 4.0}});
  ASSERT_TRUE(slower.ok());
  EXPECT_EQ(slower->ranks[1].whatif_ns - slower->ranks[1].baseline_ns, 100 * kUs);
}

// The segments of a joint critical path follow one another on the job clock and add up to the
// iteration (less the head gap when the walk stopped at a root).
void ExpectContiguous(const JointCriticalPath& p) {
  ASSERT_FALSE(p.segments.empty());
  TimeNs covered = p.segments.front().path.head_gap_ns;
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const JointPathSegment& seg = p.segments[i];
    EXPECT_EQ(seg.to_ns - seg.from_ns, seg.path.total() + seg.path.tail_gap_ns) << i;
    if (i + 1 < p.segments.size()) {
      EXPECT_EQ(seg.to_ns, p.segments[i + 1].from_ns) << i;
    }
    covered += seg.path.total() + seg.path.tail_gap_ns;
  }
  EXPECT_EQ(p.segments.back().to_ns, p.to_ns);
  EXPECT_EQ(covered, p.to_ns - p.from_ns);
}

// Rank 0's all-reduce waits for rank 1's longer compute: the job's critical path runs through
// rank 1's compute kernel and into rank 0 only for the transfer after rank 1 arrived.
TEST(JointReplayTest, TheCriticalPathCrossesToTheRankTheOthersWaitFor) {
  const TraceAnalysis r0 = Rank(0, 100, 300), r1 = Rank(1, 300, 300);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  const JobAnalysis job = JobOf(ranks);
  const std::vector<const std::vector<TimeNs>*> d = {&r0.traced_durations, &r1.traced_durations};
  const JointCriticalPath p = FindJointCriticalPath(job, ranks, JointReplay(job, ranks, d));
  ASSERT_EQ(p.sink_rank, 0);  // both ranks' iterations are as long: the first is taken
  EXPECT_GE(p.hops, 1u);
  ExpectContiguous(p);
  TimeNs compute[2] = {0, 0}, communication[2] = {0, 0};
  for (const JointPathSegment& seg : p.segments) {
    compute[seg.rank] += seg.path.time[static_cast<size_t>(PathCategory::kGpuCompute)];
    communication[seg.rank] += seg.path.time[static_cast<size_t>(PathCategory::kCommunication)];
  }
  EXPECT_EQ(compute[0], 0);           // rank 0's 100 us gemm is never critical
  EXPECT_EQ(compute[1], 300 * kUs);   // rank 1's gemm of the steady iteration is
  EXPECT_EQ(communication[0], 50 * kUs);  // the transfer, once rank 1 was there
}

// A two-rank job whose rank 0 arrives at each all-reduce (stream 13) `wait_us` before rank 1.
// Rank 0 runs a 20 us kernel "small" before the all-reduce with nothing beside it, another
// beside the all-reduce's wait, where it takes `contended_us`, and a third beside its transfer;
// rank 1 runs one long kernel and arrives last (its all-reduce waits for nobody).
TraceAnalysis ContendedRank(int64_t rank, double wait_us, double contended_us) {
  testing::TraceBuilder b;
  int64_t corr = 1;
  constexpr double kTransferUs = 50;
  const char* allreduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  for (int k = 0; k < 4; ++k) {
    const double t0 = 1000.0 * k, arrive = t0 + 50 + (rank == 0 ? 0 : wait_us), end = t0 + 50 + wait_us + kTransferUs;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 1000);
    if (rank == 0) {
      b.Api("cudaLaunchKernel", t0 + 10, t0 + 12, corr);
      b.Kernel("small", 7, t0 + 20, t0 + 40, corr++);
      b.Api("cudaLaunchKernel", t0 + 13, t0 + 15, corr);
      b.Kernel(allreduce, 13, arrive, end, corr++);
      b.Api("cudaLaunchKernel", t0 + 16, t0 + 18, corr);
      b.Kernel("small", 7, t0 + 60, t0 + 60 + contended_us, corr++);
      b.Api("cudaLaunchKernel", t0 + 19, t0 + 20, corr);  // beside the transfer: neither kind
      b.Kernel("small", 7, end - 40, end - 20, corr++);
    } else {
      b.Api("cudaLaunchKernel", t0 + 10, t0 + 12, corr);
      b.Kernel("big", 7, t0 + 20, arrive, corr++);
      b.Api("cudaLaunchKernel", t0 + 13, t0 + 15, corr);
      b.Kernel(allreduce, 13, arrive, end, corr++);
    }
    b.Api("cudaDeviceSynchronize", t0 + 20, end + 2);
  }
  trace::Trace t = b.Build();
  t.meta.source_path = "rank" + std::to_string(rank);
  t.meta.rank = rank;
  t.meta.world_size = 2;
  AnalyzeOptions options;
  options.overhead.mode = OverheadOptions::Mode::kOff;
  auto a = AnalyzeTrace(std::move(t), options);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(a).value();
}

// The kernel beside rank 0's wait is measured against its kind's uncontended runs; the kernels
// beside a transfer (rank 1, which waited for nobody) are not counted.
TEST(JointReplayTest, KernelsBesideAWaitingCollectiveAreMeasuredAgainstTheirUncontendedKind) {
  const TraceAnalysis r0 = ContendedRank(0, 200, 30), r1 = ContendedRank(1, 200, 30);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  const JobAnalysis job = JobOf(ranks);
  ASSERT_EQ(job.collectives.size(), 4u);
  const JointSchedule s = JointReplay(job, ranks, std::vector<const std::vector<TimeNs>*>{&r0.traced_durations,
                                                                                         &r1.traced_durations});
  const WaitContention c0 = MeasureWaitContention(r0, s.ranks[0], s.arrival_limits[0]);
  EXPECT_EQ(c0.kernels, 1u);  // the steady iteration's "small" beside the wait, not the one beside the transfer
  EXPECT_EQ(c0.with_reference, 1u);
  EXPECT_EQ(c0.traced_ns, 30 * kUs);
  EXPECT_EQ(c0.uncontended_ns, 20 * kUs);
  const WaitContention c1 = MeasureWaitContention(r1, s.ranks[1], s.arrival_limits[1]);
  EXPECT_EQ(c1.kernels, 0u);
  // With no wait (both arrive together) nothing is beside one.
  const TraceAnalysis q0 = ContendedRank(0, 0, 30), q1 = ContendedRank(1, 0, 30);
  const std::vector<const TraceAnalysis*> q = {&q0, &q1};
  const JointSchedule sq = JointReplay(JobOf(q), q, std::vector<const std::vector<TimeNs>*>{&q0.traced_durations,
                                                                                           &q1.traced_durations});
  EXPECT_EQ(MeasureWaitContention(q0, sq.ranks[0], sq.arrival_limits[0]).kernels, 0u);
}

// In a joint replay the contention follows the waits: none left, the kernel beside it takes its
// kind's uncontended time; half of it left, half the excess; the traced waits, all of it.
TEST(JointReplayTest, TheContentionOfAWaitShrinksWithTheReplayedWait) {
  const TraceAnalysis r0 = ContendedRank(0, 200, 30), r1 = ContendedRank(1, 200, 30);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  const JobAnalysis job = JobOf(ranks);
  const JointSchedule identity = JointReplay(job, ranks, TracedDurations(ranks));
  const WaitContentionModel m = FindWaitContention(ranks, identity);
  ASSERT_EQ(m.ranks.size(), 2u);
  ASSERT_EQ(m.ranks[0].size(), 4u);  // one per iteration
  EXPECT_TRUE(m.ranks[1].empty());
  const uint32_t beside = m.ranks[0][r0.steady].node;
  EXPECT_EQ(m.ranks[0][r0.steady].traced_wait_ns, 200 * kUs);
  // The traced durations: the waits are the traced ones, nothing changes.
  EXPECT_EQ(WithContentionOfTheWaits(m, identity, TracedDurations(ranks))[0], r0.traced_durations);
  // Rank 1's long kernel shortened by `less_us`: rank 0 waits that much less.
  auto beside_after = [&](double less_us) {
    std::vector<TimeNs> d1 = r1.traced_durations;
    for (uint32_t v = 0; v < d1.size(); ++v) {
      if (r1.graph->nodes().kind[v] == graph::NodeKind::kGpuOp && r1.cpu_floors[v] != kCommKernelFloor) {
        d1[v] -= static_cast<TimeNs>(less_us * kUs);
      }
    }
    const std::vector<const std::vector<TimeNs>*> d = {&r0.traced_durations, &d1};
    return JointReplayWithContention(job, ranks, m, d).durations[0][beside];
  };
  EXPECT_EQ(beside_after(0), 30 * kUs);
  EXPECT_EQ(beside_after(100), 25 * kUs);
  EXPECT_EQ(beside_after(200), 20 * kUs);
}

TEST(JointReplayTest, SlowRankArgumentsAreChecked) {
  auto ok = ParseSlowRank("3=1.25");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->rank, 3);
  EXPECT_DOUBLE_EQ(ok->factor, 1.25);
  for (const char* bad : {"3", "x=2", "3=", "3=abc", "-1=2", "2=0", "2=-1", "2=1.5x"}) {
    EXPECT_FALSE(ParseSlowRank(bad).ok()) << bad;
  }
  const TraceAnalysis r0 = Rank(0, 100, 300), r1 = Rank(1, 300, 300);
  const std::vector<const TraceAnalysis*> ranks = {&r0, &r1};
  auto w = RunJobWhatIf(JobOf(ranks), ranks, {}, {{5, 2.0}});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("no trace of rank 5 was given (ranks given: 0, 1)"), std::string::npos)
      << w.status().message();
}

// A job read from its inputs (files, or a tar archive of them).
struct ReadJob {
  explicit ReadJob(const std::vector<std::string>& inputs) {
    auto sources = trace::ExpandTraceInputs(inputs);
    EXPECT_TRUE(sources.ok()) << sources.status().message();
    if (!sources.ok()) return;
    for (auto& source : *sources) {
      auto a = AnalyzeTrace(std::move(source), AnalyzeOptions{});
      EXPECT_TRUE(a.ok()) << a.status().message();
      if (a.ok()) all.push_back(std::move(a).value());
    }
    for (const auto& a : all) ranks.push_back(&a);
  }
  // Every rank's traced durations (identity) or analysis timeline.
  std::vector<const std::vector<TimeNs>*> Durations(bool traced) const {
    std::vector<const std::vector<TimeNs>*> d;
    for (const auto& a : all) d.push_back(traced ? &a.traced_durations : &a.durations);
    return d;
  }
  std::vector<TraceAnalysis> all;
  std::vector<const TraceAnalysis*> ranks;
};

// Real jobs: our H200 DDP and pipeline pairs and the 8-rank DLRM step replay jointly to their
// traces, per rank, within 1 %.
void ExpectJointIdentity(const ReadJob& r) {
  const JobAnalysis job = JobOf(r.ranks);
  const JointSchedule s = JointReplay(job, r.ranks, r.Durations(true));
  EXPECT_TRUE(s.converged);
  EXPECT_GT(s.members_bound, 0u);
  const std::vector<TimeNs> steady = JointSteadyTimes(r.ranks, s);
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const double measured = static_cast<double>(r.ranks[i]->measured_ns());
    EXPECT_LE(std::abs(static_cast<double>(steady[i]) - measured), 0.01 * measured) << r.ranks[i]->trace->meta.source_path;
  }
}

TEST(JointReplaySharedTest, RealJobsReplayJointlyWithinOnePercent) {
  EMO_REQUIRE_SHARED();
  for (const char* job : {"ddp_gpt", "pp_gpt"}) {
    SCOPED_TRACE(job);
    ExpectJointIdentity(ReadJob({SharedPath("traces/h200/" + std::string(job) + "_rank0.json.gz"),
                                 SharedPath("traces/h200/" + std::string(job) + "_rank1.json.gz")}));
  }
  const ReadJob dlrm({SharedPath("traces/param/dlrm_kineto_8ranks_v100.tar.gz")});
  ASSERT_EQ(dlrm.all.size(), 8u);
  ExpectJointIdentity(dlrm);
  // The straggler, rank 7, is on the job's critical path.
  const JobAnalysis job = JobOf(dlrm.ranks);
  const JointCriticalPath path = FindJointCriticalPath(job, dlrm.ranks, JointReplay(job, dlrm.ranks, dlrm.Durations(false)));
  ExpectContiguous(path);
  TimeNs on7 = 0;
  for (const auto& seg : path.segments) on7 += seg.rank == 7 ? seg.path.total() : 0;
  EXPECT_GT(on7, (path.to_ns - path.from_ns) / 5);
}

// On the H200 DDP pair, rank 0's collectives wait for rank 1, and the kernels beside those waits
// ran at least 1.2x their uncontended time (1.31x measured, BENCHMARKS.md, Order 10); rank 1's
// collectives hardly wait.
TEST(JointReplaySharedTest, TheDdpRankThatWaitsRanItsKernelsSlowerBesideTheWaits) {
  EMO_REQUIRE_SHARED();
  const ReadJob r({SharedPath("traces/h200/ddp_gpt_rank0.json.gz"), SharedPath("traces/h200/ddp_gpt_rank1.json.gz")});
  ASSERT_EQ(r.all.size(), 2u);
  const JointSchedule s = JointReplay(JobOf(r.ranks), r.ranks, r.Durations(true));
  const WaitContention c0 = MeasureWaitContention(r.all[0], s.ranks[0], s.arrival_limits[0]);
  const WaitContention c1 = MeasureWaitContention(r.all[1], s.ranks[1], s.arrival_limits[1]);
  EXPECT_GT(c0.with_reference, 400u);
  EXPECT_GT(static_cast<double>(c0.traced_ns), 1.2 * static_cast<double>(c0.uncontended_ns));
  EXPECT_LT(c1.kernels, c0.kernels / 10);
}

// On the H200 DDP pair, rank 1 made 1.5x slower slows rank 0 jointly; alone, rank 0 cannot see it.
TEST(JointReplaySharedTest, ADdpStragglerSlowsItsPeer) {
  EMO_REQUIRE_SHARED();
  const ReadJob r({SharedPath("traces/h200/ddp_gpt_rank0.json.gz"), SharedPath("traces/h200/ddp_gpt_rank1.json.gz")});
  ASSERT_EQ(r.all.size(), 2u);
  auto w = RunJobWhatIf(JobOf(r.ranks), r.ranks, {}, {{1, 1.5}});
  ASSERT_TRUE(w.ok()) << w.status().message();
  const TimeNs grew1 = w->ranks[1].whatif_ns - w->ranks[1].baseline_ns;
  const TimeNs grew0 = w->ranks[0].whatif_ns - w->ranks[0].baseline_ns;
  EXPECT_GT(grew1, 0);
  EXPECT_GT(grew0, grew1 / 2);
  const TraceAnalysis& r0 = r.all[0];
  EXPECT_EQ(w->ranks[0].alone_ns, IterationTimes(*r0.graph, r0.iterations, Replay(*r0.graph, r0.durations))[r0.steady]);
}

}  // namespace
}  // namespace emo::analysis
