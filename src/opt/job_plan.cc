#include "emo/opt/job_plan.h"

#include <algorithm>

#include "emo/analysis/joint_replay.h"

namespace emo::opt {
namespace {

// The plans stop being cut after this many plannings (the last at +0 %).
constexpr int kJobRounds = 5;

TimeNs Slowest(const std::vector<TimeNs>& t) { return t.empty() ? 0 : *std::max_element(t.begin(), t.end()); }

}  // namespace

Result<JobPlan> PlanJob(const analysis::JobAnalysis& job, std::span<const analysis::TraceAnalysis* const> ranks,
                        const model::DeviceModel& device, const TracePlanOptions& options, bool per_rank,
                        const std::function<void(size_t, double, bool)>& progress) {
  std::vector<const std::vector<TimeNs>*> timelines;
  for (const auto* a : ranks) timelines.push_back(&a->durations);
  // The contention of waiting collectives follows the replayed waits (joint_replay.h).
  const analysis::WaitContentionModel contention =
      analysis::FindWaitContention(ranks, analysis::JointReplay(job, ranks, analysis::TracedDurations(ranks)));
  const analysis::JointSchedule joint = analysis::JointReplayWithContention(job, ranks, contention, timelines);
  JobPlan out;
  out.target = options.max_slowdown;
  out.jointly = !per_rank;
  out.converged = joint.converged;
  out.baseline_ns = Slowest(analysis::JointSteadyTimes(ranks, joint));

  auto plan_ranks = [&](double target, bool with_peers, std::vector<TracePlan>* plans) -> Status {
    plans->clear();
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (progress) progress(i, target, with_peers);
      TracePlanOptions o = options;
      o.max_slowdown = target;
      if (with_peers) {
        o.joint_durations = joint.durations[i];
        o.joint_end_bounds = joint.end_bounds[i];
        o.joint_arrival_limits = joint.arrival_limits[i];
      }
      EMO_ASSIGN_OR_RETURN(TracePlan p, PlanTrace(*ranks[i], device, o));
      plans->push_back(std::move(p));
    }
    return Status::Ok();
  };
  // The slowest rank's steady iteration with every rank's plan at once, replayed jointly.
  auto job_time = [&](const std::vector<TracePlan>& plans) {
    std::vector<std::vector<TimeNs>> with_plans;
    for (size_t i = 0; i < plans.size(); ++i) with_plans.push_back(PlannedDurations(plans[i], ranks[i]->durations));
    std::vector<const std::vector<TimeNs>*> d;
    for (const auto& w : with_plans) d.push_back(&w);
    const analysis::JointSchedule after = analysis::JointReplayWithContention(job, ranks, contention, d);
    out.converged = out.converged && after.converged;
    return Slowest(analysis::JointSteadyTimes(ranks, after));
  };

  out.rank_target = options.max_slowdown;
  EMO_RETURN_IF_ERROR(plan_ranks(out.rank_target, out.jointly, &out.plans));
  out.planned_ns = job_time(out.plans);
  out.rounds.push_back({out.rank_target, out.planned_ns, per_rank});
  if (per_rank) return out;
  // Each rank met the target with its peers held still; all moving at once they can add up.
  const TimeNs allowed = static_cast<TimeNs>(static_cast<double>(out.baseline_ns) * (1.0 + options.max_slowdown));
  for (int round = 1; round < kJobRounds && out.planned_ns > allowed && out.rank_target > 0; ++round) {
    const double over = static_cast<double>(out.planned_ns - out.baseline_ns) /
                        static_cast<double>(std::max<TimeNs>(1, allowed - out.baseline_ns));
    out.rank_target = round + 1 == kJobRounds ? 0.0 : out.rank_target / std::max(1.25, over);
    EMO_RETURN_IF_ERROR(plan_ranks(out.rank_target, true, &out.plans));
    out.planned_ns = job_time(out.plans);
    out.rounds.push_back({out.rank_target, out.planned_ns, false});
  }
  // Still over: each rank planned alone, if that comes closer.
  if (out.planned_ns > allowed) {
    std::vector<TracePlan> alone;
    EMO_RETURN_IF_ERROR(plan_ranks(options.max_slowdown, false, &alone));
    const TimeNs t = job_time(alone);
    out.rounds.push_back({options.max_slowdown, t, true});
    if (t < out.planned_ns) {
      out.plans = std::move(alone);
      out.planned_ns = t;
      out.rank_target = options.max_slowdown;
      out.fell_back = true;
    }
  }
  return out;
}

}  // namespace emo::opt
