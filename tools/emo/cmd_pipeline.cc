// `emo pipeline`: plans per-instruction SM clocks for a pipeline-parallel training iteration
// from a per-stage time/energy table (Perseus' setting) and prints its time–energy frontier.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "progress.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/opt/pipeline.h"

namespace emo::cli {

namespace {

struct PipelineFlags {
  std::string profile;
  int stages = 0;
  int microbatches = 0;
  std::string schedule = "1f1b";
  double idle_w = -1.0;
  double max_slowdown = 0.0;
  double time_unit_s = 0.0;
  double frontier_step_s = 0.0;
  std::string solver = "fast";
  double time_limit_s = 60.0;
  std::string frontier;
  std::string json;
};

// Perseus' measured GPU power while blocked on P2P, keyed by the table's top clock.
double DefaultIdlePower(int32_t max_clock_mhz, std::string& why) {
  if (max_clock_mhz == 1410) {
    why = "A100-SXM blocking power measured by Perseus (top clock 1410 MHz)";
    return 83.64;
  }
  if (max_clock_mhz == 1740) {
    why = "A40 blocking power measured by Perseus (top clock 1740 MHz)";
    return 70.38;
  }
  return -1.0;
}

Status WriteFrontierCsv(const std::string& path, const opt::Frontier& f) {
  std::string out = "time_s,energy_j,lower_bound_j\n";
  for (const auto& pt : f.points) {
    out += fmt::format("{:.9f},{:.6f},{:.6f}\n", NsToS(pt.makespan_ns), pt.energy_j, pt.lower_bound_j);
  }
  return WriteFile(path, out);
}

int RunPipeline(const PipelineFlags& flags) {
  const char* kCmd = "pipeline";
  auto profile = opt::ReadPipelineProfile(flags.profile);
  if (!profile.ok()) return Fail(kCmd, profile.status());
  opt::PipelineSpec spec;
  spec.stages = flags.stages;
  spec.microbatches = flags.microbatches;
  spec.schedule = flags.schedule == "gpipe" ? opt::PipelineSchedule::kGPipe : opt::PipelineSchedule::k1F1B;
  std::string idle_why = "--idle-w";
  spec.idle_power_w = flags.idle_w;
  if (spec.idle_power_w < 0) {
    spec.idle_power_w = DefaultIdlePower(profile->max_clock_mhz, idle_why);
    if (spec.idle_power_w < 0) {
      return Fail(kCmd, InvalidArgument(fmt::format(
                            "{}: unknown GPU (top clock {} MHz): pass --idle-w W, the power a GPU draws "
                            "while it waits for its pipeline neighbours",
                            flags.profile, profile->max_clock_mhz)));
    }
  }
  spec.time_unit_ns = std::llround(flags.time_unit_s * 1e9);
  auto pipeline = opt::BuildPipelineProblem(*profile, spec);
  if (!pipeline.ok()) return Fail(kCmd, pipeline.status());

  opt::PipelinePlanOptions po;
  po.solver = flags.solver == "exact" ? opt::SolverKind::kExact : opt::SolverKind::kFast;
  po.max_slowdown = flags.max_slowdown;
  po.frontier_step_ns = std::llround(flags.frontier_step_s * 1e9);
  if (po.frontier_step_ns == 0) po.frontier_step_ns = spec.time_unit_ns;
  po.time_limit_s = flags.time_limit_s;
  po.keep_plans = false;
  // Progress of a long exact sweep (on a terminal).
  auto plan = [&] {
    Progress progress;
    po.progress = [&](size_t done, size_t total) {
      progress.Say(fmt::format("emo pipeline: exact frontier: {} of {} solved (limit {:g} s)", done,
                               Plural(total, "deadline"), flags.time_limit_s));
    };
    return opt::PlanPipeline(*pipeline, po);
  }();
  if (!plan.ok()) return Fail(kCmd, plan.status());

  const auto& f = plan->frontier;
  double worst_gap = 0.0;
  for (const auto& pt : f.points) {
    if (pt.has_bound && pt.lower_bound_j > 0) {
      worst_gap = std::max(worst_gap, 100.0 * (pt.energy_j - pt.lower_bound_j) / pt.lower_bound_j);
    }
  }
  const auto& base = plan->baseline;
  // The summary goes to stderr when the JSON or the CSV goes to stdout, so that stays parseable.
  std::FILE* out = flags.json == "-" || flags.frontier == "-" ? stderr : stdout;
  fmt::print(out, "emo pipeline: {}, {} x {} ({}), {}\n", flags.profile,
             Plural(static_cast<uint64_t>(spec.stages), "stage"),
             Plural(static_cast<uint64_t>(spec.microbatches), "microbatch", "microbatches"), flags.schedule,
             Plural(pipeline->problem.num_nodes(), "instruction"));
  fmt::print(out, "  idle power {:.2f} W per GPU ({}); times {}\n", spec.idle_power_w, idle_why,
             spec.time_unit_ns > 0 ? fmt::format("floored to {} s (Perseus accounting)", flags.time_unit_s)
                                   : std::string("as measured"));
  fmt::print(out, "  {:<28} {:>10} {:>12} {:>8}\n", "", "time (s)", "energy (J)", "saving");
  fmt::print(out, "  {:<28} {:>10.4f} {:>12.1f} {:>8}\n", fmt::format("all at {} MHz", profile->max_clock_mhz),
             NsToS(base.makespan_ns), base.energy_j, "-");
  fmt::print(out, "  {:<28} {:>10.4f} {:>12.1f} {:>7.2f}%\n", f.partial ? "EMO fastest found" : "EMO fastest",
             NsToS(plan->fastest.makespan_ns), plan->fastest.energy_j, plan->fastest_saving_pct);
  if (plan->target.has_plan()) {
    fmt::print(out, "  {:<28} {:>10.4f} {:>12.1f} {:>7.2f}%\n",
               fmt::format("EMO within +{:g}% time", 100 * flags.max_slowdown), NsToS(plan->target.makespan_ns),
               plan->target.energy_j, plan->target_saving_pct);
  }
  fmt::print(out, "  frontier: {}, {:.4f}-{:.4f} s; worst gap to the relaxation bound {:.3f}%\n",
             Plural(f.points.size(), "point"), NsToS(f.points.front().makespan_ns), NsToS(f.points.back().makespan_ns),
             worst_gap);
  if (f.partial) {
    fmt::print(out, "  frontier PARTIAL: the {:g} s time limit ran out after {} of {} (spread over the range)\n",
               flags.time_limit_s, f.deadlines_solved, Plural(f.deadlines, "deadline"));
  }
  fmt::print(out, "  solved in {:.1f} ms ({} solver, {})\n", plan->solve_ms, plan->solver,
             po.solver == opt::SolverKind::kExact ? Plural(f.iterations, "MILP solve") : Plural(f.iterations, "min cut"));

  if (!flags.frontier.empty()) {
    Status s = WriteFrontierCsv(flags.frontier, f);
    if (!s.ok()) return Fail(kCmd, s);
  }
  if (!flags.json.empty()) {
    nlohmann::json j;
    j["profile"] = flags.profile;
    j["stages"] = spec.stages;
    j["microbatches"] = spec.microbatches;
    j["schedule"] = flags.schedule;
    j["idle_power_w"] = spec.idle_power_w;
    j["time_unit_s"] = NsToS(spec.time_unit_ns);
    j["accounting"] = "E = sum of measured option energies + idle_power_w * (stages * time - busy time)";
    j["graph"] = {{"nodes", pipeline->problem.num_nodes()}, {"edges", pipeline->problem.num_edges()}};
    j["baseline"] = {{"clock_mhz", profile->max_clock_mhz},
                     {"time_s", NsToS(base.makespan_ns)},
                     {"energy_j", base.energy_j}};
    j["fastest"] = {{"time_s", NsToS(plan->fastest.makespan_ns)},
                    {"energy_j", plan->fastest.energy_j},
                    {"saving_pct", plan->fastest_saving_pct},
                    {"lower_bound_j", plan->fastest.lower_bound_j}};
    nlohmann::json target = {{"max_slowdown", flags.max_slowdown},
                             {"deadline_s", NsToS(plan->target_ns)},
                             {"outcome", opt::OutcomeName(plan->target.outcome)}};
    if (plan->target.has_plan()) {
      target["time_s"] = NsToS(plan->target.makespan_ns);
      target["energy_j"] = plan->target.energy_j;
      target["saving_pct"] = plan->target_saving_pct;
      target["gap_pct"] = plan->target.gap_pct();
      nlohmann::json clocks = nlohmann::json::array();
      for (int32_t s = 0; s < spec.stages; ++s) clocks.push_back(nlohmann::json::array());
      for (uint32_t i = 0; i < pipeline->problem.num_nodes(); ++i) {
        const auto& ins = pipeline->instructions[i];
        clocks[static_cast<size_t>(ins.stage)].push_back(
            pipeline->problem.options(i)[plan->target.plan[i]].knob);
      }
      target["clocks_mhz"] = clocks;  // per stage, in schedule order
    }
    j["target"] = target;
    j["frontier_points"] = f.points.size();
    j["frontier_worst_gap_pct"] = worst_gap;
    j["frontier_partial"] = f.partial;
    j["frontier_deadlines"] = {{"solved", f.deadlines_solved}, {"total", f.deadlines}};
    j["solver"] = {{"name", plan->solver}, {"iterations", f.iterations}, {"frontier_ms", f.solve_ms}};
    if (po.solver == opt::SolverKind::kExact) j["solver"]["time_limit_s"] = flags.time_limit_s;
    j["solve_ms"] = plan->solve_ms;
    Status s = WriteJson(flags.json, j);
    if (!s.ok()) return Fail(kCmd, s);
  }
  return 0;
}

}  // namespace

void SetupPipeline(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PipelineFlags>();
  CLI::App* cmd = app.add_subcommand(
      "pipeline",
      "Plan per-instruction SM clocks for pipeline-parallel training (Perseus' setting): builds the DAG of\n"
      "every microbatch's forward and backward on every stage from a measured per-stage, per-clock table\n"
      "(columns stage,instruction,frequency,time,energy in s and J), then computes the whole time-energy\n"
      "frontier. Energy is scored on the measured table entries; idle power is charged per GPU over the\n"
      "iteration. Baseline: every instruction at the table's top clock.");
  cmd->add_option("--profile", flags->profile, "Stage profile CSV (e.g. Perseus' stage_profile/*.csv)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--stages", flags->stages, "Pipeline stages (one GPU each); must match the profile")
      ->required()
      ->check(AtLeast(1));
  cmd->add_option("--microbatches", flags->microbatches, "Microbatches per iteration")
      ->required()
      ->check(AtLeast(1));
  cmd->add_option("--schedule", flags->schedule, "Pipeline schedule")->check(CLI::IsMember({"1f1b", "gpipe"}));
  cmd->add_option("--idle-w", flags->idle_w,
                  "Power (W) of a GPU waiting on its neighbours, charged per GPU over the iteration (default:\n"
                  "Perseus' measured 83.64 W for A100 tables (top clock 1410 MHz), 70.38 W for A40 (1740 MHz))")
      ->check(NonNegative())
      ->default_str("");
  cmd->add_option("--max-slowdown", flags->max_slowdown,
                  "Latency target, a fraction: iteration time <= (1 + S) x the all-top-clock time (0.02 = 2 %)")
      ->check(Fraction());
  cmd->add_option("--time-unit", flags->time_unit_s,
                  "Floor every measured time to a multiple of this many seconds, as Perseus' solver does\n"
                  "(0.001 for its A100 frontiers, 0.0001 for A40); 0 keeps measured times")
      ->check(NonNegative());
  cmd->add_option("--frontier-step", flags->frontier_step_s,
                  "Spacing (s) of the deadlines the frontier is solved at (default: the time unit, else 1/2000\n"
                  "of the frontier's span)")
      ->check(NonNegative())
      ->default_str("");
  cmd->add_option("--solver", flags->solver, "fast (parametric min-cut) or exact (CBC MILP; small cases only)")
      ->check(CLI::IsMember({"fast", "exact"}));
  cmd->add_option("--time-limit", flags->time_limit_s,
                  "Exact solver: seconds for the whole frontier (the latency target is solved first); when\n"
                  "they run out the frontier is partial and the output says so")
      ->check(Positive());
  cmd->add_option("--frontier", flags->frontier, "Write the frontier as CSV (time_s,energy_j,lower_bound_j)");
  cmd->add_option("--json", flags->json, "Write the result as JSON ('-' for stdout)");
  AddUsageCheck(cmd, [cmd, flags] {
    if (flags->solver != "exact" && cmd->count("--time-limit") > 0) {
      throw CLI::ValidationError("--time-limit bounds the exact solver only: add --solver exact, or drop it");
    }
  });
  RefuseTwoOnStdout(cmd, {"--json", "--frontier"});
  cmd->callback([flags, &exit_code]() { exit_code = RunPipeline(*flags); });
}

}  // namespace emo::cli
