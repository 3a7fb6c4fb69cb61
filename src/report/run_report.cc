#include "emo/report/run_report.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/base/text.h"
#include "emo/trace/launch_calls.h"

namespace emo::report {
namespace {

double Ms(TimeNs ns) { return static_cast<double>(ns) * 1e-6; }

// A JSON number, or null for the -1 sentinels.
nlohmann::json OrNull(double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

// Tracing's cost on the step, in % of the untraced step.
double OverheadPct(const trace::RunMeasurement& r) {
  return 100.0 * (static_cast<double>(r.traced_step_ns) / static_cast<double>(r.untraced_step_ns) - 1.0);
}

// Interleaved default-clock iterations needed to compare with (one re-timing's worth).
constexpr int64_t kMinInterleaved = 5;

// `emo run --actuator emulate`: the plan's predicted slowdown against the one measured with its
// extra time added as spin kernels; nullopt where the run was not emulated or is too short.
struct Emulated {
  double predicted_pct, measured_pct;
  std::string model;
  std::string against;  // which iterations the plan's are compared with
  // The spin launches' own host time per followed iteration, in % of the default clock's step:
  // on a CPU-bound loop it adds to the measured slowdown (an upper bound of that share).
  double launch_cost_pct = 0;
  // The same slowdown from each re-timing against the plan's iterations next to it
  // (PlanSplit::paired_in_force_over_default), over `paired_runs` re-timings; none when 0.
  double paired_pct = 0;
  int64_t paired_runs = 0;
};
std::optional<Emulated> EmulatedOf(const trace::RunMeasurement& r) {
  const auto& p = r.policy_run;
  auto get = [&p](const char* key) {
    const auto it = p.find(key);
    return it == p.end() ? std::string() : it->second;
  };
  if (get("actuator") != "emulate" || !r.plan) return std::nullopt;
  const auto& split = *r.plan;
  // The default clock's iterations interleaved with the plan's (the guard's re-timings) when
  // there are enough: they share the plan's stretch of the run; else those before the plan.
  const bool interleaved = split.interleaved_default_step.second >= kMinInterleaved && split.in_force_step.second > 0;
  const TimeNs plan_ns = interleaved ? split.in_force_step.first : split.under_step.first;
  const TimeNs default_ns = interleaved ? split.interleaved_default_step.first : split.before_step.first;
  const double predicted = std::atof(get("predicted_ns").c_str());
  const double baseline = std::atof(get("predicted_baseline_ns").c_str());
  if (predicted <= 0 || baseline <= 0 || plan_ns <= 0 || default_ns <= 0) return std::nullopt;
  const double followed = std::atof(get("iterations_followed").c_str());
  const double launch_cost_pct =
      followed > 0 ? 100.0 * std::atof(get("emulate_launch_ns").c_str()) / followed / static_cast<double>(default_ns) : 0.0;
  return Emulated{100.0 * (predicted / baseline - 1.0),
                  100.0 * (static_cast<double>(plan_ns) / static_cast<double>(default_ns) - 1.0), get("model"),
                  interleaved ? fmt::format("{} iterations under the plan against {} at the default clock between them "
                                            "(the guard's re-timings)",
                                            split.in_force_step.second, split.interleaved_default_step.second)
                              : fmt::format("{} iterations under the plan against {} before it", split.under_step.second,
                                            split.before_step.second),
                  launch_cost_pct,
                  100.0 * (split.paired_in_force_over_default.first - 1.0),
                  split.paired_in_force_over_default.second};
}

// A plan holds for the iteration it was made from. When this run's default-clock iterations and
// the plan's baseline are in two regimes of the program (trace::InAnotherRegime: a warm-up phase
// traced, other inputs or sizes, or the same program on a busier host, as an H100 host's decode
// loop read x1.62 in one process of three), the plan's predicted slowdown and saving are not
// this run's.
struct PlanRegime {
  double planned_ms = 0, default_ms = 0;
  std::string default_from;  // which of this run's iterations
  bool Differs() const { return trace::InAnotherRegime(default_ms, planned_ms); }
};
std::optional<PlanRegime> PlanRegimeOf(const trace::RunMeasurement& r) {
  const auto it = r.policy_run.find("predicted_baseline_ns");
  if (!r.plan || it == r.policy_run.end()) return std::nullopt;
  const double planned_ns = std::atof(it->second.c_str());
  const auto& split = *r.plan;
  const bool interleaved = split.interleaved_default_step.second >= kMinInterleaved;
  const auto& step = interleaved ? split.interleaved_default_step : split.before_step;
  // A step from fewer than kMinInterleaved iterations says too little to warn on.
  if (planned_ns <= 0 || step.first <= 0 || step.second < kMinInterleaved) return std::nullopt;
  return PlanRegime{planned_ns * 1e-6, Ms(step.first),
                    fmt::format("median of {} iterations at the default clock {}", step.second,
                                interleaved ? "between the plan's (the guard's re-timings)" : "before the plan")};
}

// `emo run` with a traced window: each pack switch against its pack's start on the GPU in the
// same run. The run says when each lock took effect and when the pack's iteration began (meta
// run.switch_times_ns, on the trace's clock) and where each pack starts in the iteration's
// launch calls (run.pack_first_calls); the trace has the calls and the ops they launched.
struct SwitchLeads {
  size_t asked = 0;    // switches the run timed
  size_t matched = 0;  // of which the pack's first op is in the traced window
  size_t after = 0;    // took effect only after the pack's first op started
  size_t no_call = 0;  // the iteration's first launch call is not in the trace (outside its window)
  size_t no_op = 0;    // the pack's first call or its GPU op is not in the trace
  double median_ms = 0, p10_ms = 0, min_ms = 0, max_ms = 0;
};
constexpr TimeNs kCallSlackNs = 20'000;
std::optional<SwitchLeads> SwitchLeadsOf(const trace::Trace& t) {
  const auto& first_call = t.meta.run->pack_first_calls;
  if (t.meta.run->switch_times.empty() || first_call.empty()) return std::nullopt;
  const std::vector<trace::LaunchCall> calls = trace::CountedLaunchCalls(t);
  std::unordered_map<int64_t, TimeNs> gpu_start;  // correlation -> first start of its ops
  for (size_t i = 0; i < t.gpu.size(); ++i) {
    if (t.gpu.correlation[i] < 0) continue;
    auto [it, fresh] = gpu_start.emplace(t.gpu.correlation[i], t.gpu.start[i]);
    if (!fresh) it->second = std::min(it->second, t.gpu.start[i]);
  }
  SwitchLeads l;
  std::vector<double> ms;
  for (const auto& s : t.meta.run->switch_times) {
    if (static_cast<size_t>(s.pack) >= first_call.size() || first_call[static_cast<size_t>(s.pack)] < 0) continue;
    ++l.asked;
    // The iteration's first call: the tracer timed its launch in that call's callback, which
    // CUPTI's record of the call may not enclose to the nanosecond: the call enclosing that time,
    // else the one starting nearest to it (within kCallSlackNs).
    const auto c = std::upper_bound(calls.begin(), calls.end(), s.iteration_start_ns,
                                    [](TimeNs v, const trace::LaunchCall& call) { return v < call.start; });
    auto first = calls.end();
    if (c != calls.begin() && std::prev(c)->end >= s.iteration_start_ns) {
      first = std::prev(c);
    } else {
      TimeNs best = kCallSlackNs + 1;
      if (c != calls.begin() && s.iteration_start_ns - std::prev(c)->end < best) {
        best = s.iteration_start_ns - std::prev(c)->end;
        first = std::prev(c);
      }
      if (c != calls.end() && c->start - s.iteration_start_ns < best) first = c;
    }
    if (first == calls.end()) {
      ++l.no_call;
      continue;
    }
    const size_t k = static_cast<size_t>(first - calls.begin()) + static_cast<size_t>(first_call[static_cast<size_t>(s.pack)]);
    const auto op = k < calls.size() ? gpu_start.find(t.cpu.correlation[calls[k].event]) : gpu_start.end();
    if (op == gpu_start.end()) {
      ++l.no_op;
      continue;
    }
    ms.push_back(static_cast<double>(op->second - s.applied_ns) * 1e-6);
  }
  if (l.asked == 0) return std::nullopt;
  l.matched = ms.size();
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    l.after = static_cast<size_t>(std::count_if(ms.begin(), ms.end(), [](double v) { return v < 0; }));
    l.median_ms = ms[ms.size() / 2];
    l.p10_ms = ms[ms.size() / 10];
    l.min_ms = ms.front();
    l.max_ms = ms.back();
  }
  return l;
}

}  // namespace

nlohmann::json RunToJson(const std::string& path, const trace::Trace& t) {
  nlohmann::json j;
  j["path"] = path;
  j["format"] = t.meta.format;
  j["rank"] = t.meta.rank;
  if (!t.meta.run) {
    j["note"] = "not an EMO trace: no run measurements";
    return j;
  }
  const auto& r = *t.meta.run;
  j["mode"] = r.mode;
  j["host"] = r.host;
  j["pid"] = r.pid;
  j["complete"] = r.complete;
  j["end_note"] = r.end_note;
  j["end_reason"] = r.end_reason;
  j["session"] = r.session;
  j["cupti_detaches"] = r.cupti_detaches;
  // What the tracer asked of the program's threads: the callbacks per iteration once the loop
  // was followed without its launches (the untraced steps' share of the tracer's cost there).
  if (r.callbacks_launch_off >= 0) {
    auto count = [](int64_t v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); };
    const bool per = r.callbacks_launch_off >= 0 && r.callbacks_launch_off_iterations > 0;
    j["callbacks"] = {{"non_launch", count(r.callbacks_non_launch)},
                      {"launch_off", count(r.callbacks_launch_off)},
                      {"launch_off_iterations", count(r.callbacks_launch_off_iterations)},
                      {"per_iteration_launch_off",
                       per ? nlohmann::json(static_cast<double>(r.callbacks_launch_off) /
                                            static_cast<double>(r.callbacks_launch_off_iterations))
                           : nlohmann::json(nullptr)}};
  }
  j["iterations"] = {{"found", r.iterations},
                     {"source", r.iteration_source},
                     {"anchor", r.iteration_anchor.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.iteration_anchor)},
                     {"traced", r.traced_iterations},
                     {"untraced_used", r.untraced_iterations}};
  const bool both = r.untraced_step_ns > 0 && r.traced_step_ns > 0;
  j["step_time_ms"] = {{"untraced", OrNull(r.untraced_step_ns > 0 ? Ms(r.untraced_step_ns) : -1)},
                       {"untraced_p10", OrNull(r.untraced_step_p10_ns > 0 ? Ms(r.untraced_step_p10_ns) : -1)},
                       {"untraced_p90", OrNull(r.untraced_step_p90_ns > 0 ? Ms(r.untraced_step_p90_ns) : -1)},
                       {"untraced_first_third", OrNull(r.untraced_first_third_ns > 0 ? Ms(r.untraced_first_third_ns) : -1)},
                       {"untraced_last_third", OrNull(r.untraced_last_third_ns > 0 ? Ms(r.untraced_last_third_ns) : -1)},
                       {"steady", !r.Drifted()},
                       {"traced", OrNull(r.traced_step_ns > 0 ? Ms(r.traced_step_ns) : -1)},
                       {"tracing_overhead_pct", both ? nlohmann::json(OverheadPct(r)) : nlohmann::json(nullptr)}};
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : r.gpus) gpus.push_back(analysis::GpuEnergyToJson(g));
  j["gpus"] = gpus;
  j["records"] = {{"gpu_ops", t.gpu.size()}, {"cpu_events", t.cpu.size()}, {"dropped", r.dropped_records}};
  nlohmann::json per = nlohmann::json::array();
  for (size_t i = 0; i < r.iteration_ns.size(); ++i) {
    per.push_back({{"ms", Ms(r.iteration_ns[i])}, {"traced", static_cast<bool>(r.iteration_traced[i])}});
  }
  j["iteration_times"] = per;
  if (!r.policy_run.empty()) {
    nlohmann::json run = nlohmann::json::object();
    for (const auto& [key, value] : r.policy_run) run[key] = value;
    j["policy_run"] = run;
  }
  if (const auto l = SwitchLeadsOf(t)) {
    j["switch_timing"] = {{"switches_timed", l->asked},
                          {"in_traced_window", l->matched},
                          {"after_the_pack_started", l->after},
                          {"outside_the_window", {{"iteration_start_not_traced", l->no_call},
                                                  {"pack_start_not_traced", l->no_op}}},
                          {"lead_ms_median", OrNull(l->matched > 0 ? l->median_ms : -1)},
                          {"lead_ms_p10", l->matched > 0 ? nlohmann::json(l->p10_ms) : nlohmann::json(nullptr)},
                          {"lead_ms_min", l->matched > 0 ? nlohmann::json(l->min_ms) : nlohmann::json(nullptr)},
                          {"lead_ms_max", l->matched > 0 ? nlohmann::json(l->max_ms) : nlohmann::json(nullptr)},
                          {"note", "measured per pack switch: the GPU start of the pack's first op in this run's trace "
                                   "minus the time the switch took effect (the actuator's call returned), both on the "
                                   "trace's clock; negative: the pack started before its clock was asked for"}};
  }
  if (r.plan) {
    auto part = [](const std::pair<TimeNs, int64_t>& step, const std::vector<trace::GpuEnergy>& energies) {
      nlohmann::json g = nlohmann::json::array();
      for (const auto& e : energies) g.push_back(analysis::GpuEnergyToJson(e));
      return nlohmann::json{{"step_ms", OrNull(step.first > 0 ? Ms(step.first) : -1)}, {"iterations", step.second}, {"gpus", g}};
    };
    auto steps = [](const std::pair<TimeNs, int64_t>& step) {
      return nlohmann::json{{"step_ms", OrNull(step.first > 0 ? Ms(step.first) : -1)}, {"iterations", step.second}};
    };
    j["policy_effect"] = {{"before_plan", part(r.plan->before_step, r.plan->before_gpus)},
                          {"under_plan", part(r.plan->under_step, r.plan->under_gpus)},
                          {"in_force", steps(r.plan->in_force_step)},
                          {"interleaved_default", steps(r.plan->interleaved_default_step)},
                          {"note", "measured: the program's iterations before the plan's first switch and while it held "
                                   "(the guard's re-timings of the default clock included)"}};
    if (const auto g = PlanRegimeOf(r)) {
      j["policy_effect"]["plan_iteration"] = {
          {"planned_ms", g->planned_ms},
          {"default_clock_ms", g->default_ms},
          {"default_clock_from", g->default_from},
          {"matches", !g->Differs()},
          {"note", fmt::format("the plan's iteration at the default clock (its baseline) against this run's; beyond "
                               "x{:.1f} either way the program ran in another regime than the trace the plan came "
                               "from, and the plan's predictions do not apply",
                               trace::kRegimeFactor)}};
    }
    if (const auto e = EmulatedOf(r)) {
      j["policy_effect"]["emulated"] = {
          {"predicted_slowdown_pct", e->predicted_pct},
          {"measured_slowdown_pct", e->measured_pct},
          {"difference_points", e->measured_pct - e->predicted_pct},
          {"model", e->model},
          {"measured_from", e->against},
          {"spin_launch_cost_pct", e->launch_cost_pct},
          {"paired_slowdown_pct", e->paired_runs > 0 ? nlohmann::json(e->paired_pct) : nlohmann::json(nullptr)},
          {"paired_retimings", e->paired_runs},
          {"paired_note", fmt::format("each re-timing of the default clock against at most {} of the plan's iterations on "
                                      "each side of it, the median over re-timings: a pace that drifts over tens of "
                                      "iterations cancels in each pair",
                                      trace::RunMeasurement::PlanSplit::kPairedNeighbours)},
          {"note", "the clock did not change: the plan's extra time per op (the model's) ran as spin kernels on the "
                   "program's streams; the slowdown is measured, the energy under the plan is not the plan's"}};
    }
  }
  return j;
}

namespace {

// "  SM clock ..." for a GPU whose clocks were read (traces written since the clock record), else "".
std::string ClockLine(const trace::GpuEnergy& g) {
  auto part = [](const trace::ClockStats& c, const char* where) {
    std::string p = fmt::format("{:.0f} MHz {} (median of {} reads, {:.0f}-{:.0f})", c.median_mhz, where, c.samples,
                                c.min_mhz, c.max_mhz);
    if (c.power_capped_share > 0) p += fmt::format(", the power limit holding it {:.0f} % of the time", 100.0 * c.power_capped_share);
    return p;
  };
  std::vector<std::string> parts;
  if (g.traced_clock.Known()) parts.push_back(part(g.traced_clock, "traced"));
  if (g.clock.Known()) parts.push_back(part(g.clock, "untraced"));
  if (parts.empty()) return "";
  return fmt::format("  GPU {} SM clock   {}\n", g.device, fmt::join(parts, "; "));
}

}  // namespace

std::string RunText(const std::string& path, const trace::Trace& t) {
  std::string s = fmt::format("{}\n", path);
  if (!t.meta.run) return s + "  not an EMO trace: no run measurements\n";
  const auto& r = *t.meta.run;
  s += fmt::format("  process           pid {} on {}{}\n", r.pid, r.host.empty() ? "?" : r.host,
                   t.meta.rank >= 0 ? fmt::format(", rank {}", t.meta.rank) : "");
  if (r.iterations == 0) {
    s += "  iterations        none found (no NVTX iteration range, no repeating launch sequence): no step time or "
         "energy per iteration\n";
  } else {
    s += fmt::format("  iterations        {} found ({}{}){}\n", r.iterations,
                     r.iteration_source == "nvtx" ? "NVTX ranges" : "period of the kernel-launch sequence",
                     r.iteration_anchor.empty() ? "" : ", then timed by " + r.iteration_anchor + " with the launch callbacks off",
                     r.mode == "trace" ? fmt::format(", {} traced", r.traced_iterations) : "");
  }
  if (r.untraced_step_ns > 0) {
    s += fmt::format("  step time         {:.3f} ms untraced (median of {}, p10-p90 {:.3f}-{:.3f} ms)", Ms(r.untraced_step_ns),
                     r.untraced_iterations, Ms(r.untraced_step_p10_ns), Ms(r.untraced_step_p90_ns));
    if (r.traced_step_ns > 0) s += fmt::format(", {:.3f} ms traced ({:+.1f} %)", Ms(r.traced_step_ns), OverheadPct(r));
    s += "\n";
  } else if (r.traced_step_ns > 0) {
    s += fmt::format("  step time         {:.3f} ms traced; no untraced iterations to compare (run more iterations)\n",
                     Ms(r.traced_step_ns));
  }
  if (r.Drifted()) {
    s += fmt::format("  WARNING           the step changed during the run: {:.3f} ms over the first third of the untraced "
                     "iterations, {:.3f} ms over the last third (x{:.2f}); the median mixes two regimes of the program "
                     "(a warm-up, a new phase, a busier host), and what was traced describes one of them at most: "
                     "trace and run it where its step is steady\n",
                     Ms(r.untraced_first_third_ns), Ms(r.untraced_last_third_ns),
                     static_cast<double>(r.untraced_last_third_ns) / static_cast<double>(r.untraced_first_third_ns));
  }
  for (const auto& g : r.gpus) {
    s += fmt::format("  GPU {} {:<12}", g.device, g.name.empty() ? "(unnamed)" : g.name);
    const double window_s = static_cast<double>(g.window_end - g.window_start) * 1e-9;
    if (g.HasEnergy() && !g.Measurable()) {
      s += fmt::format(" energy per iteration not measurable: {:.2f} s of untraced iterations is too short for an NVML "
                       "counter that updates every {:.0f} ms ({:.3f} J +- {:.3f} J); run the program longer",
                       window_s, Ms(g.counter_period_ns), g.energy_per_iteration_j, g.uncertainty_per_iteration_j);
    } else if (g.HasEnergy()) {
      s += fmt::format(" {:.3f} J per iteration +- {:.3f} J over {} ({:.2f} s, NVML counter updating every {:.0f} ms); "
                       "{:.0f} W busy",
                       g.energy_per_iteration_j, g.uncertainty_per_iteration_j, Plural(static_cast<uint64_t>(g.iterations), "iteration"),
                       window_s, Ms(g.counter_period_ns), g.busy_power_w);
    } else if (g.counter_reads == 0) {
      s += " no energy readings (NVML unavailable?)";
    } else {
      s += " no energy per iteration: the counter reads do not cover untraced iterations";
    }
    if (g.idle_power_w >= 0) s += fmt::format(", {:.0f} W idle before the first iteration", g.idle_power_w);
    s += "\n";
    s += ClockLine(g);
  }
  if (r.mode == "trace") {
    s += fmt::format("  recorded          {}, {}; {}\n", Plural(t.gpu.size(), "GPU op"), Plural(t.cpu.size(), "CPU event"),
                     r.dropped_records > 0 ? fmt::format("{} LOST (raise --buffer-mib or trace fewer iterations)",
                                                         Plural(static_cast<uint64_t>(r.dropped_records), "record"))
                                           : "none dropped");
  }
  if (!r.policy_run.empty()) {
    const auto& p = r.policy_run;
    auto get = [&p](const char* key) {
      const auto it = p.find(key);
      return it == p.end() ? std::string("?") : it->second;
    };
    if (get("followed") == "1") {
      s += fmt::format("  clock policy      followed on {} through {}: {} switches asked, {} applied, {} failed, {} late, "
                       "{} redundant skipped, {} fallbacks to the default clock{}; clock at exit: {}\n",
                       get("gpu"), get("actuator"), get("switches"), get("switches_applied"), get("switches_failed"),
                       get("switches_late"), get("switches_redundant"), get("fallbacks"),
                       get("guard_tripped") == "1" ? ", GUARD TRIPPED (iterations ran over the target)" : "",
                       get("clock_at_exit"));
      if (get("actuator") == "emulate") {
        s += fmt::format("  emulation         {} spin kernels added {:.3f} ms of GPU time in all ({} activations); {} "
                         "spins skipped for a launch whose stream was unknown{}\n",
                         get("emulate_spins"), std::atof(get("emulate_spin_ns").c_str()) * 1e-6, get("emulate_activations"),
                         get("emulate_unknown_stream"), get("emulate_failed") == "1" ? "; STOPPED after an error" : "");
      }
    } else {
      s += fmt::format("  clock policy      NOT followed: {}\n", get("not_followed_because"));
    }
  }
  if (const auto l = SwitchLeadsOf(t)) {
    if (l->matched > 0) {
      s += fmt::format("  switch timing     {} of {} pack switches fall in the traced window: each took effect a median "
                       "{:.3f} ms (p10 {:.3f}, min {:.3f}, max {:.3f}) before its pack's first op started on the GPU; {} "
                       "only after it\n",
                       l->matched, l->asked, l->median_ms, l->p10_ms, l->min_ms, l->max_ms, l->after);
    } else {
      s += fmt::format("  switch timing     {} pack switches timed, none in a traced window (trace one with `emo run "
                       "--trace F`)\n",
                       l->asked);
    }
  }
  if (r.plan) {
    const auto& p = *r.plan;
    if (p.before_step.first > 0 && p.under_step.first > 0) {
      s += fmt::format("  under the plan    {:.3f} ms per iteration (median of {}) against {:.3f} ms before it ({}): "
                       "{:+.1f} %\n",
                       Ms(p.under_step.first), p.under_step.second, Ms(p.before_step.first), p.before_step.second,
                       100.0 * (static_cast<double>(p.under_step.first) / static_cast<double>(p.before_step.first) - 1.0));
    } else {
      s += fmt::format("  under the plan    {} iterations timed under it, {} before it: too few to compare\n",
                       p.under_step.second, p.before_step.second);
    }
    if (const auto g = PlanRegimeOf(r); g && g->Differs()) {
      s += fmt::format("  WARNING           the plan was made for a {:.3f} ms iteration at the default clock; this run's "
                       "take {:.3f} ms ({}), x{:.2f}: the program ran in another regime than the trace the plan came "
                       "from (a warm-up phase traced? other inputs? a busier host?), so the plan's predicted slowdown "
                       "and saving do not apply; trace the program where it runs steadily and plan again\n",
                       g->planned_ms, g->default_ms, g->default_from, g->default_ms / g->planned_ms);
    }
    if (const auto emulated = EmulatedOf(r)) {
      s += fmt::format("  emulated plan     measured {:+.1f} % ({}) against {:+.1f} % predicted by the plan (model {}): "
                       "{:+.1f} points; the spin launches' own host time is {:.1f} % of a step (on a CPU-bound loop "
                       "it adds to the measured slowdown); the clock did not change, so the energy below is not the "
                       "plan's\n",
                       emulated->measured_pct, emulated->against, emulated->predicted_pct, emulated->model,
                       emulated->measured_pct - emulated->predicted_pct, emulated->launch_cost_pct);
      if (emulated->paired_runs > 0) {
        s += fmt::format("  emulated, paired  measured {:+.1f} % ({} re-timings of the default clock, each against the "
                         "plan's iterations next to it): {:+.1f} points\n",
                         emulated->paired_pct, emulated->paired_runs, emulated->paired_pct - emulated->predicted_pct);
      }
    }
    for (size_t i = 0; i < p.under_gpus.size() && i < p.before_gpus.size(); ++i) {
      const auto& u = p.under_gpus[i];
      const auto& b = p.before_gpus[i];
      if (u.Measurable() && b.Measurable()) {
        s += fmt::format("  GPU {} energy     {:.3f} J per iteration under the plan (+- {:.3f}) against {:.3f} J before "
                         "(+- {:.3f}): {:+.1f} %, measured\n",
                         u.device, u.energy_per_iteration_j, u.uncertainty_per_iteration_j, b.energy_per_iteration_j,
                         b.uncertainty_per_iteration_j,
                         100.0 * (u.energy_per_iteration_j / b.energy_per_iteration_j - 1.0));
      } else {
        s += fmt::format("  GPU {} energy     not measurable on both sides of the plan's start (windows of {} and {} "
                         "iterations against an NVML counter updating every {:.0f} ms): run longer\n",
                         u.device, b.iterations, u.iterations, Ms(u.counter_period_ns));
      }
    }
  }
  if (!r.complete) s += fmt::format("  incomplete        {}\n", r.end_note);
  return s;
}

}  // namespace emo::report
