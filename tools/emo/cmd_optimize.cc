// emo optimize: per-pack SM clocks that cut energy within a latency target.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/analysis/analyze.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/model/device.h"
#include "emo/opt/trace_plan.h"
#include "emo/policy/policy.h"

namespace emo::cli {
namespace {

struct OptimizeArgs {
  std::vector<std::string> traces;
  std::string device;
  std::string devices_dir;
  double max_slowdown = 0.02;
  double min_pack_ms = 10.0;
  std::string solver = "auto";
  std::string policy, frontier, json, iteration;
  OverheadFlags overhead;
};

double Pct(double part, double whole) { return whole != 0 ? 100.0 * part / whole : 0.0; }

int RunOptimize(const OptimizeArgs& args) {
  if (args.solver == "exact" && !opt::HaveExactSolver()) {
    return Fail("optimize", Unsupported("--solver exact: this EMO was built without COIN-OR CBC"));
  }
  auto device = model::FindDevice(args.device, args.devices_dir.empty() ? model::DefaultDevicesDir() : args.devices_dir);
  if (!device.ok()) return Fail("optimize", device.status());
  analysis::AnalyzeOptions options;
  options.iteration_regex = args.iteration;
  auto overhead = ToOverheadOptions(args.overhead);
  if (!overhead.ok()) return Fail("optimize", overhead.status());
  options.overhead = std::move(overhead).value();
  opt::TracePlanOptions plan_options;
  plan_options.max_slowdown = args.max_slowdown;
  plan_options.packing.min_pack_ns = static_cast<TimeNs>(args.min_pack_ms * 1e6);
  plan_options.solver = args.solver == "exact" ? opt::SolverKind::kExact : opt::SolverKind::kFast;
  nlohmann::json all = nlohmann::json::array();
  for (const auto& path : args.traces) {
    fmt::print(stderr, "emo optimize: reading {} ...\n", path);
    auto a = analysis::AnalyzeTrace(path, options);
    if (!a.ok()) return Fail("optimize", a.status());
    fmt::print(stderr, "emo optimize: planning {} ...\n", path);
    auto plan = opt::PlanTrace(*a, *device, plan_options);
    if (!plan.ok()) return Fail("optimize", plan.status());
    const auto& b = plan->baseline;
    const auto& p = plan->plan;
    const auto& s = plan->static_best;
    nlohmann::json j;
    j["trace"] = path;
    j["timeline"] = a->corrected() ? "corrected" : "traced";
    j["baseline"] = {{"time_us", NsToUs(b.time_ns)}, {"energy_j", b.energy_j}};
    j["plan"] = {{"time_us", NsToUs(p.time_ns)},
                 {"energy_j", p.energy_j},
                 {"saving_pct", Pct(b.energy_j - p.energy_j, b.energy_j)},
                 {"slowdown_pct", Pct(static_cast<double>(p.time_ns - b.time_ns), static_cast<double>(b.time_ns))},
                 {"packs", plan->packs.size()},
                 {"switches", plan->switches}};
    j["static_best"] = {{"clock_mhz", plan->static_best_clock.value()},
                        {"time_us", NsToUs(s.time_ns)},
                        {"energy_j", s.energy_j},
                        {"saving_pct", Pct(b.energy_j - s.energy_j, b.energy_j)}};
    if (plan->pass_level_phases > 0) {
      const auto& pl = plan->pass_level;
      const auto& kb = plan->per_kernel_blind;
      j["baselines"] = {
          {"pass_level", {{"phases", plan->pass_level_phases}, {"time_us", NsToUs(pl.time_ns)}, {"energy_j", pl.energy_j},
                          {"saving_pct", Pct(b.energy_j - pl.energy_j, b.energy_j)}}},
          {"per_kernel_blind", {{"time_us", NsToUs(kb.time_ns)}, {"energy_j", kb.energy_j},
                                {"saving_pct", Pct(b.energy_j - kb.energy_j, b.energy_j)},
                                {"slowdown_pct", Pct(static_cast<double>(kb.time_ns - b.time_ns), static_cast<double>(b.time_ns))},
                                {"meets_target", kb.time_ns <= plan->deadline_ns}}}};
    }
    const auto& pg = plan->pack_graph;
    auto gap_or_null = [](double g) { return g < 0 ? nlohmann::json(nullptr) : nlohmann::json(g); };
    j["plan"]["from"] = plan->plan_from;
    j["plan"]["scored_on"] = "kernel graph (every op scaled by its kernel class's time ratio at its pack's clock, replayed)";
    j["pack_graph"] = {{"baseline", {{"time_us", NsToUs(pg.baseline.time_ns)}, {"energy_j", pg.baseline.energy_j}}},
                       {"plan", {{"time_us", NsToUs(pg.plan.time_ns)}, {"energy_j", pg.plan.energy_j}}},
                       {"solver_plan", {{"time_us", NsToUs(pg.solved.time_ns)}, {"energy_j", pg.solved.energy_j},
                                        {"replayed_time_us", NsToUs(pg.solved_replayed.time_ns)},
                                        {"replayed_energy_j", pg.solved_replayed.energy_j}}},
                       {"deadline_tightenings", pg.tightenings}};
    j["solver"] = {{"name", pg.solver},
                   {"outcome", opt::OutcomeName(pg.outcome)},
                   {"solve_ms", pg.solve_ms},
                   {"gap_pct", gap_or_null(pg.gap_pct)},
                   {"exact_gap_pct", gap_or_null(pg.exact_gap_pct)},
                   {"exact_outcome", pg.exact_outcome.empty() ? nlohmann::json(nullptr) : nlohmann::json(pg.exact_outcome)},
                   {"plan_ms", plan->solve_ms},
                   {"replays", plan->replays}};
    j["model"] = {{"device", plan->device}, {"source", plan->model_source},
                  {"note", "energies are predictions of the device model, not measurements"}};
    if (args.json != "-") {
      fmt::print("{} ({} timeline, steady iteration {}; energies predicted by device model {})\n", path,
                 a->corrected() ? "corrected" : "traced", a->iterations.iterations[a->steady].name, plan->model_source);
      fmt::print("  {:<22} {:>12} {:>12} {:>9}\n", "", "time us", "energy J", "saving %");
      fmt::print("  {:<22} {:>12.1f} {:>12.3f} {:>9}\n", "all at default clock", NsToUs(b.time_ns), b.energy_j, "-");
      fmt::print("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}\n",
                 fmt::format("static {:.0f} MHz", plan->static_best_clock.value()), NsToUs(s.time_ns), s.energy_j,
                 Pct(b.energy_j - s.energy_j, b.energy_j));
      if (plan->pass_level_phases > 0) {
        const auto& pl = plan->pass_level;
        const auto& kb = plan->per_kernel_blind;
        fmt::print("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}\n",
                   fmt::format("pass-level ({})", Plural(plan->pass_level_phases, "phase")), NsToUs(pl.time_ns), pl.energy_j, Pct(b.energy_j - pl.energy_j, b.energy_j));
        fmt::print("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}   {}\n", "per-kernel, no slack", NsToUs(kb.time_ns), kb.energy_j,
                   Pct(b.energy_j - kb.energy_j, b.energy_j), kb.time_ns <= plan->deadline_ns ? "" : "(misses the target)");
      }
      fmt::print("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}   ({}, {} per iteration; from the {})\n", "EMO plan",
                 NsToUs(p.time_ns), p.energy_j, Pct(b.energy_j - p.energy_j, b.energy_j), Plural(plan->packs.size(), "pack"),
                 Plural(plan->switches, "switch", "switches"), plan->plan_from);
      fmt::print("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}   (pack graph; {} solver {}, {:.1f} ms{}{})\n", "  on the pack graph",
                 NsToUs(pg.plan.time_ns), pg.plan.energy_j, Pct(pg.baseline.energy_j - pg.plan.energy_j, pg.baseline.energy_j),
                 pg.solver, opt::OutcomeName(pg.outcome), pg.solve_ms,
                 pg.gap_pct >= 0 ? fmt::format(", {:.3f} % above its bound", pg.gap_pct) : "",
                 pg.exact_gap_pct > -1 && !pg.exact_outcome.empty() ? fmt::format(", {:+.3f} % vs CBC ({})", pg.exact_gap_pct, pg.exact_outcome) : "");
    }
    if (!args.policy.empty()) {
      Status st = WriteJson(args.policy, policy::PolicyJson(*a, *plan));
      if (!st.ok()) return Fail("optimize", st);
    }
    if (!args.frontier.empty()) {
      std::string csv = "pack_graph_time_us,energy_j\n";
      for (const auto& pt : plan->frontier) csv += fmt::format("{:.3f},{:.6f}\n", NsToUs(pt.time_ns), pt.energy_j);
      Status st = WriteFile(args.frontier, csv);
      if (!st.ok()) return Fail("optimize", st);
    }
    all.push_back(std::move(j));
  }
  Status st = WriteJson(args.json, all.size() == 1 ? all[0] : nlohmann::json{{"traces", all}});
  return st.ok() ? 0 : Fail("optimize", st);
}

}  // namespace

void SetupOptimize(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<OptimizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "optimize",
      "Plan one SM clock per pack of the steady iteration so that its predicted energy is least\n"
      "within (1 + max-slowdown) x its time at the default clock; compare with all-default and the\n"
      "best single static clock. Energies are predictions of the device model (see `emo devices`).");
  cmd->add_option("traces", args->traces, "Trace files (one per rank)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--device", args->device, "Device model name or file (see `emo devices`)")->required();
  AddDevicesDirFlag(cmd, args->devices_dir);
  cmd->add_option("--max-slowdown", args->max_slowdown,
                  "Latency target, a fraction: iteration time <= (1 + S) x its time at the default clock\n"
                  "(0.02 = 2 % slower)")
      ->check(Fraction());
  cmd->add_option("--min-pack-ms", args->min_pack_ms,
                  "Minimum pack length (ms); the H200 clock-switch latency is not measured, 10 ms is an assumption")
      ->check(Positive());
  cmd->add_option("--solver", args->solver,
                  "Pack-graph solver: fast (parametric min-cut; auto) or exact (CBC MILP). With auto/fast, CBC\n"
                  "also runs on graphs of up to 2000 packs to report the fast solver's gap to it")
      ->check(CLI::IsMember({"auto", "exact", "fast"}));
  cmd->add_option("--policy", args->policy, "Write the clock policy JSON");
  cmd->add_option("--frontier", args->frontier, "Write the pack graph's time-energy Pareto frontier (CSV)");
  AddIterationFlag(cmd, args->iteration);
  AddOverheadFlags(cmd, args->overhead);
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  RefuseTwoOnStdout(cmd, {"--json", "--policy", "--frontier"});
  cmd->callback([args, &exit_code] { exit_code = RunOptimize(*args); });
}

}  // namespace emo::cli
