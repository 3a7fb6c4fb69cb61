// The ranks of one job replayed as one: each rank's graph, joined at the collectives AnalyzeJob
// matched, with rendezvous semantics (research/trace-formats-and-replay.md, item 6). A collective
// kernel starts when its own rank gets there; its transfer starts when the last member has
// arrived; each member then runs its own tail (measured: its end - the last arrival) and ends no
// earlier than that arrival plus its tail. A member that ended before the last arrival (a root,
// a sender whose message was buffered) did not wait and keeps its measured duration.
//
// So a rank made slower delays the collectives it arrives at last, and every peer with them: the
// slack between GPUs is in the replay, not frozen in the measured kernel times. With the traced
// durations the joint replay reproduces the traces (the identity check); with each rank's
// corrected durations, the overhead correction is done through the collectives (a rank whose
// CPU was slowed by the profiler no longer makes its peers wait in the corrected timeline).
//
// Solved as a fixed point: every rank is replayed with the arrivals known so far as bounds on
// its members' ends, the arrivals are taken again from the replayed starts, until they no
// longer change. Each pass can only move arrivals later, so it converges in at most one pass
// per collective in a chain of them; matchings that contradict each other (a cycle) are cut
// off after that many passes and reported as not converged.
#pragma once

#include <cstdint>
#include <string>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/analysis/job.h"
#include "emo/analysis/job_exchange.h"
#include "emo/analysis/replay.h"
#include "emo/analysis/slack.h"
#include "emo/analysis/whatif.h"
#include "emo/base/status.h"

namespace emo::analysis {

struct JointSchedule {
  std::vector<Schedule> ranks;  // one per analysis given, in its order
  std::vector<TimeNs> arrival;  // per job.collectives: the last member's replayed start (job clock)
  size_t passes = 0;
  bool converged = false;
  size_t members_bound = 0;  // member kernels whose end waits for the last arrival
  // What the last pass replayed, per rank: the durations (a member that waited runs its tail)
  // and the end bounds (INT64_MIN: none).
  std::vector<std::vector<TimeNs>> durations, end_bounds;
  // Per rank and node: for a collective kernel, its collective's arrival (the last member's
  // start) in the rank's own time; INT64_MAX elsewhere. A rank that starts one later delays
  // every member that waits for it.
  std::vector<std::vector<TimeNs>> arrival_limits;
  // Per job.collectives: the member (its index in MatchedCollective::members) whose replayed
  // start is the arrival, the first of them on a tie; -1 where no member was replayed.
  std::vector<int64_t> last_member;
};

// `analyses` are the job's ranks (any order; each found in `job` by its trace's rank);
// `durations[i]` the durations to replay for analyses[i] (per node of its graph). A rank the job
// does not hold is replayed on its own. With an exchange, `analyses` are this process's share of
// the job's ranks; arrivals, last members and members_bound are the job's (the same in every
// process), the per-rank fields this process's.
JointSchedule JointReplay(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                          std::span<const std::vector<TimeNs>* const> durations, JobExchange* exchange = nullptr);

// The critical path of the job's steady iteration across ranks: from the end of the slowest
// rank's steady iteration, walked back along binding constraints (FindCriticalPath); at a
// collective kernel that waited for its last member, on to that member on its own rank, and so
// on back to the iteration's start (on the job clock).
struct JointPathSegment {
  int64_t rank = -1;
  TimeNs from_ns = 0, to_ns = 0;  // on the job clock
  size_t nodes = 0;               // on the path
  CriticalPath path;              // with an exchange, its nodes only in the process of `rank`
};
struct JointCriticalPath {
  int64_t sink_rank = -1;             // the slowest rank, where the walk starts
  TimeNs from_ns = 0, to_ns = 0;      // its steady iteration, on the job clock
  std::vector<JointPathSegment> segments;  // in time order
  CriticalPath::Stop stop = CriticalPath::Stop::kComplete;  // of the earliest segment
  size_t hops = 0;                    // rank changes along the path
};
// With an exchange (and `s` from JointReplay with it), every process gets the whole path: each
// segment is walked where its rank is and handed to the others.
JointCriticalPath FindJointCriticalPath(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                                        const JointSchedule& s, JobExchange* exchange = nullptr);
nlohmann::json JointCriticalPathJson(const JointCriticalPath& p);

// Each rank's steady iteration (TraceAnalysis::steady) on a joint schedule.
std::vector<TimeNs> JointSteadyTimes(std::span<const TraceAnalysis* const> analyses, const JointSchedule& s);

// The contention of waiting collectives. A collective kernel that waits for its peers holds SMs
// while it spins, and the rank's other kernels that ran beside the wait ran slower (ddp_gpt
// rank 0: 1.31x, BENCHMARKS.md, Order 10). Found on schedule `s` of a rank (the identity joint
// replay: the traced times) with `arrival_limits` (its JointSchedule::arrival_limits): every
// kernel, not a communication kernel, that overlapped a collective kernel's wait (from its start
// to its collective's last arrival) on the same device, with the wait it overlapped most, and
// the median of the kernels of the same name and launch configuration on the rank that
// overlapped no communication kernel (at least kMinUncontendedKernels of them; never more than
// the kernel's own time; -1 when too few).
inline constexpr size_t kMinUncontendedKernels = 3;
struct ContendedKernel {
  uint32_t node;
  TimeNs traced_ns;            // its duration on `s`
  TimeNs uncontended_ns;       // its kind's uncontended median, or -1
  uint32_t wait_node;          // the collective kernel whose wait it overlapped most
  TimeNs traced_wait_ns;       // that kernel's wait on `s`
};
std::vector<ContendedKernel> KernelsBesideWaits(const TraceAnalysis& a, const Schedule& s,
                                               std::span<const TimeNs> arrival_limits);

// Those of the rank's steady iteration, summed (what `emo analyze` reports per rank).
struct WaitContention {
  size_t kernels = 0;         // of the steady iteration, beside a collective's wait
  size_t with_reference = 0;  // of them, whose kind ran uncontended often enough to compare
  TimeNs traced_ns = 0;       // the time of those with a reference, as traced
  TimeNs uncontended_ns = 0;  // the same kernels at their kind's uncontended median
};
WaitContention MeasureWaitContention(const TraceAnalysis& a, const Schedule& s, std::span<const TimeNs> arrival_limits);

// The contention in the corrected and planned joint replays: it follows the waits. Per analysis,
// the kernels beside a traced wait that have an uncontended reference (FindWaitContention, from
// the identity joint replay); on a joint replay `s` of `durations`, each such kernel keeps the
// share of its traced excess over the uncontended time that its wait keeps (replayed wait /
// traced wait, at most 1), its excess scaled with its own duration (a plan's clock)
// (WithContentionOfTheWaits). JointReplayWithContention replays, applies that, and replays again
// (one step, not a fixed point: the second replay's waits are not fed back). With the traced
// durations the waits are the traced ones and nothing changes.
// Each analysis's traced durations, as JointReplay takes them (the identity).
std::vector<const std::vector<TimeNs>*> TracedDurations(std::span<const TraceAnalysis* const> analyses);
struct WaitContentionModel {
  std::vector<std::vector<ContendedKernel>> ranks;  // per analysis
};
WaitContentionModel FindWaitContention(std::span<const TraceAnalysis* const> analyses, const JointSchedule& identity);
std::vector<std::vector<TimeNs>> WithContentionOfTheWaits(const WaitContentionModel& m, const JointSchedule& s,
                                                         std::span<const std::vector<TimeNs>* const> durations);
JointSchedule JointReplayWithContention(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                                        const WaitContentionModel& m,
                                        std::span<const std::vector<TimeNs>* const> durations,
                                        JobExchange* exchange = nullptr);

// The durations of analyses[i] with every GPU op of the rank `rank` (but its collective kernels,
// whose time the joint replay derives) multiplied by `factor`: a straggler.
std::vector<TimeNs> SlowRankDurations(const JobAnalysis& job, const TraceAnalysis& a, const std::vector<TimeNs>& base,
                                      double factor);

// `emo whatif --slow-rank R=FACTOR` on a job: every GPU op of rank R but its collective kernels
// takes FACTOR times as long (a straggler), the ranks replayed jointly on their analysis
// timelines (with any --scale rules applied to every rank, before and after alike).
struct SlowRank {
  int64_t rank = -1;
  double factor = 1.0;
};
// Parses "R=FACTOR" (R >= 0, FACTOR > 0).
Result<SlowRank> ParseSlowRank(const std::string& text);

struct JobWhatIf {
  struct Rank {
    int64_t rank = -1;
    TimeNs baseline_ns = 0;  // steady iteration, joint replay without the slow ranks
    TimeNs whatif_ns = 0;    // with them
    TimeNs alone_ns = 0;     // its own graph alone with them (what a per-rank what-if would say)
  };
  std::vector<Rank> ranks;  // in the order of the analyses
  TimeNs job_baseline_ns = 0, job_whatif_ns = 0;  // the slowest rank's
  bool converged = true;
};
Result<JobWhatIf> RunJobWhatIf(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                               const std::vector<ScaleRule>& rules, const std::vector<SlowRank>& slow);

// `emo analyze`'s "joint_replay" object: per rank and for the job, the steady iteration measured,
// replayed on its own and replayed jointly (identity), and on the analysis timeline alone and
// jointly (the correction through the collectives). With an exchange: the same object, in every
// process, from this process's share of the ranks.
nlohmann::json JointReplayJson(const JobAnalysis& job, std::span<const TraceAnalysis* const> analyses,
                               JobExchange* exchange = nullptr);

}  // namespace emo::analysis
