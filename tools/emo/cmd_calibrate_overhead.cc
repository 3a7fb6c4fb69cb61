// emo calibrate-overhead: fit the profiler's cost per recorded event from traced runs and
// their measured unprofiled step times.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/analysis/analyze.h"
#include "emo/analysis/overhead.h"

namespace emo::cli {
namespace {

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::vector<double> step_ms;
  std::string iteration;
  std::string json;
};

int RunCalibrate(const CalibrateArgs& args) {
  if (args.step_ms.size() != args.traces.size()) {
    return Fail("calibrate-overhead",
                InvalidArgument(fmt::format("{} traces but {} --step-time values: give one unprofiled step "
                                            "time (ms) per trace, in the same order",
                                            args.traces.size(), args.step_ms.size())));
  }
  analysis::AnalyzeOptions options;
  options.iteration_regex = args.iteration;
  std::vector<analysis::TraceAnalysis> all;
  for (const auto& p : args.traces) {
    fmt::print(stderr, "emo calibrate-overhead: reading {} ...\n", p);
    auto a = analysis::AnalyzeTrace(p, options);
    if (!a.ok()) return Fail("calibrate-overhead", a.status());
    all.push_back(std::move(a).value());
  }
  analysis::OverheadModel base;
  std::vector<analysis::CalibrationSample> samples;
  nlohmann::json per = nlohmann::json::array();
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& a = all[i];
    const auto truth = static_cast<TimeNs>(args.step_ms[i] * 1e6);
    // Fit on the traced durations (a.durations may already carry the shipped correction).
    analysis::CalibrationSample s{a.graph.get(), &a.iterations, a.steady, &a.traced_durations, &a.profiler_events, truth};
    samples.push_back(s);
    per.push_back({{"trace", a.trace->meta.source_path},
                   {"record_shapes", a.trace->meta.record_shapes},
                   {"traced_us", NsToUs(a.measured_ns())},
                   {"unprofiled_us", NsToUs(truth)},
                   {"events_per_iteration", a.profiler_events.total / static_cast<double>(a.iterations.iterations.size())},
                   {"events_total", a.profiler_events.total}});
  }
  analysis::OverheadModel joint = analysis::FitOverhead(samples, base);
  base = joint;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& a = all[i];
    const TimeNs c = analysis::CorrectedIterationTime(*a.graph, a.iterations, a.steady, a.traced_durations, a.profiler_events, base);
    per[i]["corrected_us_joint"] = NsToUs(c);
    per[i]["error_pct_joint"] = 100.0 * (static_cast<double>(c) / (args.step_ms[i] * 1e6) - 1.0);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    // Each trace's own per-operator cost with the joint per-API cost: spread = transferability.
    per[i]["own_fit_per_event_ns"] = analysis::FitOverhead({samples[i]}, joint).per_event_ns;
  }
  nlohmann::json out = {{"per_event_ns", joint.per_event_ns}, {"per_api_ns", joint.per_api_ns}, {"traces", per}};
  if (args.json != "-") {
    fmt::print("{:<60} {:>10} {:>10} {:>10} {:>9} {:>8}\n", "trace", "traced ms", "true ms", "fit ms", "error %", "own ns");
    for (const auto& p : per) {
      fmt::print("{:<60} {:>10.2f} {:>10.2f} {:>10.2f} {:>+9.1f} {:>8.0f}\n", p["trace"].get<std::string>(),
                 p["traced_us"].get<double>() / 1e3, p["unprofiled_us"].get<double>() / 1e3,
                 p["corrected_us_joint"].get<double>() / 1e3, p["error_pct_joint"].get<double>(),
                 p["own_fit_per_event_ns"].get<double>());
    }
    fmt::print("joint fit: {:.0f} ns per operator event, {:.0f} ns per API call\n", joint.per_event_ns,
               joint.per_api_ns);
  }
  Status st = WriteJson(args.json, out);
  return st.ok() ? 0 : Fail("calibrate-overhead", st);
}

}  // namespace

void SetupCalibrateOverhead(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate-overhead",
      "Fit the PyTorch profiler's cost per recorded event (ns) from traced runs and the step\n"
      "times of the same loops measured without the profiler. Use the result with\n"
      "--overhead-ns on analyze/whatif/optimize, or pass --step-time there directly.");
  cmd->add_option("traces", args->traces, "Traces recorded with one profiler configuration")->required()->check(CLI::ExistingFile);
  cmd->add_option("--step-time", args->step_ms, "Unprofiled step time (ms) of each trace's loop, in order")->required();
  cmd->add_option("--iteration", args->iteration, "Regex on CPU annotations marking iterations");
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  cmd->callback([args, &exit_code] { exit_code = RunCalibrate(*args); });
}

}  // namespace emo::cli
