// The ranks of one job planned against the job's time (docs/opt.md, "The ranks of a job"): each
// rank with its peers held where the joint replay of the analysis timelines puts them, every
// rank's plan then replayed jointly at once, and the ranks' target cut until the job meets it.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "emo/analysis/job.h"
#include "emo/base/status.h"
#include "emo/model/device.h"
#include "emo/opt/trace_plan.h"

namespace emo::opt {

struct JobPlan {
  std::vector<TracePlan> plans;            // per rank, in the order given
  TimeNs baseline_ns = 0, planned_ns = 0;  // the slowest rank's steady iteration, replayed jointly
  double target = 0;                       // the job's (options.max_slowdown)
  double rank_target = 0;                  // what the ranks were planned to
  bool jointly = true;                     // the ranks timed with their peers (false: each alone)
  bool fell_back = false;                  // the joint plans missed the target; per rank came closer
  bool converged = true;                   // every joint replay reached its fixed point
  struct Round {
    double rank_target = 0;
    TimeNs job_ns = 0;
    bool per_rank = false;
  };
  std::vector<Round> rounds;
  bool met() const { return static_cast<double>(planned_ns) <= static_cast<double>(baseline_ns) * (1.0 + target); }
};

// `per_rank`: plan each rank alone (its collective kernels keep their measured waits) and only
// check the job. `progress(rank index, rank target, timed with peers)` runs before each rank's
// planning (may be empty).
Result<JobPlan> PlanJob(const analysis::JobAnalysis& job, std::span<const analysis::TraceAnalysis* const> ranks,
                        const model::DeviceModel& device, const TracePlanOptions& options, bool per_rank,
                        const std::function<void(size_t, double, bool)>& progress);

}  // namespace emo::opt
