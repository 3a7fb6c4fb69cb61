// Clock plan for one analysed trace (`emo optimize`): packs of the steady iteration, each with
// time/energy options per clock from the device model, chosen so that the iteration's energy is
// least within (1 + max_slowdown) x its time at the default clock. Time comes from replaying
// the kernel graph with every op of a pack scaled by the pack's modelled time ratio; energy is
// each pack's busy energy plus the clock-dependent idle power over the rest of its window.
//
// Interim search (documented in docs/opt.md): a greedy descent over per-pack clocks that
// re-scores every move by replaying the kernel graph, started from all-default and from the
// best single static clock (so the plan is never worse than the static best). It does not yet
// use the pack-graph solvers of solver.h; their gap is not reported here.
#pragma once

#include <string>
#include <vector>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"
#include "emo/model/device.h"
#include "emo/packing/packer.h"

namespace emo::opt {

struct TracePlanOptions {
  double max_slowdown = 0.02;
  packing::PackOptions packing;
};

struct PlannedPack {
  packing::Pack pack;
  MegaHertz clock{0.0};
  double busy_s_default = 0;  // modelled busy time at the default clock
  double busy_s = 0;          // at the chosen clock
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
  std::vector<PlannedPack> packs;
  size_t switches = 0;           // clock changes per iteration (cyclic)
  std::vector<PlanPoint> frontier;  // points the descent from all-default visited
  double solve_ms = 0;
  size_t replays = 0;
};

Result<TracePlan> PlanTrace(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                            const TracePlanOptions& options);

}  // namespace emo::opt
