// Clock plan for one analysed trace (`emo optimize`): packs of the steady iteration, each with
// time/energy options per clock from the device model, chosen so that the iteration's energy is
// least within (1 + max_slowdown) x its time at the default clock.
//
// Two graphs score a plan (docs/opt.md):
// - the pack graph: a chain of packs per GPU, each pack's duration its window at the default
//   clock plus the modelled stretch of its ops beyond their slack. The solvers of solver.h
//   (fast parametric min-cut, exact CBC MILP) solve it with a lower bound and give the
//   time-energy frontier;
// - the kernel graph: every op of a pack scaled by the pack's modelled time ratio, the whole
//   dependency graph replayed. This is the figure reported as the plan's time and energy.
// The solver's plan is tightened until its kernel-graph replay meets the target, then refined
// by a greedy descent scored on the kernel graph; descents from all-default, from the best
// static clock and from the pass-level plan compete, and the cheapest plan meeting the target
// on the kernel graph wins (so it is never worse than the static best).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"
#include "emo/model/device.h"
#include "emo/model/kernel_work.h"
#include "emo/opt/solver.h"
#include "emo/packing/packer.h"

namespace emo::opt {

struct TracePlanOptions {
  double max_slowdown = 0.02;
  // Plan so that the target holds with every op's modelled extra time (its time at a clock minus
  // its time at the default clock) larger by this fraction; every figure the plan reports is then scored with the
  // model's own times again. 0: the target holds for the model's times exactly (the plan may sit
  // where the iteration's slack runs out: TracePlan::sensitivity).
  double time_margin = 0;
  packing::PackOptions packing;
  // The pack-graph solver whose plan seeds the search; with kFast, the exact solver also runs
  // (when built with CBC) on pack graphs of at most `exact_check_max_packs` packs to report
  // the fast solver's gap to it.
  SolverKind solver = SolverKind::kFast;
  size_t exact_check_max_packs = 2000;
  double exact_time_limit_s = 60.0;
  // A clock switch runs the first this-long of the pack it starts at the previous pack's clock
  // (time and energy, in the kernel-graph scoring every plan and baseline gets; the pack-graph
  // solver does not see it). 0: switches are free.
  TimeNs switch_latency_ns = 0;
  // Where packing.min_pack_ns comes from, for the report.
  std::string min_pack_source = "default (10 ms)";
  // A rank of a job replayed jointly (analysis::JointReplay's durations and end_bounds for it):
  // per node, the durations its plans are timed with (a collective kernel that waited runs only
  // its own tail) and the ends the other ranks' arrivals hold its collective kernels to (held
  // where the joint replay put them). Its waits for its peers become slack a lower clock may
  // use. Empty: the rank alone (its collective kernels keep their measured waits).
  std::span<const TimeNs> joint_durations, joint_end_bounds;
  // And per node, the latest start that delays no peer (analysis::JointSchedule::arrival_limits):
  // a plan that starts a collective kernel later is charged that delay on its iteration time
  // (its peers wait for it that much longer).
  std::span<const TimeNs> joint_arrival_limits;
};

struct PlannedPack {
  packing::Pack pack;
  MegaHertz clock{0.0};
  double busy_s_default = 0;  // modelled busy time at the default clock
  double busy_s = 0;          // at the chosen clock
  // Per op of pack.ops: its modelled time at `clock` minus at the default clock (the model's
  // per-kind stretch of its timeline duration; an op that starts within the switch latency of a
  // switch into the pack runs at the previous pack's clock); what `emo run --actuator emulate`
  // adds.
  std::vector<TimeNs> op_extra_ns;
};

struct PlanPoint {
  TimeNs time_ns = 0;
  double energy_j = 0;
};

struct TracePlan {
  std::string device;
  std::string model_source;
  PlanPoint baseline;            // every pack at the default clock
  PlanPoint plan;
  PlanPoint static_best;
  MegaHertz static_best_clock{0.0};
  // Pass-level baseline: one clock per phase (runs of ops launched by one thread: forward,
  // backward, optimizer), searched like the plan; 0 phases when not computed.
  PlanPoint pass_level;
  size_t pass_level_phases = 0;
  // Dependency-blind per-kernel baseline: memory-bound ops at their own energy-optimal clock,
  // the rest at the default clock; may break the latency target (that is its point).
  PlanPoint per_kernel_blind;
  TimeNs deadline_ns = 0;
  // Each packing planned (time-window, dependency, and phases when computed): its best plan and
  // pack count; `packing` names the one the plan comes from (the cheapest).
  struct PackingResult {
    std::string name;
    PlanPoint point;
    size_t packs = 0;
  };
  std::vector<PackingResult> packings;
  std::string packing;
  TimeNs min_pack_ns = 0;
  std::string min_pack_source;
  TimeNs switch_latency_ns = 0;
  // The plan's packs; adjacent ones of a device planned at the same clock are merged into one
  // (`merged_packs` counts the merges).
  std::vector<PlannedPack> packs;
  size_t merged_packs = 0;
  size_t switches = 0;           // clock changes per iteration (cyclic)
  // The pack graph and its solvers.
  struct PackGraph {
    std::string solver;              // "fast" or "exact"
    Outcome outcome = Outcome::kInfeasible;
    double solve_ms = 0;
    double gap_pct = -1;             // solver's plan vs its lower bound (-1: no bound)
    double exact_gap_pct = -1;       // fast plan vs CBC's (-1: not run)
    std::string exact_outcome;       // CBC's outcome when it ran
    PlanPoint baseline;              // all default, on the pack graph
    PlanPoint solved;                // the solver's plan on the pack graph
    PlanPoint solved_replayed;       // the same plan replayed on the kernel graph
    PlanPoint plan;                  // the final plan on the pack graph
    size_t tightenings = 0;          // deadline cuts until the replay met the target
  } pack_graph;
  std::vector<PlanPoint> frontier;   // the pack graph's time-energy frontier (solver)
  // The power limit. The model's average power of the steady iteration at the default clock
  // (measured durations), and the clock the limiter holds it at: the default clock when that
  // power is within the device's cap power, else the highest clock where it is. The trace's GPU
  // durations ran at that clock, every energy above is computed with them there, and a higher
  // planned clock changes nothing.
  double default_demand_w = 0;
  MegaHertz throttle_clock{0.0};
  // Where throttle_clock comes from: "model" (the cap test above), "trace" (an EMO trace's
  // NVML clock reads over its traced iterations, RecordedClock in trace_plan.cc) or "step" (the
  // clock a measured step implies for a GPU-bound loop whose GPU ops ran slower than traced,
  // analysis::OverheadModel::gpu_scale; StepClock in trace_plan.cc).
  std::string throttle_clock_source = "model";
  // "trace" and "step" only: the factor on the device's activity_scale that puts the model's power of the
  // steady iteration at the recorded clock at the cap power (the limiter held it) or at most
  // there (the default clock held); every energy of the plan is computed with it.
  double trace_power_scale = 1.0;
  // The trace's matrix-multiply kernel time and how much of it the device's work curves see
  // (model::CoverageOf); work_curves: the device file has them (DeviceModel::work_power).
  model::WorkCoverage work_coverage;
  bool work_curves = false;
  // The device model the plan's energies were computed with.
  model::DeviceModel PlannedDevice(const model::DeviceModel& d) const {
    model::DeviceModel out = d;
    out.activity_scale *= trace_power_scale;
    return out;
  }
  bool power_capped(const model::DeviceModel& d) const { return throttle_clock < d.default_clock; }
  // The plan's clocks scored at the ends of the overhead correction's band (empty without one):
  // the baseline and the plan when the real timeline is at that end.
  struct BandEnd {
    double factor = 1;  // on the correction's CPU scale
    PlanPoint baseline, plan;
  };
  std::vector<BandEnd> band;
  // The plan's clocks replayed with every op's modelled extra time (its time at the planned clock
  // minus its time at the default clock) multiplied by each of kSensitivityFactors: how close the
  // plan sits to where the iteration's slack runs out. The replay is exact only where the model's
  // time ratios are, and those are measured at the clocks the power limiter picks (devices/*.json,
  // kinds), not at the low clocks a slack-rich plan goes to.
  struct Sensitivity {
    double extra_factor = 1;
    PlanPoint plan;
  };
  std::vector<Sensitivity> sensitivity;
  double time_margin = 0;            // TracePlanOptions::time_margin the plan was made with
  // `emo optimize --time-margin auto`: the smaller margins of kAutoTimeMargins planned first,
  // whose plans were fragile (FragileTime), none if the first was not; unset when the margin was given.
  std::optional<std::vector<double>> auto_fragile_margins;
  bool joint = false;                // timed as a rank of its job (TracePlanOptions::joint_*)
  std::string plan_from;             // which start the final plan descended from
  double solve_ms = 0;
  size_t replays = 0;
};

Result<TracePlan> PlanTrace(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                            const TracePlanOptions& options);

// `base` (per node of the plan's trace) with each planned op's modelled extra time at its pack's
// clock (PlannedPack::op_extra_ns) added: the durations the plan runs the iteration with.
std::vector<TimeNs> PlannedDurations(const TracePlan& plan, std::span<const TimeNs> base);

// The factors TracePlan::sensitivity is scored at.
inline constexpr double kSensitivityFactors[] = {1.1, 1.25, 1.5};
// A plan's time is fragile when, with its extra time x kFragileFactor, the iteration misses the
// target and is slower than the planned slowdown x kFragileFactor by more than kFragileExcessPct
// points: the extra time stops falling in slack, so a small error in the model's times costs far
// more than itself (a CPU-bound loop planned at its lowest clocks: BENCHMARKS.md, "`emulate`: a
// plan's predicted slowdown against the one measured"). Returns that sensitivity entry, or null.
inline constexpr double kFragileFactor = 1.25;
inline constexpr double kFragileExcessPct = 1.0;
const TracePlan::Sensitivity* FragileTime(const TracePlan& plan);
// `emo optimize --time-margin auto` plans with each of these in turn and keeps the first plan
// that is not fragile (the last when every one is): on the H200 the training loop's fragile plans
// missed `emulate`'s measured step by up to 8 points, its plans at 0.25 by at most 4.5
// (BENCHMARKS.md, "`emulate` on an H200 again", "The paired reading on an H100").
inline constexpr double kAutoTimeMargins[] = {0.0, 0.1, 0.25, 0.5, 1.0};
// What a fragile plan's warning says (the plan report's and the policy's).
std::string FragileTimeWarning(const TracePlan& plan, const TracePlan::Sensitivity& fragile);

// 100 x (baseline energy - p's) / baseline energy, and 100 x (p's time - baseline's) / baseline's.
double SavingPct(const PlanPoint& baseline, const PlanPoint& p);
double SlowdownPct(const PlanPoint& baseline, const PlanPoint& p);
// The latency target as a slowdown: 100 x (deadline / baseline time - 1).
double TargetPct(const TracePlan& plan);
// The plan's saving and slowdown over its timeline and both ends of the overhead correction's
// band: {least, most}.
std::array<double, 2> SavingRangePct(const TracePlan& plan);
std::array<double, 2> SlowdownRangePct(const TracePlan& plan);

// A plan with what it rests on, for reports and the policy: the analysis it was made from, the
// device model, and whether the trace's GPU is the one the model describes.
struct PlannedTrace {
  const analysis::TraceAnalysis* analysis = nullptr;
  const model::DeviceModel* device = nullptr;
  TracePlan plan;
  model::DeviceCheck device_check;
  bool device_mismatch_allowed = false;  // planned although the GPUs differ (user's choice)
};

}  // namespace emo::opt
