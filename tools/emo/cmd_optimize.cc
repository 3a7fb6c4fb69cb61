// emo optimize: per-pack SM clocks that cut energy within a latency target.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/analysis/analyze.h"
#include "emo/analysis/job.h"
#include "emo/analysis/joint_replay.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/model/device.h"
#include "emo/opt/trace_plan.h"
#include "emo/policy/policy.h"
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
  double min_pack_ms = 0;        // 0: 20 switch latencies (below)
  double switch_latency_us = -1;  // -1: the device file's
  std::string solver = "auto";
  std::string policy, frontier, json, iteration;
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
  // The ranks of one job: each timed with its peers held where the joint replay puts them.
  std::vector<const analysis::TraceAnalysis*> ranks;
  std::vector<const std::vector<TimeNs>*> timelines;
  for (const auto& a : analyses) {
    ranks.push_back(&a);
    timelines.push_back(&a.durations);
  }
  std::optional<analysis::JobAnalysis> job;
  analysis::JointSchedule joint;
  if (analyses.size() >= 2) {
    std::vector<analysis::RankInput> inputs;
    for (const auto& a : analyses) inputs.push_back(analysis::RankInputOf(a));
    if (std::all_of(inputs.begin(), inputs.end(), [](const auto& r) { return r.rank >= 0; })) {
      auto j = analysis::AnalyzeJob(inputs);
      if (!j.ok()) return Fail("optimize", j.status()) + 1;
      if (!j->collectives.empty()) {
        job = std::move(j).value();
        joint = analysis::JointReplay(*job, ranks, timelines);
      }
    }
  }
  // Plans every rank with the latency target `slowdown`.
  auto plan_ranks = [&](double slowdown, bool joint_rank, std::vector<opt::PlannedTrace>* out) -> Status {
    out->clear();
    for (size_t i = 0; i < analyses.size(); ++i) {
      fmt::print(stderr, "emo optimize: planning {} ({} of {}{}) ...\n", analyses[i].trace->meta.source_path, i + 1,
                 analyses.size(),
                 joint_rank ? fmt::format(", timed with its job's other ranks, target +{:.2f} %", 100.0 * slowdown) : "");
      opt::TracePlanOptions rank_options = plan_options;
      rank_options.max_slowdown = slowdown;
      if (joint_rank) {
        rank_options.joint_durations = joint.durations[i];
        rank_options.joint_end_bounds = joint.end_bounds[i];
        rank_options.joint_arrival_limits = joint.arrival_limits[i];
      }
      auto plan = opt::PlanTrace(analyses[i], *device, rank_options);
      if (!plan.ok()) return plan.status();
      const bool overridden = checks[i].outcome == model::DeviceCheck::Outcome::kMismatch;
      out->push_back({&analyses[i], &*device, std::move(plan).value(), checks[i], overridden});
    }
    return Status::Ok();
  };
  // The job's slowest rank's steady iteration with every rank's plan at once, replayed jointly.
  auto job_time = [&](const std::vector<opt::PlannedTrace>& plans, bool* converged) {
    std::vector<std::vector<TimeNs>> with_plans;
    for (size_t i = 0; i < plans.size(); ++i) with_plans.push_back(opt::PlannedDurations(plans[i].plan, analyses[i].durations));
    std::vector<const std::vector<TimeNs>*> d;
    for (const auto& w : with_plans) d.push_back(&w);
    const analysis::JointSchedule after = analysis::JointReplay(*job, ranks, d);
    *converged = *converged && after.converged;
    const std::vector<TimeNs> t = analysis::JointSteadyTimes(ranks, after);
    return *std::max_element(t.begin(), t.end());
  };
  std::vector<opt::PlannedTrace> planned;
  const bool jointly = job.has_value() && !args.per_rank;
  if (Status st = plan_ranks(args.max_slowdown, jointly, &planned); !st.ok()) return Fail("optimize", st);
  nlohmann::json job_json;
  if (job) {
    // Each rank met the target with its peers held still; all moving at once they can add up.
    // The ranks' target is cut until the job meets it (at most kJobRounds plannings).
    constexpr int kJobRounds = 5;
    const std::vector<TimeNs> before_ns = analysis::JointSteadyTimes(ranks, joint);
    const TimeNs before = *std::max_element(before_ns.begin(), before_ns.end());
    const TimeNs allowed = static_cast<TimeNs>(static_cast<double>(before) * (1.0 + args.max_slowdown));
    bool converged = joint.converged;
    TimeNs planned_ns = job_time(planned, &converged);
    double rank_target = args.max_slowdown;
    nlohmann::json rounds = nlohmann::json::array();
    rounds.push_back({{"rank_target_pct", 100.0 * rank_target}, {"job_us", NsToUs(planned_ns)}});
    for (int round = 1; jointly && round < kJobRounds && planned_ns > allowed && rank_target > 0; ++round) {
      const double over = static_cast<double>(planned_ns - before) / static_cast<double>(std::max<TimeNs>(1, allowed - before));
      rank_target = round + 1 == kJobRounds ? 0.0 : rank_target / std::max(1.25, over);
      std::vector<opt::PlannedTrace> tighter;
      if (Status st = plan_ranks(rank_target, true, &tighter); !st.ok()) return Fail("optimize", st);
      const TimeNs t = job_time(tighter, &converged);
      rounds.push_back({{"rank_target_pct", 100.0 * rank_target}, {"job_us", NsToUs(t)}});
      planned = std::move(tighter);
      planned_ns = t;
    }
    // Not met: each rank planned alone (its collective kernels keep their measured waits), if that
    // meets the job's target or comes closer.
    std::string planned_as = jointly ? "jointly" : "per rank (--per-rank)";
    if (jointly && planned_ns > allowed) {
      std::vector<opt::PlannedTrace> alone;
      if (Status st = plan_ranks(args.max_slowdown, false, &alone); !st.ok()) return Fail("optimize", st);
      const TimeNs t = job_time(alone, &converged);
      rounds.push_back({{"rank_target_pct", 100.0 * args.max_slowdown}, {"job_us", NsToUs(t)}, {"per_rank", true}});
      if (t < planned_ns) {
        planned = std::move(alone);
        planned_ns = t;
        rank_target = args.max_slowdown;
        planned_as = "per rank (the joint plans did not meet the job's target)";
      }
    }
    const double slowdown = 100.0 * (static_cast<double>(planned_ns) / static_cast<double>(std::max<TimeNs>(1, before)) - 1.0);
    job_json = {{"planned", planned_as},
                {"about", "the ranks of one job, each planned with its peers held where the joint replay of the analysis "
                          "timelines puts them (its waits for them are slack); every rank's plan then replayed jointly "
                          "at once, and the ranks' target cut until the job meets it. Times: the slowest rank's steady "
                          "iteration (--per-rank: each rank planned alone)"},
                {"collectives_matched", job->collectives.size()},
                {"baseline_us", NsToUs(before)},
                {"planned_us", NsToUs(planned_ns)},
                {"slowdown_pct", slowdown},
                {"target_pct", 100.0 * args.max_slowdown},
                {"met", planned_ns <= allowed},
                {"rank_target_pct", 100.0 * rank_target},
                {"rounds", rounds},
                {"converged", converged}};
  }
  // The text goes to stdout unless a machine-readable output does.
  const bool text = args.json != "-" && args.policy != "-" && args.frontier != "-";
  nlohmann::json all = nlohmann::json::array();
  for (const auto& pt : planned) {
    if (text) fmt::print("{}", report::PlanText(pt));
    all.push_back(report::PlanToJson(pt));
  }
  if (!args.policy.empty()) {
    Status st = WriteJson(args.policy, policy::PolicyJson(planned));
    if (!st.ok()) return Fail("optimize", st);
  }
  if (!args.frontier.empty()) {
    Status st = WriteFile(args.frontier, report::FrontierCsv(planned));
    if (!st.ok()) return Fail("optimize", st);
  }
  if (text && job) {
    fmt::print("job of {} ranks, planned {} ({} collectives matched): every rank's plan at once, replayed jointly: "
               "{:.1f} us against {:.1f} us at the default clocks ({:+.2f} %, target +{:.2f} %{}; each rank planned "
               "to +{:.2f} %){}\n",
               analyses.size(), job_json["planned"].get<std::string>(), job->collectives.size(), job_json["planned_us"].get<double>(),
               job_json["baseline_us"].get<double>(), job_json["slowdown_pct"].get<double>(), 100.0 * args.max_slowdown,
               job_json["met"].get<bool>() ? ", met" : ", NOT met", job_json["rank_target_pct"].get<double>(),
               job_json["converged"].get<bool>() ? "" : " (the joint replay did NOT converge)");
  }
  nlohmann::json out = all.size() == 1 ? all[0] : nlohmann::json{{"traces", all}};
  if (job) out["job"] = std::move(job_json);
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
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  RefuseTwoOnStdout(cmd, {"--json", "--policy", "--frontier"});
  cmd->callback([args, &exit_code] { exit_code = RunOptimize(*args); });
}

}  // namespace emo::cli
