// `emo model fit|validate|calibrate|classify`: fit the clock model to per-clock profiles, score it
// on held-out clocks, calibrate it on measured energy, and say which class a kernel name gets.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_util.h"
#include "commands.h"
#include "progress.h"
#include "emo/base/file.h"
#include "emo/base/text.h"
#include "emo/model/device.h"
#include "emo/model/fit.h"
#include "emo/model/iteration_energy.h"
#include "emo/model/kernel_class.h"
#include "emo/model/stage_profile.h"
#include "emo/model/validate.h"
#include "emo/trace/reader.h"

namespace emo::cli {
namespace {

using nlohmann::json;

// Human-readable output goes to stdout, or to stderr when the JSON goes to stdout ("--json -").
std::FILE* HumanOut(const std::string& json_path) { return json_path == "-" ? stderr : stdout; }

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json GpuJson(const model::GpuParams& gpu) {
  return {{"f_max_mhz", gpu.f_max.value()},
          {"static_power_w", gpu.static_power.value()},
          {"voltage",
           {{"ridge_mhz", gpu.voltage.ridge.value()},
            {"slope_per_mhz", gpu.voltage.slope_per_mhz},
            {"v_at_f_max", gpu.voltage.At(gpu.f_max)}}}};
}

json UnitsJson(const model::ProfileFit& fit) {
  json units = json::array();
  for (size_t u = 0; u < fit.units.size(); ++u) {
    const model::UnitModel& m = fit.units[u];
    units.push_back({{"name", fit.unit_names[u]},
                     {"t_mem_s", m.t_mem_s},
                     {"t_comp_s", m.t_comp_s},
                     {"comp_share_at_f_max", m.t_comp_s / (m.t_mem_s + m.t_comp_s)},
                     {"activity_w_per_mhz", m.activity},
                     {"f_cap_mhz", NumberOrNull(m.f_cap.value())},
                     {"power_at_f_max_w", model::UnitPower(fit.gpu, m, fit.gpu.f_max).value()}});
  }
  return units;
}

json ClocksJson(const std::vector<MegaHertz>& clocks) {
  json out = json::array();
  for (MegaHertz f : clocks) out.push_back(f.value());
  return out;
}

struct ValidateArgs {
  std::string profile;
  int clocks = 3;
  std::string json_path;
  std::string device_from;
  std::string device;
  std::string devices_dir;
  bool per_point = false;
  bool allow_device_mismatch = false;
};

int RunValidate(const ValidateArgs& args) {
  std::FILE* out = HumanOut(args.json_path);
  Result<model::StageProfile> profile = model::ReadStageProfile(args.profile);
  if (!profile.ok()) return Fail("model validate", profile.status());
  model::FitOptions opts;
  std::string device_source = "fitted jointly over all units from the K clocks";
  model::DeviceCheck device_check;
  if (!args.device_from.empty()) {
    Result<model::StageProfile> calib = model::ReadStageProfile(args.device_from);
    if (!calib.ok()) return Fail("model validate", calib.status());
    if (calib->source == profile->source) {
      return Fail("model validate",
                  InvalidArgument("--device-from must be another profile than --profile: fitting "
                                  "the device curve on the held-out clocks would score the fit "
                                  "on its own data"));
    }
    Result<model::ProfileFit> cf = model::FitProfile(*calib);
    if (!cf.ok()) return Fail("model validate", cf.status());
    opts.device = model::DeviceCurve{cf->gpu.static_power, cf->gpu.voltage};
    device_source = "fitted on every clock of " + args.device_from;
  }
  if (!args.device.empty()) {
    if (!args.device_from.empty()) {
      return Fail("model validate", InvalidArgument("--device and --device-from are two protocols: give one"));
    }
    auto dev = model::FindDevice(args.device, args.devices_dir.empty() ? model::DefaultDevicesDir() : args.devices_dir);
    if (!dev.ok()) return Fail("model validate", dev.status());
    device_check = model::CheckProfileClocks(*dev, profile->clocks);
    if (device_check.outcome == model::DeviceCheck::Outcome::kMismatch && !args.allow_device_mismatch) {
      return Fail("model validate",
                  InvalidArgument(fmt::format("{}: {}. Pass the device model of the GPU it was measured on, or "
                                              "--allow-device-mismatch to pin this one anyway (the output then says so)",
                                              args.profile, device_check.message)));
    }
    if (!(dev->idle_power.value() > 0.0) || !std::isfinite(dev->params.power_limit.value())) {
      return Fail("model validate", InvalidArgument(fmt::format("{}: --device needs idle_power_w and power_limit_w",
                                                                dev->path)));
    }
    opts.pinned = model::FitOptions::Pinned{dev->idle_power, dev->params.power_limit};
    device_source = fmt::format("P_static pinned to {}'s idle power {:.2f} W, voltage curve fitted from the K clocks",
                                dev->name, dev->idle_power.value());
  }
  Result<model::ValidationReport> report = model::ValidateProfile(*profile, args.clocks, opts);
  if (!report.ok()) return Fail("model validate", report.status());
  if (opts.pinned) {
    device_source += fmt::format("; profile {} (median top-clock power {:.1f} % of the {:.0f} W limit)",
                                 report->fit.power_limited ? "power-limited" : "clock-ceiling",
                                 100.0 * report->fit.top_power_fraction, opts.pinned->power_limit.value());
  }
  const model::ValidationReport& r = *report;
  std::string fit_list;
  for (MegaHertz f : r.fit_clocks)
    fit_list += fmt::format("{}{:.0f}", fit_list.empty() ? "" : ", ", f.value());
  fmt::print(out, "{}\n  fit from K={} ({} MHz); {}, {}\n", args.profile,
             Plural(static_cast<uint64_t>(r.k), "clock"), fit_list, Plural(static_cast<uint64_t>(r.units), "unit"),
             Plural(static_cast<uint64_t>(r.points), "held-out point"));
  fmt::print(out,
             "  time MAPE {:.2f}%   energy MAPE {:.2f}%   power MAPE {:.2f}%   max error {:.2f}% "
             "(time {:.2f}%, energy {:.2f}%)\n",
             r.time_mape_pct, r.energy_mape_pct, r.power_mape_pct, r.max_error_pct,
             r.time_max_error_pct, r.energy_max_error_pct);
  fmt::print(out,
             "  device curve ({}): voltage ridge {:.0f} MHz, V(f_max) {:.3f}, P_static {:.1f} W\n",
             device_source, r.fit.gpu.voltage.ridge.value(), r.fit.gpu.voltage.At(r.fit.gpu.f_max),
             r.fit.gpu.static_power.value());
  if (device_check.outcome == model::DeviceCheck::Outcome::kMismatch) {
    fmt::print(out, "  warning: device mismatch, pinned anyway (--allow-device-mismatch): {}\n", device_check.message);
  }
  json j = {{"profile", args.profile},
            {"clocks", r.k},
            {"fit_clocks_mhz", ClocksJson(r.fit_clocks)},
            {"units", r.units},
            {"points", r.points},
            {"time_mape_pct", r.time_mape_pct},
            {"energy_mape_pct", r.energy_mape_pct},
            {"power_mape_pct", r.power_mape_pct},
            {"max_error_pct", r.max_error_pct},
            {"time_max_error_pct", r.time_max_error_pct},
            {"energy_max_error_pct", r.energy_max_error_pct},
            {"device_curve_source", device_source},
            {"device_check", {{"outcome", model::DeviceCheckName(device_check.outcome)},
                              {"overridden", device_check.outcome == model::DeviceCheck::Outcome::kMismatch},
                              {"message", device_check.message}}},
            {"gpu", GpuJson(r.fit.gpu)},
            {"fitted_units", UnitsJson(r.fit)}};
  if (args.per_point) {
    json pts = json::array();
    for (const model::HeldOutPoint& p : r.errors) {
      pts.push_back({{"unit", r.fit.unit_names[p.unit]},
                     {"clock_mhz", p.clock.value()},
                     {"time_error_pct", p.time_error_pct},
                     {"energy_error_pct", p.energy_error_pct}});
    }
    j["held_out"] = std::move(pts);
  }
  Status st = WriteJson(args.json_path, j);
  if (!st.ok()) return Fail("model validate", st);
  return 0;
}

struct FitArgs {
  std::vector<std::string> profiles;
  int clocks = 0;  // 0: every clock
  std::string json_path;
  std::string update_device;
};

json Sourced(double value, const std::string& source) {
  return {{"value", value}, {"source", source}};
}

// Writes the fitted device-wide numbers into a device file, keeping everything else in it.
Status UpdateDevice(const std::string& path, const model::ProfileFit& fit,
                    const model::FitSummary& summary, const std::string& command,
                    const json& fit_json) {
  EMO_ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  json dev = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (dev.is_discarded() || !dev.is_object()) {
    return ParseError(fmt::format("{}: not a JSON object", path));
  }
  const std::string src = "fit: `" + command + "` (see \"fit\" below)";
  dev["static_power_w"] = Sourced(fit.gpu.static_power.value(), src);
  dev["voltage"]["ridge_mhz"] = Sourced(fit.gpu.voltage.ridge.value(), src);
  dev["voltage"]["slope_per_mhz"] = Sourced(fit.gpu.voltage.slope_per_mhz, src);
  if (summary.cap_power_w > 0.0) {
    dev["cap_power_w"] =
        Sourced(summary.cap_power_w, src + "; median measured power at f_max of the capped units");
  }
  dev["classes"]["compute"]["comp_share"] =
      Sourced(summary.comp_share_median,
              src + "; median over the profiled units (transformer stages, GEMM-dominated)");
  dev["classes"]["compute"]["activity_w_per_mhz"] =
      Sourced(summary.activity_median, src + "; median over the profiled units");
  // Assumed priors stated as a ratio to the fitted compute activity follow the refit.
  for (auto& [name, cls] : dev["classes"].items()) {
    if (name == "compute" || !cls.contains("activity_w_per_mhz")) continue;
    json& a = cls["activity_w_per_mhz"];
    if (a.is_object() && a.contains("ratio_to_compute") && a["ratio_to_compute"].is_number()) {
      a["value"] = a["ratio_to_compute"].get<double>() * summary.activity_median;
    }
  }
  dev["fit"] = fit_json;
  return WriteFile(path, dev.dump(2) + "\n");
}

int RunFit(const FitArgs& args) {
  std::FILE* out = HumanOut(args.json_path);
  std::vector<model::StageProfile> profiles;
  std::vector<std::string> labels;
  std::string command = "emo model fit";
  for (const std::string& path : args.profiles) {
    Result<model::StageProfile> p = model::ReadStageProfile(path);
    if (!p.ok()) return Fail("model fit", p.status());
    profiles.push_back(std::move(*p));
    labels.push_back(std::filesystem::path(path).stem().string());
    command += " --profile " + path;
  }
  model::StageProfile merged =
      profiles.size() == 1 ? profiles[0] : model::MergeProfiles(profiles, labels);
  std::vector<MegaHertz> clocks;
  if (args.clocks > 0) {
    Result<std::vector<MegaHertz>> c = model::SpreadClocks(merged.clocks, args.clocks);
    if (!c.ok()) return Fail("model fit", c.status());
    clocks = *c;
    command += fmt::format(" --clocks {}", args.clocks);
  }
  Result<model::ProfileFit> fit = model::FitProfile(merged, clocks);
  if (!fit.ok()) return Fail("model fit", fit.status());
  const model::FitSummary sum = model::SummarizeFit(merged, *fit);
  fmt::print(out, "fitted {} from {} ({:.0f}-{:.0f} MHz) of {}\n", Plural(fit->units.size(), "unit"),
             Plural(fit->fit_clocks.size(), "clock"), fit->fit_clocks.front().value(),
             fit->fit_clocks.back().value(), fmt::join(args.profiles, ", "));
  fmt::print(out,
             "  P_static {:.1f} W; voltage ridge {:.0f} MHz, slope {:.2e}/MHz, V(f_max) {:.3f}\n",
             fit->gpu.static_power.value(), fit->gpu.voltage.ridge.value(),
             fit->gpu.voltage.slope_per_mhz, fit->gpu.voltage.At(fit->gpu.f_max));
  fmt::print(out,
             "  1/f share at f_max {:.3f}-{:.3f} (median {:.3f}); activity {:.4f}-{:.4f} W/MHz; "
             "{} of {} capped{}\n",
             sum.comp_share_min, sum.comp_share_max, sum.comp_share_median, sum.activity_min,
             sum.activity_max, sum.capped_units, Plural(fit->units.size(), "unit"),
             sum.cap_power_w > 0 ? fmt::format(" (power at f_max {:.1f} W)", sum.cap_power_w)
                                 : std::string());
  fmt::print(out, "  in-sample error: time MAPE {:.2f}%, energy MAPE {:.2f}%\n", sum.time_mape_pct,
             sum.energy_mape_pct);
  json j = {
      {"command", command},
      {"profiles", args.profiles},
      {"fit_clocks_mhz", ClocksJson(fit->fit_clocks)},
      {"gpu", GpuJson(fit->gpu)},
      {"cap_power_w", sum.cap_power_w > 0 ? json(sum.cap_power_w) : json(nullptr)},
      {"summary",
       {{"units", fit->units.size()},
        {"capped_units", sum.capped_units},
        {"comp_share",
         {{"min", sum.comp_share_min},
          {"median", sum.comp_share_median},
          {"max", sum.comp_share_max}}},
        {"activity_w_per_mhz",
         {{"min", sum.activity_min}, {"median", sum.activity_median}, {"max", sum.activity_max}}},
        {"in_sample_time_mape_pct", sum.time_mape_pct},
        {"in_sample_energy_mape_pct", sum.energy_mape_pct},
        {"time_rms_pct", 100.0 * fit->time_rms_rel},
        {"power_rms_pct", 100.0 * fit->power_rms_rel}}},
      {"units", UnitsJson(*fit)}};
  Status st = WriteJson(args.json_path, j);
  if (!st.ok()) return Fail("model fit", st);
  if (!args.update_device.empty()) {
    st = UpdateDevice(args.update_device, *fit, sum, command, j);
    if (!st.ok()) return Fail("model fit", st);
    fmt::print(out, "  wrote the fitted numbers into {}\n", args.update_device);
  }
  return 0;
}

struct CalibrateArgs {
  std::string device;
  std::string devices_dir;
  std::string measured;
  std::vector<std::string> traces;
  std::string json_path;
  bool update_device = false;
};

std::string TraceStem(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  for (const char* ext : {".gz", ".json", ".emotrace"}) {
    if (stem.ends_with(ext)) stem.resize(stem.size() - std::string_view(ext).size());
  }
  return stem;
}

// What an EMO trace measured in its own run: the untraced step and the NVML energy per
// iteration over those iterations, summed over the trace's GPUs. Refused when the trace has no
// run measurement or its energy is not measurable (uncertainty above 25 %).
Result<model::MeasuredIteration> MeasuredInRun(const std::string& name, const trace::Trace& t) {
  if (!t.meta.run) return NotFound("it is not an EMO trace, so it carries no measured energy (pass --measured)");
  const auto& r = *t.meta.run;
  if (r.untraced_step_ns <= 0) return NotFound("its run has no untraced iterations to time the step by");
  model::MeasuredIteration m;
  m.name = name;
  m.step_s = static_cast<double>(r.untraced_step_ns) * 1e-9;
  double energy = 0;
  for (const auto& g : r.gpus) {
    if (!g.Measurable() || g.energy_per_iteration_j <= 0) {
      return NotFound(fmt::format("its run's energy on GPU {} is not measurable ({:.3f} +- {:.3f} J per iteration)",
                                  g.device, g.energy_per_iteration_j, g.uncertainty_per_iteration_j));
    }
    energy += g.energy_per_iteration_j;
  }
  if (energy <= 0) return NotFound("its run measured no energy (NVML off or absent)");
  m.energy_j = energy;
  return m;
}

json EnergyJson(const model::IterationEnergy& e) {
  return {{"energy_j", e.energy_j},
          {"avg_power_w", e.avg_power_w},
          {"demand_power_w", e.demand_power_w},
          {"capped", e.capped},
          {"busy_s", e.busy_s},
          {"idle_s", e.idle_s},
          {"comm_trimmed_s", e.comm_trimmed_s}};
}

int RunCalibrate(const CalibrateArgs& args) {
  std::FILE* out = HumanOut(args.json_path);
  const std::string dir = args.devices_dir.empty() ? model::DefaultDevicesDir() : args.devices_dir;
  Result<model::DeviceModel> device = model::FindDevice(args.device, dir);
  if (!device.ok()) return Fail("model calibrate", device.status());
  std::vector<model::MeasuredIteration> measured;
  if (!args.measured.empty()) {
    Result<std::vector<model::MeasuredIteration>> read = model::ReadMeasuredIterations(args.measured);
    if (!read.ok()) return Fail("model calibrate", read.status());
    measured = std::move(read).value();
  }
  std::vector<model::EnergySample> samples;
  json per_trace = json::array();
  Progress progress;
  for (const std::string& path : args.traces) {
    const std::string name = TraceStem(path);
    progress.Say(fmt::format("emo model calibrate: reading {} of {} traces ({})", per_trace.size() + 1,
                             args.traces.size(), path));
    Result<trace::Trace> t = trace::ReadTrace(path);
    if (!t.ok()) return Fail("model calibrate", t.status());
    // The measurement: the workload's entry in --measured, else what an EMO trace measured in
    // the same run (its untraced step and the NVML energy over those iterations).
    const auto listed = std::find_if(measured.begin(), measured.end(),
                                     [&](const model::MeasuredIteration& x) { return x.name == name; });
    model::MeasuredIteration m;
    std::string measured_by = args.measured;
    if (listed != measured.end()) {
      m = *listed;
    } else {
      Result<model::MeasuredIteration> from_run = MeasuredInRun(name, *t);
      if (!from_run.ok()) {
        return Fail("model calibrate",
                    NotFound(fmt::format("{}{}; {}", path,
                                         args.measured.empty() ? "" : fmt::format(": no workload '{}' in {}", name, args.measured),
                                         from_run.status().message())));
      }
      m = *from_run;
      measured_by = "the trace's own run";
    }
    const model::DeviceCheck check = model::CheckTraceGpu(*device, trace::GpuNamesUsed(*t));
    if (check.outcome == model::DeviceCheck::Outcome::kMismatch) {
      // Calibrating a model on another GPU's energy would write wrong numbers into its file.
      return Fail("model calibrate", InvalidArgument(fmt::format("{}: {}", path, check.message)));
    }
    Result<model::ActivityProfile> p = model::ActivityFromTrace(*t, *device);
    if (!p.ok()) return Fail("model calibrate", p.status());
    model::EnergySample s{name, model::WorkloadGroup(name), *p, m.step_s, m.energy_j};
    json busy = json::object();
    for (int c = 0; c < model::kNumKernelClasses; ++c) {
      const auto k = static_cast<model::KernelClass>(c);
      busy[std::string(model::KernelClassName(k))] = 1e3 * p->ClassBusy(k);
    }
    per_trace.push_back({{"name", name},
                         {"trace", path},
                         {"measured_by", measured_by},
                         {"iterations", p->iterations},
                         {"step_ms", 1e3 * m.step_s},
                         {"measured_energy_j", m.energy_j},
                         {"busy_ms", 1e3 * p->Busy()},
                         {"class_busy_ms", std::move(busy)}});
    samples.push_back(std::move(s));
  }
  Result<std::vector<model::HeldOutEnergy>> loo = model::LeaveOneGroupOut(*device, samples);
  if (!loo.ok()) return Fail("model calibrate", loo.status());
  Result<double> all = model::CalibrateActivityScale(*device, samples);
  if (!all.ok()) return Fail("model calibrate", all.status());

  fmt::print(out,
             "device {} at {:.0f} MHz; leave-one-workload-out (each scored with the activity "
             "scale fitted on the others):\n",
             device->name, device->default_clock.value());
  fmt::print(out, "  {:<16} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7} {:>9}\n", "workload",
             "step ms", "busy ms", "pred J", "meas J", "error", "scale", "capped", "clock MHz");
  json rows = json::array();
  double worst = 0.0;
  for (const model::HeldOutEnergy& h : *loo) {
    const auto& s = *std::find_if(samples.begin(), samples.end(),
                                  [&](const model::EnergySample& x) { return x.name == h.name; });
    // Where the limiter holds a capped run (the busy times held as traced).
    const MegaHertz held =
        model::ThrottleClock(*device, s.profile, s.step_s, h.activity_scale, device->default_clock);
    fmt::print(out,
               "  {:<16} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>+6.1f}% {:>6.3f} {:>7} {:>9.0f}\n",
               h.name, 1e3 * s.step_s, 1e3 * h.predicted.busy_s, h.predicted.energy_j, h.measured_j,
               h.error_pct, h.activity_scale, h.predicted.capped ? "yes" : "no", held.value());
    worst = std::max(worst, std::abs(h.error_pct));
    rows.push_back({{"name", h.name},
                    {"group", h.group},
                    {"activity_scale", h.activity_scale},
                    {"predicted", EnergyJson(h.predicted)},
                    {"measured_energy_j", h.measured_j},
                    {"error_pct", h.error_pct},
                    {"throttle_clock_mhz", held.value()}});
  }
  fmt::print(out, "  worst |error| {:.1f}%; activity scale fitted on all workloads: {:.4f}\n",
             worst, *all);
  json j = {{"device", device->name},           {"clock_mhz", device->default_clock.value()},
            {"measured", args.measured},        {"traces", std::move(per_trace)},
            {"leave_one_out", std::move(rows)}, {"worst_abs_error_pct", worst},
            {"activity_scale_all", *all}};
  Status st = WriteJson(args.json_path, j);
  if (!st.ok()) return Fail("model calibrate", st);
  if (args.update_device) {
    Result<std::string> text = ReadFileMaybeGzip(device->path);
    if (!text.ok()) return Fail("model calibrate", text.status());
    json dev = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (dev.is_discarded()) return Fail("model calibrate", ParseError(device->path + ": bad JSON"));
    std::string cmd = "emo model calibrate --device " + args.device;
    if (!args.measured.empty()) cmd += " --measured " + args.measured;
    for (const std::string& t : args.traces) cmd += " --trace " + t;
    dev["activity_scale"] = {
        {"value", *all},
        {"source", "calibrated on measured energy per iteration at the default clock: `" + cmd +
                       fmt::format("` (leave-one-workload-out worst error {:.1f}%)", worst)}};
    st = WriteFile(device->path, dev.dump(2) + "\n");
    if (!st.ok()) return Fail("model calibrate", st);
    fmt::print(out, "  wrote activity_scale into {}\n", device->path);
  }
  return 0;
}

struct ClassifyArgs {
  std::vector<std::string> names;
  std::string json_path;
  std::string device;  // optional: also print the clock-bound share that device gives each name
};

// The class and kind EMO's model gives each kernel name (names from the arguments, or one per line
// from standard input when the only argument is "-").
int RunClassify(const ClassifyArgs& args) {
  std::vector<std::string> names = args.names;
  if (names.size() == 1 && names[0] == "-") {
    names.clear();
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) names.push_back(line);
    }
    if (names.empty()) return Fail("model classify", InvalidArgument("no kernel names on standard input"));
  }
  std::optional<model::DeviceModel> device;
  if (!args.device.empty()) {
    auto dev = model::FindDevice(args.device, model::DefaultDevicesDir());
    if (!dev.ok()) return Fail("model classify", dev.status());
    device = std::move(*dev);
  }
  json kernels = json::array();
  std::FILE* out = HumanOut(args.json_path);
  for (const std::string& name : names) {
    const model::KernelKind kind = model::ClassifyKind(name);
    const model::KernelClass cls = model::ClassOf(kind);
    const int sk = model::ShareKindOfName(name);
    const bool cuda_core = sk == model::kCudaCoreGemmShareKind;
    json k = {{"name", name},
              {"class", model::KernelClassName(cls)},
              {"kind", model::KernelKindName(kind)},
              {"cuda_core_gemm", cuda_core},
              {"share_kind", model::ShareKindName(sk)}};
    std::string share;
    if (device) {
      // The clock-bound share the plans use for it: its kind's own figure, else its class's.
      const bool own = !std::isnan(device->kind_comp_share[static_cast<size_t>(sk)]);
      k["comp_share"] = device->CompShare(sk);
      k["comp_share_from"] = own ? "kinds." + std::string(model::ShareKindName(sk)) : "classes." + std::string(model::KernelClassName(cls));
      k["power_share"] = device->PowerShare(sk);  // on its launch share when its work is unknown
      share = fmt::format("{:>5.2f} ({:<5}) ", device->CompShare(sk), own ? "kind" : "class");
    }
    kernels.push_back(std::move(k));
    fmt::print(out, "{:<13} {:<11} {}{}{}\n", model::KernelClassName(cls), model::KernelKindName(kind), share, name,
               cuda_core ? "  (CUDA cores)" : "");
  }
  if (!args.json_path.empty()) {
    Status st = WriteJson(args.json_path, {{"kernels", kernels}});
    if (!st.ok()) return Fail("model classify", st);
  }
  return 0;
}

}  // namespace

void SetupModel(CLI::App& app, int& exit_code) {
  CLI::App* cmd =
      app.add_subcommand("model", "Fit, validate and calibrate the per-unit time/power model of the SM clock");
  cmd->require_subcommand(1);

  auto validate_args = std::make_shared<ValidateArgs>();
  CLI::App* validate = cmd->add_subcommand(
      "validate",
      "Fit the model from K clocks spread over a profile's range (min, ..., max: the table index\n"
      "round(i*(n-1)/(K-1))) and report its error at every other clock");
  validate
      ->add_option("--profile", validate_args->profile,
                   "Per-clock profile CSV: stage,instruction,frequency,time,energy (s, J)")
      ->required()
      ->check(CLI::ExistingFile);
  validate->add_option("--clocks", validate_args->clocks, "K: how many clocks to fit from (fewer than the profile has)")
      ->check(AtLeast(2));
  validate->add_option("--json", validate_args->json_path,
                       "Write the result as JSON ('-' = stdout)");
  CLI::Option* device_from = validate->add_option(
      "--device-from", validate_args->device_from,
      "Take P_static and the voltage curve from a fit of every clock of this other profile of\n"
      "the same GPU (a device calibration sweep), and fit only per-unit parameters from K clocks\n"
      "(default: none; P_static and the voltage curve are fitted from the K clocks too)")
      ->check(CLI::ExistingFile);
  CLI::Option* device = validate->add_option(
      "--device", validate_args->device,
      "Pin the numbers a device file holds (see `emo devices`): P_static = its idle power, and its\n"
      "power limit classes the profile as power-limited or clock-ceiling; the voltage curve and the\n"
      "per-unit parameters come from the K clocks (docs/model.md) (default: none)");
  // Two protocols for the device-wide numbers: one at a time.
  device->excludes(device_from);
  AddDevicesDirFlag(validate, validate_args->devices_dir);
  validate->get_option("--devices-dir")->needs(device);
  validate->add_flag("--per-point", validate_args->per_point,
                     "Include every held-out point's signed error in the JSON");
  validate->add_flag("--allow-device-mismatch", validate_args->allow_device_mismatch,
                     "Pin --device's numbers even when the profile's clocks are not that GPU's (refused by\n"
                     "default); the output then says so");
  validate->callback([validate_args, &exit_code] { exit_code = RunValidate(*validate_args); });

  auto fit_args = std::make_shared<FitArgs>();
  CLI::App* fit = cmd->add_subcommand(
      "fit",
      "Fit the model to per-clock profiles of one GPU: per unit t_mem, t_comp, f_cap and "
      "activity;\n"
      "per device P_static and the voltage curve (shared by every unit of every profile given)");
  fit->add_option("--profile", fit_args->profiles,
                  "Per-clock profile CSV (stage,instruction,frequency,time,energy); repeat for\n"
                  "several workloads measured on the same GPU")
      ->required()
      ->check(CLI::ExistingFile);
  fit->add_option("--clocks", fit_args->clocks,
                  "Fit from K clocks spread over the range (default: every clock)")
      ->check(AtLeast(2))
      ->default_str("");
  fit->add_option("--json", fit_args->json_path,
                  "Write the fitted parameters as JSON ('-' = stdout)");
  fit->add_option("--update-device", fit_args->update_device,
                  "Write the fitted device-wide numbers (P_static, voltage curve, cap power,\n"
                  "compute-class prior) into this device file, each with this command as source")
      ->check(CLI::ExistingFile);
  fit->callback([fit_args, &exit_code] { exit_code = RunFit(*fit_args); });

  auto cal_args = std::make_shared<CalibrateArgs>();
  CLI::App* cal = cmd->add_subcommand(
      "calibrate",
      "Calibrate a device's class activities on measured energy per iteration at the default\n"
      "clock, and score the model leave-one-workload-out (ranks of one job are held out together)");
  cal->add_option("--device", cal_args->device, "Device name (see `emo devices`) or file")
      ->required();
  AddDevicesDirFlag(cal, cal_args->devices_dir);
  cal->add_option("--measured", cal_args->measured,
                  "Measured energy and time per iteration without the profiler (JSON in the\n"
                  "format of ../shared/traces/h200/measured.json); not needed for EMO traces with\n"
                  "measured energy (`emo trace`), which carry their own (default: none)")
      ->check(CLI::ExistingFile);
  cal->add_option("--trace", cal_args->traces,
                  "Trace of a measured workload; its file name (without .json/.gz) names the\n"
                  "workload in --measured, else an EMO trace's own measurement is used. Repeat for\n"
                  "each workload (at least two groups)")
      ->required()
      ->check(CLI::ExistingFile);
  cal->add_option("--json", cal_args->json_path, "Write the result as JSON ('-' = stdout)");
  cal->add_flag("--update-device", cal_args->update_device,
                "Write the activity scale fitted on all workloads into the device file");
  cal->callback([cal_args, &exit_code] { exit_code = RunCalibrate(*cal_args); });

  auto classify_args = std::make_shared<ClassifyArgs>();
  CLI::App* classify = cmd->add_subcommand(
      "classify",
      "Print the class (compute, memory, communication, other) and kind the model gives each\n"
      "kernel name, as the analysis and the device file's per-class and per-kind numbers see it (in a\n"
      "trace, a GEMM kernel that a convolution operator launched counts as a conv)");
  classify
      ->add_option("names", classify_args->names,
                   "Kernel names as traces show them (quote each); '-' reads one name per line from\n"
                   "standard input")
      ->required();
  classify->add_option("--json", classify_args->json_path, "Write the result as JSON ('-' = stdout)");
  classify->add_option("--device", classify_args->device,
                       "Also print the clock-bound share (comp_share) this device model gives each\n"
                       "kernel, and whether it is the kind's own figure or its class's (name or file;\n"
                       "default: none, no share printed)");
  classify->callback([classify_args, &exit_code] { exit_code = RunClassify(*classify_args); });
}

}  // namespace emo::cli
