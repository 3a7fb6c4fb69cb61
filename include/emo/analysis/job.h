// Several ranks of one job: their traces checked to belong together, their collectives and
// point-to-point transfers matched across ranks, and what each rank spent waiting in them for
// its peers (the slack between GPUs), with the rank that kept the others waiting most.
//
// A collective's NCCL kernel starts when its rank arrives and spins until the last member
// arrives; the transfer runs after that. So, per matched collective: its members' start times
// (on one clock), the last arrival, each member's wait (last arrival - own start) and the
// transfer (latest end - last arrival). Matching (research/trace-formats-and-replay.md, item 6):
// by process group and Seq when every member has it; otherwise in order within the process
// group (point-to-point: within each sender -> receiver pair), aligned so that message sizes and
// names agree (one rank's window may hold transfers the other's does not). Ranks on different
// hosts are put on one clock by the median offset of their matched collectives' ends, which
// finish together on every member.
//
// The job replayed as one graph, with rendezvous semantics at these collectives: joint_replay.h.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"

namespace emo::analysis {

// One collective or point-to-point kernel of one rank, as matching sees it.
struct RankCollective {
  std::string name;           // "allreduce", "send", "recv", ...
  std::string process_group;
  int64_t group_size = -1;
  std::vector<int64_t> group_ranks;  // global ranks of the group, when the trace says
  int64_t seq = -1;
  int64_t nelems = -1;        // In msg nelems
  int64_t peer = -1;          // send: Dst Rank, recv: Src Rank (-1: not given)
  TimeNs start = 0, end = 0;  // the kernel, on its rank's clock
  uint32_t op = UINT32_MAX;   // its GpuOpId in the rank's trace (UINT32_MAX: not from a trace)
};

// One rank's part of a job.
struct RankInput {
  std::string path;
  int64_t rank = -1;
  int64_t world_size = -1;
  std::string host;  // "" when the trace does not say (Kineto): taken as one host with the others
  TimeNs to_wall_ns = 0;  // added to the trace's times to put them on its host's wall clock (EMO traces)
  std::vector<RankCollective> collectives;  // in start order
};

// The ranks' parts of the traces (collective kernels with their metadata).
RankInput RankInputOf(const TraceAnalysis& a);
// A rank's part as JSON and back (what the processes of `emo analyze --mpi` exchange).
nlohmann::json RankInputToJson(const RankInput& r);
RankInput RankInputFromJson(const nlohmann::json& j);

struct MatchedCollective {
  std::string name;           // the collective's, or "send/recv"
  std::string process_group;
  struct Member {
    int64_t rank;
    TimeNs start, end;        // on the job's clock (the first rank's host)
    uint32_t op = UINT32_MAX; // RankCollective::op
  };
  std::vector<Member> members;
  size_t last = 0;            // the member that arrived last
  TimeNs transfer_ns = 0;     // latest end - last arrival
};

struct RankWait {
  int64_t rank = -1;
  std::string path;
  std::string host;
  TimeNs clock_offset_ns = 0;   // added to this rank's times to put them on the job's clock
  TimeNs trace_to_job_ns = 0;   // added to its trace's own times: to_wall_ns + clock_offset_ns
  size_t collectives = 0;       // matched collectives it took part in
  TimeNs waited_ns = 0;         // waiting in them for its peers
  size_t last_to_arrive = 0;    // times it was the one the others waited for
  TimeNs kept_waiting_ns = 0;   // the others' waits in those
  size_t unmatched = 0;         // its collective kernels no peer's matched
};

struct JobAnalysis {
  int64_t world_size = -1;
  std::vector<int64_t> missing_ranks;
  std::vector<MatchedCollective> collectives;
  std::vector<RankWait> ranks;  // in rank order
  int64_t critical_rank = -1;   // the rank that kept the others waiting longest (-1: none did)
  std::vector<std::string> notes;
};

// Matches the ranks of one job. Refuses (InvalidArgument) a file given twice, a rank given twice,
// ranks of different jobs (their world sizes differ) and traces without a rank; reports the
// ranks it was not given.
Result<JobAnalysis> AnalyzeJob(const std::vector<RankInput>& ranks);

// The same from the ranks' analyses (RankInputOf each).
Result<JobAnalysis> AnalyzeJob(std::span<const TraceAnalysis* const> ranks);
// The analyses as the job functions take them.
std::vector<const TraceAnalysis*> RanksOf(const std::vector<TraceAnalysis>& all);

// `emo analyze`'s "job" object.
nlohmann::json JobToJson(const JobAnalysis& job);

}  // namespace emo::analysis
