// emo optimize: per-pack SM clocks that cut energy within a latency target.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "progress.h"
#include "emo/analysis/analyze.h"
#include "emo/analysis/job.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/model/device.h"
#include "emo/opt/job_plan.h"
#include "emo/opt/trace_plan.h"
#include "emo/policy/policy.h"
#include "emo/report/html_report.h"
#include "emo/report/plan_report.h"
#include "emo/trace/trace.h"

namespace emo::cli {
namespace {

struct OptimizeArgs {
  std::vector<std::string> traces;
  bool per_rank = false;
  std::string device;
  std::string devices_dir;
  double max_slowdown = 0.02;
  std::string time_margin = "auto";  // a fraction, or "auto"
  double min_pack_ms = 0;             // 0: 20 switch latencies (below)
  double switch_latency_us = -1;      // -1: the device file's
  std::string solver = "auto";
  std::string policy, frontier, json, report, iteration;
  bool allow_device_mismatch = false;
  OverheadFlags overhead;
};

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
  const bool auto_margin = args.time_margin == "auto";
  if (!auto_margin) plan_options.time_margin = std::stod(args.time_margin);  // checked by the option
  // The minimum pack: as given, else 20 switch latencies (research/gpu-dvfs-and-nvml.md section
  // 3.4: a switch then costs at most ~5 % of a pack's saving), else 10 ms.
  const double latency_us = args.switch_latency_us >= 0 ? args.switch_latency_us : device->switch_latency_us;
  plan_options.switch_latency_ns = static_cast<TimeNs>(std::max(0.0, latency_us) * 1e3);
  if (args.min_pack_ms > 0) {
    plan_options.packing.min_pack_ns = static_cast<TimeNs>(args.min_pack_ms * 1e6);
    plan_options.min_pack_source = "--min-pack-ms";
  } else if (latency_us > 0) {
    plan_options.packing.min_pack_ns = static_cast<TimeNs>(20 * latency_us * 1e3);
    plan_options.min_pack_source =
        args.switch_latency_us >= 0
            ? fmt::format("20 x --switch-latency-us {:g}", latency_us)
            : fmt::format("20 x the switch latency of device model {} ({:g} us{})", device->name, latency_us,
                          device->provenance.count("switch_latency_us") &&
                                  device->provenance.at("switch_latency_us").assumption
                              ? ", an assumption"
                              : "");
  } else {
    plan_options.packing.min_pack_ns = 10'000'000;
    plan_options.min_pack_source = fmt::format("10 ms: device model {} gives no switch latency", device->name);
  }
  plan_options.solver = args.solver == "exact" ? opt::SolverKind::kExact : opt::SolverKind::kFast;
  // Every trace is read and checked against the device model before any is planned: a trace
  // from another GPU is refused before work is spent, and no output is half written.
  std::vector<analysis::TraceAnalysis> analyses;
  std::vector<model::DeviceCheck> checks;
  auto read = AnalyzeInputs("optimize", args.traces, options);
  if (!read.ok()) return Fail("optimize", read.status());
  for (auto& item : *read) {
    const std::string path = item.trace->meta.source_path;
    model::DeviceCheck check = model::CheckTraceGpu(*device, trace::GpuNamesUsed(*item.trace));
    if (check.outcome == model::DeviceCheck::Outcome::kMismatch && !args.allow_device_mismatch) {
      return Fail("optimize", InvalidArgument(fmt::format(
                                  "{}: {}. Pass the model of the trace's GPU (`emo devices` lists them), or "
                                  "--allow-device-mismatch to plan with this one anyway (every output then says so)",
                                  path, check.message)));
    }
    analyses.push_back(std::move(item));
    checks.push_back(std::move(check));
  }
  // The ranks of one job are planned against the job's time (opt::PlanJob).
  std::optional<analysis::JobAnalysis> job;
  const std::vector<const analysis::TraceAnalysis*> ranks = analysis::RanksOf(analyses);
  if (analyses.size() >= 2 &&
      std::all_of(analyses.begin(), analyses.end(), [](const auto& a) { return a.trace->meta.rank >= 0; })) {
    auto j = analysis::AnalyzeJob(ranks);
    if (!j.ok()) return FailUsage("optimize", j.status());
    if (!j->collectives.empty()) job = std::move(j).value();
  }
  std::vector<opt::TracePlan> plans;
  std::optional<opt::JobPlan> job_plan;
  std::vector<double> fragile_margins;  // --time-margin auto
  for (const double margin : opt::kAutoTimeMargins) {
    if (auto_margin) plan_options.time_margin = margin;
    Progress line;
    auto progress = [&](size_t i, double target, bool with_peers) {
      line.Say(fmt::format("emo optimize: planning {} ({} of {}{}{})", analyses[i].trace->meta.source_path, i + 1,
                           analyses.size(),
                           with_peers ? fmt::format(", timed with its job's other ranks, target +{:.2f} %", 100.0 * target)
                                      : "",
                           auto_margin ? fmt::format(", time margin {:g}", margin) : ""));
    };
    plans.clear();
    job_plan.reset();
    if (job) {
      auto jp = opt::PlanJob(*job, ranks, *device, plan_options, args.per_rank, progress);
      if (!jp.ok()) return Fail("optimize", jp.status());
      job_plan = std::move(jp).value();
      plans = std::move(job_plan->plans);
    } else {
      for (size_t i = 0; i < analyses.size(); ++i) {
        progress(i, args.max_slowdown, false);
        auto plan = opt::PlanTrace(analyses[i], *device, plan_options);
        if (!plan.ok()) return Fail("optimize", plan.status());
        plans.push_back(std::move(plan).value());
      }
    }
    // Auto: a larger margin only while some plan is fragile.
    const bool fragile = std::any_of(plans.begin(), plans.end(), [](const auto& p) { return opt::FragileTime(p); });
    if (!auto_margin || !fragile || margin == std::end(opt::kAutoTimeMargins)[-1]) break;
    fragile_margins.push_back(margin);
  }
  if (auto_margin) {
    for (auto& p : plans) p.auto_fragile_margins = fragile_margins;
  }
  std::vector<opt::PlannedTrace> planned;
  for (size_t i = 0; i < analyses.size(); ++i) {
    const bool overridden = checks[i].outcome == model::DeviceCheck::Outcome::kMismatch;
    planned.push_back({&analyses[i], &*device, std::move(plans[i]), std::move(checks[i]), overridden});
  }
  nlohmann::json job_json;
  if (job_plan) job_json = report::JobPlanToJson(*job_plan, job->collectives.size());
  // The text goes to stdout unless a machine-readable output does.
  const bool text = args.json != "-" && args.policy != "-" && args.frontier != "-";
  nlohmann::json all = nlohmann::json::array();
  for (const auto& pt : planned) {
    if (text) fmt::print("{}", report::PlanText(pt));
    all.push_back(report::PlanToJson(pt));
    if (!args.report.empty()) all.back()["report"] = report::ReportData(pt);
  }
  if (!args.policy.empty()) {
    Status st = WriteJson(args.policy, policy::PolicyJson(planned, job_plan ? &job_json : nullptr));
    if (!st.ok()) return Fail("optimize", st);
  }
  if (!args.frontier.empty()) {
    Status st = WriteFile(args.frontier, report::FrontierCsv(planned));
    if (!st.ok()) return Fail("optimize", st);
  }
  if (text && job_plan) fmt::print("{}", report::JobPlanText(*job_plan, analyses.size(), job->collectives.size()));
  nlohmann::json out = all.size() == 1 ? all[0] : nlohmann::json{{"traces", all}};
  if (job_plan) out["job"] = std::move(job_json);
  if (!args.report.empty()) {
    auto page = report::ReportHtmlFromOptimizeJson(out);
    if (!page.ok()) return Fail("optimize", page.status());
    Status st = WriteFile(args.report, *page);
    if (!st.ok()) return Fail("optimize", st);
    if (text) fmt::print("wrote {} (the plan report: open it in a browser)\n", args.report);
  }
  Status st = WriteJson(args.json, out);
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
  cmd->add_option("traces", args->traces,
                  "Trace files (one per rank); a folder or a tar archive (.tar, .tar.gz, .tgz) stands for the traces "
                  "in it")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--device", args->device, "Device model name or file (see `emo devices`)")->required();
  AddDevicesDirFlag(cmd, args->devices_dir);
  cmd->add_option("--max-slowdown", args->max_slowdown,
                  "Latency target, a fraction: iteration time <= (1 + S) x its time at the default clock\n"
                  "(0.02 = 2 % slower)")
      ->check(Fraction());
  cmd->add_option("--time-margin", args->time_margin,
                  "Plan so that the latency target also holds if every op's extra time at its planned clock is\n"
                  "this fraction larger than the device model says (0.25: 25 % larger, 0 to 4); the figures\n"
                  "reported are the model's own. auto (the default): plan at 0, 0.1, 0.25, 0.5, 1 in turn and\n"
                  "keep the first plan that is not fragile (every rank's, for a job). 0: the target holds for\n"
                  "the model's times exactly, and a plan may sit where the iteration's slack runs out (see the\n"
                  "sensitivity line and the fragile-plan warning)")
      ->check(InRangeOr(0, 4, "auto"))
      ->default_str("auto");
  cmd->add_option("--min-pack-ms", args->min_pack_ms,
                  "Minimum pack length (ms) (default: 20 clock-switch latencies, from --switch-latency-us or the\n"
                  "device file; the H200's is not measured: 500 us is an assumption, so 10 ms)")
      ->check(Positive())
      ->default_str("20x-switch-latency");
  cmd->add_option("--switch-latency-us", args->switch_latency_us,
                  "Clock-switch latency (us), overriding the device file's; the minimum pack is 20 of them")
      ->check(Positive())
      ->default_str("device-file");
  cmd->add_option("--solver", args->solver,
                  "Pack-graph solver: fast (parametric min-cut; auto) or exact (CBC MILP). With auto/fast, CBC\n"
                  "also runs on graphs of up to 2000 packs to report the fast solver's gap to it")
      ->check(CLI::IsMember({"auto", "exact", "fast"}));
  cmd->add_option("--policy", args->policy, "Write the clock policy JSON");
  cmd->add_option("--frontier", args->frontier, "Write the pack graph's time-energy Pareto frontier (CSV)");
  AddIterationFlag(cmd, args->iteration);
  cmd->add_flag("--allow-device-mismatch", args->allow_device_mismatch,
                "Plan even when the trace was recorded on another GPU than the device model describes\n"
                "(refused by default); every output then says so");
  AddOverheadFlags(cmd, args->overhead);
  cmd->add_flag("--per-rank", args->per_rank,
                "Plan each rank of a job on its own (its collective kernels keep their measured waits); by\n"
                "default the ranks of one job are each timed with the others held where the joint replay puts\n"
                "them, so a rank's waits for its peers are slack, and every plan is checked jointly at once");
  cmd->add_option("--report", args->report,
                  "Write the plan report: one self-contained HTML page (per-GPU timeline of the steady iteration\n"
                  "with packs coloured by planned clock, slack and the critical path; the time-energy frontier\n"
                  "with the plan and every baseline; energy by kernel class; the summary table). With --json,\n"
                  "the JSON also carries the page's data (\"report\"), for `emo report` to redraw it");
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  RefuseTwoOnStdout(cmd, {"--json", "--policy", "--frontier"});
  cmd->callback([args, &exit_code] { exit_code = RunOptimize(*args); });
}

}  // namespace emo::cli
