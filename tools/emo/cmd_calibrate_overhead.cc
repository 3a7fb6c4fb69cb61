// emo calibrate-overhead: fit the profiler-overhead calibration (the gauge's reference table,
// the ratio per profiler configuration and the gauge exponent) from traced runs and their
// measured unprofiled step times.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "progress.h"
#include "emo/analysis/analyze.h"
#include "emo/analysis/overhead.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/trace/trace.h"

namespace emo::cli {
namespace {

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::vector<double> step_ms;
  std::string iteration;
  std::string reference_from;  // calibration file whose reference table to keep
  std::string json;
  std::string out;
};

int RunCalibrate(const CalibrateArgs& args) {
  if (args.step_ms.size() != args.traces.size()) {
    return Fail("calibrate-overhead",
                InvalidArgument(fmt::format("{} but {}: give one unprofiled step time (ms) per trace, in the "
                                            "same order",
                                            Plural(args.traces.size(), "trace"),
                                            Plural(args.step_ms.size(), "--step-time value"))));
  }
  analysis::AnalyzeOptions options;
  options.iteration_regex = args.iteration;
  options.overhead.mode = analysis::OverheadOptions::Mode::kOff;  // fit on the traced durations
  std::vector<analysis::TraceAnalysis> all;
  {
    Progress progress;
    for (const auto& p : args.traces) {
      progress.Say(fmt::format("emo calibrate-overhead: reading {} of {} traces ({})", all.size() + 1,
                               args.traces.size(), p));
      auto a = analysis::AnalyzeTrace(p, options);
      if (!a.ok()) return Fail("calibrate-overhead", a.status());
      all.push_back(std::move(a).value());
    }
  }
  std::optional<std::map<std::string, double>> reference;
  if (!args.reference_from.empty()) {
    auto c = analysis::LoadOverheadCalibration(args.reference_from);
    if (!c.ok()) return Fail("calibrate-overhead", c.status());
    reference = c->reference_ns;
  }
  std::vector<const analysis::TraceAnalysis*> runs;
  std::vector<TimeNs> unprofiled;
  for (size_t i = 0; i < all.size(); ++i) {
    runs.push_back(&all[i]);
    unprofiled.push_back(static_cast<TimeNs>(args.step_ms[i] * 1e6));
  }
  const analysis::CalibrationFit fit =
      analysis::FitOverheadCalibration(runs, unprofiled, reference ? &*reference : nullptr);
  const analysis::OverheadCalibration& cal = fit.calibration;
  const auto& gauges = fit.gauges;
  const auto& own = fit.own_cpu_scale;
  nlohmann::json per = nlohmann::json::array();
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& a = all[i];
    const bool rs = a.trace->meta.record_shapes;
    const double scale = cal.Scale(rs, gauges[i].slowdown);
    const TimeNs c =
        analysis::CorrectedIterationTime(*a.graph, a.iterations, a.steady, a.traced_durations, a.cpu_floors, scale);
    const TimeNs truth = unprofiled[i];
    per.push_back({{"trace", a.trace->meta.source_path},
                   {"record_shapes", rs},
                   {"traced_us", NsToUs(a.measured_ns())},
                   {"unprofiled_us", NsToUs(truth)},
                   {"cpu_slowdown", gauges[i].slowdown},
                   {"cpu_scale", scale},
                   {"corrected_us", NsToUs(c)},
                   {"error_pct", 100.0 * (static_cast<double>(c) / static_cast<double>(truth) - 1.0)},
                   {"leaf_ops_per_ms", gauges[i].Density()},
                   {"own_cpu_scale", own[i]}});
  }
  nlohmann::json out = analysis::CalibrationToJson(cal);
  out["traces"] = per;
  if (args.json != "-") {
    fmt::print("{:<60} {:>10} {:>10} {:>9} {:>10} {:>9} {:>9}\n", "trace", "traced ms", "true ms", "slowdown",
               "fit ms", "error %", "own scale");
    for (const auto& p : per) {
      fmt::print("{:<60} {:>10.2f} {:>10.2f} {:>9.3f} {:>10.2f} {:>+9.1f} {:>9.3f}\n", p["trace"].get<std::string>(),
                 p["traced_us"].get<double>() / 1e3, p["unprofiled_us"].get<double>() / 1e3,
                 p["cpu_slowdown"].get<double>(), p["corrected_us"].get<double>() / 1e3, p["error_pct"].get<double>(),
                 p["own_cpu_scale"].get<double>());
    }
    fmt::print("ratio: light {:.4f}, record_shapes {:.4f} (0 = no trace of that configuration); CPU scale = ratio / "
               "slowdown^{:.2f}\n",
               cal.ratio_light, cal.ratio_shapes, cal.gauge_exponent);
  }
  if (!args.out.empty()) {
    Status st = WriteJson(args.out, analysis::CalibrationToJson(cal));
    if (!st.ok()) return Fail("calibrate-overhead", st);
  }
  Status st = WriteJson(args.json, out);
  return st.ok() ? 0 : Fail("calibrate-overhead", st);
}

}  // namespace

void SetupCalibrateOverhead(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate-overhead",
      "Fit the profiler-overhead calibration from traced runs and the step times of the same\n"
      "loops measured without the profiler: the reference durations of the fixed-cost events\n"
      "the CPU speed gauge reads, one ratio per profiler configuration (record_shapes on or\n"
      "off), and the gauge exponent a (CPU scale = ratio / slowdown^a, a in [0, 1.5], shared by\n"
      "both configurations). Pass the file written by --out (or --json) to\n"
      "analyze/whatif/optimize with --overhead-calibration, or pass --step-time there directly\n"
      "for a single trace.");
  cmd->add_option("traces", args->traces, "Traced runs (either profiler configuration; each is fitted on its own)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--step-time", args->step_ms, "Unprofiled step time (ms) of each trace's loop, one per trace, in order")
      ->required()
      ->check(Positive());
  AddIterationFlag(cmd, args->iteration);
  cmd->add_option("--reference-from", args->reference_from,
                  "Keep the reference table of this calibration file and fit only the ratios and the\n"
                  "exponent (default: fit the reference table from these traces too)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out, "Write the calibration file (for --overhead-calibration) to FILE");
  cmd->add_option("--json", args->json, "Write the calibration and the per-trace fit to FILE ('-' = stdout)");
  RefuseTwoOnStdout(cmd, {"--json", "--out"});
  AddUsageCheck(cmd, [args] {
    if (args->step_ms.size() != args->traces.size()) {
      throw CLI::ValidationError(fmt::format("{} but {}: give one unprofiled step time (ms) per trace, in order",
                                             Plural(args->traces.size(), "trace"),
                                             Plural(args->step_ms.size(), "--step-time value")));
    }
  });
  cmd->callback([args, &exit_code] { exit_code = RunCalibrate(*args); });
}

}  // namespace emo::cli
