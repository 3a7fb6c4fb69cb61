// Pipeline-parallel planning (Perseus' setting): the DAG of every microbatch's forward and
// backward on every stage, built from a per-stage, per-instruction, per-clock table of
// measured time and energy (`stage,instruction,frequency,time,energy`, seconds and joules, as
// in Perseus' stage_profile/*.csv), and its time–energy frontier.
//
// The DAG is Perseus' (lowtime/perseus): nodes are instructions; each stage's instructions are
// chained in schedule order (one GPU per stage); Forward(s, m) → Forward(s+1, m) and
// Backward(s+1, m) → Backward(s, m) are the P2P dependencies; no communication time. Energy
// is problem.h's accounting with P_idle = the GPU's blocking power (Perseus measured 83.64 W on
// A100, 70.38 W on A40), charged per GPU over the iteration.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/status.h"
#include "emo/opt/problem.h"
#include "emo/opt/solver.h"

namespace emo::opt {

// The measured options of every stage's forward and backward (time in ns, knob = MHz).
struct PipelineProfile {
  std::vector<std::vector<Option>> forward, backward;  // [stage] → options, clock descending
  int32_t max_clock_mhz = 0;
  int32_t num_stages() const { return static_cast<int32_t>(forward.size()); }
};

// Parses the CSV text; `name` (the file) appears in errors with the line number.
Result<PipelineProfile> ParsePipelineProfile(std::string_view csv, std::string_view name);
Result<PipelineProfile> ReadPipelineProfile(const std::string& path);

enum class PipelineSchedule { k1F1B, kGPipe };

struct PipelineSpec {
  int32_t stages = 0;
  int32_t microbatches = 0;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  double idle_power_w = 0.0;
  // When > 0, every option's time is floored to a multiple of this (Perseus/lowtime's
  // `unit_time`, with Python's float floor division), so that makespans and the idle term use
  // the same quantised times Perseus' published frontiers use. 0 keeps the measured ns.
  TimeNs time_unit_ns = 0;
};

struct PipelineInstruction {
  int32_t stage = 0;
  int32_t microbatch = 0;
  bool forward = true;
};

struct PipelineProblem {
  Problem problem;
  std::vector<PipelineInstruction> instructions;  // per node
};

// Per stage, the schedule's instruction order (1F1B as DeepSpeed/lowtime's
// Synchronous1F1B: min(S−s−1, M) warm-up forwards, then alternate, then the remaining
// backwards; GPipe: all forwards, then the backwards in reverse microbatch order).
std::vector<PipelineInstruction> StageOrder(const PipelineSpec& spec, int32_t stage);

Result<PipelineProblem> BuildPipelineProblem(const PipelineProfile& profile, const PipelineSpec& spec);

struct PipelinePlanOptions {
  SolverKind solver = SolverKind::kFast;
  double max_slowdown = 0.0;     // target: makespan ≤ (1 + s) × all-max-clock makespan
  TimeNs frontier_step_ns = 0;   // 0: the time unit if set, else (slowest − fastest)/max_points
  size_t max_points = 2000;
  double time_limit_s = 60.0;    // exact solver: for the whole frontier (FrontierOptions)
  bool keep_plans = false;
  std::function<void(size_t done, size_t total)> progress;  // as FrontierOptions::progress
};

struct PipelinePlan {
  Evaluation baseline;            // every instruction at the table's maximum clock
  Frontier frontier;              // .partial: the time limit cut the sweep short
  FrontierPoint fastest;          // the frontier's fastest point
  double fastest_saving_pct = 0;  // vs baseline energy
  TimeNs target_ns = 0;
  Solution target;                // min energy with makespan ≤ target_ns
  double target_saving_pct = 0;
  double solve_ms = 0;            // frontier + target solve
  std::string solver;
};

Result<PipelinePlan> PlanPipeline(const PipelineProblem& pipeline, const PipelinePlanOptions& options);

}  // namespace emo::opt
