#include "emo/report/plan_report.h"

#include <fmt/format.h>

#include <optional>
#include <utility>

#include "emo/base/text.h"

namespace emo::report {
namespace {

using nlohmann::json;

json PointJson(const opt::PlanPoint& baseline, const opt::PlanPoint& p) {
  return {{"time_us", NsToUs(p.time_ns)},
          {"energy_j", p.energy_j},
          {"saving_pct", opt::SavingPct(baseline, p)},
          {"slowdown_pct", opt::SlowdownPct(baseline, p)}};
}

json NullIfNegative(double x) { return x < 0 ? json(nullptr) : json(x); }

// Per matrix-multiply share kind in the trace: its kernel time, how much of it has known work,
// the time-weighted share its kernels of known work draw by their work and by their launch alone
// (null without such kernels), and the power share the device file gives its kernels of unknown
// work.
json MatmulKindsJson(const model::WorkCoverage& c, const model::DeviceModel& d) {
  json out = json::array();
  for (int k = 0; k < model::kNumShareKinds; ++k) {
    const auto& kind = c.kinds[static_cast<size_t>(k)];
    if (kind.matmul_s <= 0) continue;
    const bool known = kind.known_s > 0;
    out.push_back({{"kind", model::ShareKindName(k)},
                   {"matmul_ms", 1e3 * kind.matmul_s},
                   {"known_ms", 1e3 * kind.known_s},
                   {"tile_ms", 1e3 * kind.tile_s},
                   {"work_share", known ? json(kind.work_share_s / kind.known_s) : json(nullptr)},
                   {"launch_share", known ? json(kind.launch_share_s / kind.known_s) : json(nullptr)},
                   {"power_share", d.PowerShare(k)}});
  }
  return out;
}

// The shapes warning: matrix multiplies are at least this share of the kernel time, and their
// work is known (from shapes, or estimated from a GEMM's tile) for less than this share of theirs.
constexpr double kMatmulWarnShare = 0.1;
constexpr double kKnownWorkWarnShare = 0.5;

// The caveats a reader must see beside the numbers: the timeline's confidence, the device check,
// the power limit and GEMM work the model cannot see.
std::vector<std::string> Warnings(const opt::PlannedTrace& pt) {
  const auto& a = *pt.analysis;
  const auto& plan = pt.plan;
  std::vector<std::string> w;
  const auto conf = analysis::ConfidenceOf(a);
  if (conf.level == "low") {
    const auto saving = opt::SavingRangePct(plan);
    w.push_back(fmt::format(
        "this plan rests on a low-confidence timeline (confidence_note says why): over its range {:.1f}-{:.1f} us "
        "the same clocks save {:.1f} to {:.1f} %; measure the unprofiled step and pass --step-time for a plan to act "
        "on",
        NsToUs(a.corrected_lo_ns), NsToUs(a.corrected_hi_ns), saving[0], saving[1]));
  }
  if (pt.device_check.outcome == model::DeviceCheck::Outcome::kMismatch) {
    w.push_back(fmt::format("device mismatch, planned anyway (--allow-device-mismatch): {}", pt.device_check.message));
  } else if (pt.device_check.outcome == model::DeviceCheck::Outcome::kUnchecked) {
    w.push_back("device not checked: " + pt.device_check.message);
  }
  if (!a.iterations.from_marker) {
    w.push_back("no iteration marker matched (" + a.iterations.regex +
                "): the whole trace, warm-up included, is planned as one iteration; pass --iteration REGEX");
  }
  for (const auto& row : a.AllDiagnostics().Rows()) {
    if (row.severity == Severity::kError) {
      w.push_back(fmt::format("trace problem {} x{}: {}", row.name, row.count, row.description));
    }
  }
  if (plan.throttle_clock_source == "trace") {
    if (plan.power_capped(*pt.device)) {
      w.push_back(fmt::format(
          "power-capped: the trace recorded the SM clock at {:.0f} MHz over its traced iterations (NVML), held by the "
          "power limit; energies are computed there, with the device's activity scaled by {:.3f} so that the model's "
          "power there is the {:.0f} W cap, and clocks above it save nothing",
          plan.throttle_clock.value(), plan.trace_power_scale, pt.device->cap_power.value()));
    } else if (plan.trace_power_scale < 1.0) {
      w.push_back(fmt::format(
          "the trace recorded the default clock over its traced iterations (NVML), so its power was at most the {:.0f} "
          "W the power limiter holds, where the model put it higher: energies are computed with the device's activity "
          "scaled by {:.3f}",
          pt.device->cap_power.value(), plan.trace_power_scale));
    }
  } else if (plan.throttle_clock_source == "step") {
    if (plan.power_capped(*pt.device)) {
      w.push_back(fmt::format(
          "power-capped: on this GPU-bound loop the measured step needs its GPU ops {:.1f} % longer than traced, as at "
          "{:.0f} MHz: taken as the power limit holding the measured run there (a short trace can end before the "
          "limiter acts), energies are computed there, with the device's activity scaled by {:.3f} so that the "
          "model's power there is the {:.0f} W cap, and clocks above it save nothing",
          100.0 * (a.overhead.gpu_scale - 1.0), plan.throttle_clock.value(), plan.trace_power_scale,
          pt.device->cap_power.value()));
    }
  } else if (plan.power_capped(*pt.device)) {
    w.push_back(fmt::format(
        "power-capped: at the default clock the model puts the iteration at {:.0f} W, above the {:.0f} W the power "
        "limiter holds ({:.0f} W limit), so the GPU ran throttled near {:.0f} MHz; energies are computed there, and "
        "clocks above it save nothing",
        plan.default_demand_w, pt.device->cap_power.value(), pt.device->params.power_limit.value(),
        plan.throttle_clock.value()));
  }
  if (const auto* f = opt::FragileTime(plan)) {
    w.push_back(opt::FragileTimeWarning(plan, *f));
  }
  const model::WorkCoverage& wc = plan.work_coverage;
  if (plan.work_curves && wc.matmul_s >= kMatmulWarnShare * wc.kernel_s &&
      wc.EstimatedShare() < kKnownWorkWarnShare) {
    const double unknown_s = wc.matmul_s - wc.known_s - wc.tile_s;
    w.push_back(fmt::format(
        "the model knows no work for {:.0f} % of the trace's matrix-multiply kernel time ({:.1f} of {:.1f} ms; "
        "{:.0f} % of all kernel time; {:.1f} ms more is estimated from GEMM tiles): their operators have no shapes "
        "in the trace, or are ones whose work EMO does not derive (trace/op_work.h lists those it does), so those "
        "kernels draw an average for their kind (their class's power, times the kind's power share where the "
        "device file gives one) instead of their work's (docs/model.md 6a), which left H200 loops without shapes "
        "off by up to 14 % (BENCHMARKS.md, \"A convolution's power without its work\"); {}",
        100.0 * unknown_s / wc.matmul_s, 1e3 * unknown_s, 1e3 * wc.matmul_s, 100.0 * wc.matmul_s / wc.kernel_s,
        1e3 * wc.tile_s,
        a.trace->meta.format == "kineto-json"
            ? "profile with record_shapes=True where it is missing"
            : "this trace format carries no operator shapes (an EMO trace's CUPTI records have no arguments): a "
              "PyTorch-profiler trace of the same program with record_shapes=True gives them"));
  }
  return w;
}

// The energy per iteration NVML measured over an EMO trace's untraced iterations, summed over
// its GPUs, and its uncertainty; nullopt for other traces or a window too short to measure.
std::optional<std::pair<double, double>> MeasuredEnergy(const analysis::TraceAnalysis& a) {
  if (!a.trace->meta.run) return std::nullopt;
  double energy = 0, uncertainty = 0;
  for (const auto& g : a.trace->meta.run->gpus) {
    if (!g.Measurable()) return std::nullopt;
    energy += g.energy_per_iteration_j;
    uncertainty += g.uncertainty_per_iteration_j;
  }
  if (energy <= 0) return std::nullopt;
  return std::make_pair(energy, uncertainty);
}

}  // namespace

json PlanToJson(const opt::PlannedTrace& pt) {
  const auto& a = *pt.analysis;
  const auto& plan = pt.plan;
  const auto& b = plan.baseline;
  json j;
  j["trace"] = a.trace->meta.source_path;
  j["rank"] = a.trace->meta.rank;
  j["timeline"] = a.corrected() ? "corrected" : "traced";
  j["steady_iteration"] = a.iterations.iterations[a.steady].name;
  const auto conf = analysis::ConfidenceOf(a);
  j["confidence"] = conf.level;
  j["confidence_note"] = conf.note;
  j["timeline_range_us"] = {NsToUs(a.corrected() ? a.corrected_lo_ns : a.timeline_ns()),
                            NsToUs(a.corrected() ? a.corrected_hi_ns : a.timeline_ns())};
  j["baseline"] = {{"time_us", NsToUs(b.time_ns)}, {"energy_j", b.energy_j}};
  if (const auto m = MeasuredEnergy(a)) {
    j["baseline"]["measured"] = {
        {"energy_j", m->first},
        {"uncertainty_j", m->second},
        {"model_error_pct", 100.0 * (b.energy_j / m->first - 1.0)},
        {"note", "measured by NVML's energy counter over the same run's untraced iterations; energy_j above, and "
                 "every saving, is the device model's prediction"}};
  }
  j["plan"] = PointJson(b, plan.plan);
  const auto saving = opt::SavingRangePct(plan);
  const auto slowdown = opt::SlowdownRangePct(plan);
  j["plan"]["saving_range_pct"] = {saving[0], saving[1]};
  j["plan"]["slowdown_range_pct"] = {slowdown[0], slowdown[1]};
  json sensitivity = json::array();
  for (const auto& s : plan.sensitivity) {
    sensitivity.push_back({{"extra_time_factor", s.extra_factor},
                           {"time_us", NsToUs(s.plan.time_ns)},
                           {"slowdown_pct", opt::SlowdownPct(b, s.plan)}});
  }
  j["plan"]["sensitivity"] = std::move(sensitivity);
  j["plan"]["sensitivity_note"] = "the plan's clocks replayed with every op's modelled extra time multiplied by "
                                  "extra_time_factor; fragile_time says whether the target then breaks by more than "
                                  "the extra time alone adds";
  j["plan"]["fragile_time"] = opt::FragileTime(plan) != nullptr;
  j["plan"]["time_margin"] = plan.time_margin;
  if (plan.auto_fragile_margins) j["plan"]["time_margin_auto_fragile_at"] = *plan.auto_fragile_margins;
  j["plan"]["packs"] = plan.packs.size();
  j["plan"]["switches"] = plan.switches;
  j["plan"]["from"] = plan.plan_from;
  j["plan"]["packing"] = plan.packing;
  j["plan"]["min_pack_ms"] = static_cast<double>(plan.min_pack_ns) * 1e-6;
  j["plan"]["min_pack_source"] = plan.min_pack_source;
  j["plan"]["switch_latency_us"] = static_cast<double>(plan.switch_latency_ns) * 1e-3;
  j["plan"]["merged_packs"] = plan.merged_packs;
  json packings = json::object();
  for (const auto& k : plan.packings) {
    packings[k.name] = PointJson(b, k.point);
    packings[k.name]["packs"] = k.packs;
  }
  j["packings"] = packings;
  j["plan"]["scored_on"] = "kernel graph (every op scaled by its kernel class's time ratio at its pack's clock, replayed)";
  if (pt.plan.joint) {
    j["plan"]["scored_on"] = j["plan"]["scored_on"].get<std::string>() +
                             "; timed with the job's other ranks held where the joint replay puts them (its waits for "
                             "them are slack; a later arrival at a collective is charged as the delay it causes)";
    j["plan"]["timed_with_job"] = true;
  }
  j["static_best"] = PointJson(b, plan.static_best);
  j["static_best"]["clock_mhz"] = plan.static_best_clock.value();
  if (plan.pass_level_phases > 0) {
    j["baselines"]["pass_level"] = PointJson(b, plan.pass_level);
    j["baselines"]["pass_level"]["phases"] = plan.pass_level_phases;
    j["baselines"]["per_kernel_blind"] = PointJson(b, plan.per_kernel_blind);
    j["baselines"]["per_kernel_blind"]["meets_target"] = plan.per_kernel_blind.time_ns <= plan.deadline_ns;
  }
  const auto& pg = plan.pack_graph;
  j["pack_graph"] = {{"baseline", {{"time_us", NsToUs(pg.baseline.time_ns)}, {"energy_j", pg.baseline.energy_j}}},
                     {"plan", {{"time_us", NsToUs(pg.plan.time_ns)}, {"energy_j", pg.plan.energy_j}}},
                     {"solver_plan", {{"time_us", NsToUs(pg.solved.time_ns)}, {"energy_j", pg.solved.energy_j},
                                      {"replayed_time_us", NsToUs(pg.solved_replayed.time_ns)},
                                      {"replayed_energy_j", pg.solved_replayed.energy_j}}},
                     {"deadline_tightenings", pg.tightenings}};
  j["solver"] = {{"name", pg.solver},
                 {"outcome", opt::OutcomeName(pg.outcome)},
                 {"solve_ms", pg.solve_ms},
                 {"gap_pct", NullIfNegative(pg.gap_pct)},
                 {"exact_gap_pct", pg.exact_outcome.empty() ? json(nullptr) : json(pg.exact_gap_pct)},
                 {"exact_outcome", pg.exact_outcome.empty() ? json(nullptr) : json(pg.exact_outcome)},
                 {"plan_ms", plan.solve_ms},
                 {"replays", plan.replays}};
  const auto& d = *pt.device;
  j["model"] = {{"device", plan.device},
                {"source", plan.model_source},
                {"note", "energies are predictions of the device model, not measurements"},
                {"matmul_work", {{"work_curves", plan.work_curves},
                                 {"kernel_ms", 1e3 * plan.work_coverage.kernel_s},
                                 {"matmul_ms", 1e3 * plan.work_coverage.matmul_s},
                                 {"known_ms", 1e3 * plan.work_coverage.known_s},
                                 {"tile_ms", 1e3 * plan.work_coverage.tile_s},
                                 {"known_pct", 100.0 * plan.work_coverage.KnownShare()},
                                 {"kinds", MatmulKindsJson(plan.work_coverage, d)}}},
                {"device_check", {{"outcome", model::DeviceCheckName(pt.device_check.outcome)},
                                  {"trace_gpu", pt.device_check.trace_gpu},
                                  {"model_gpu", d.gpu},
                                  {"overridden", pt.device_mismatch_allowed},
                                  {"message", pt.device_check.message}}}};
  j["power"] = {{"limit_w", d.params.power_limit.value()},
                {"cap_w", d.cap_power.value()},
                {"default_demand_w", plan.default_demand_w},
                {"capped", plan.power_capped(d)},
                {"throttle_clock_mhz", plan.throttle_clock.value()},
                {"throttle_clock_from", plan.throttle_clock_source},
                {"trace_power_scale", plan.trace_power_scale},
                {"baseline_avg_w", b.time_ns > 0 ? b.energy_j / NsToS(b.time_ns) : 0.0},
                {"plan_avg_w", plan.plan.time_ns > 0 ? plan.plan.energy_j / NsToS(plan.plan.time_ns) : 0.0}};
  j["warnings"] = Warnings(pt);
  return j;
}

std::string PlanText(const opt::PlannedTrace& pt) {
  const auto& a = *pt.analysis;
  const auto& plan = pt.plan;
  const auto& b = plan.baseline;
  std::string out = fmt::format("{} ({} timeline, steady iteration {}; energies predicted by device model {})\n",
                                a.trace->meta.source_path, a.corrected() ? "corrected" : "traced",
                                a.iterations.iterations[a.steady].name, plan.model_source);
  auto row = [&](std::string label, const opt::PlanPoint& p, std::string note) {
    out += fmt::format("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}{}\n", label, NsToUs(p.time_ns), p.energy_j,
                       opt::SavingPct(b, p), note.empty() ? "" : "   " + note);
  };
  out += fmt::format("  {:<22} {:>12} {:>12} {:>9}\n", "", "time us", "energy J", "saving %");
  out += fmt::format("  {:<22} {:>12.1f} {:>12.3f} {:>9}{}\n", "all at default clock", NsToUs(b.time_ns), b.energy_j, "-",
                     plan.power_capped(*pt.device)
                         ? fmt::format("   (power-capped: runs near {:.0f} MHz)", plan.throttle_clock.value())
                         : "");
  if (const auto m = MeasuredEnergy(a)) {
    out += fmt::format("  {:<22} {:>12} {:>12.3f} {:>9}   (NVML, the run's untraced iterations, +- {:.3f} J; the model "
                       "above is {:+.1f} %)\n",
                       "measured at default", "", m->first, "-", m->second, 100.0 * (b.energy_j / m->first - 1.0));
  }
  row(fmt::format("static {:.0f} MHz", plan.static_best_clock.value()), plan.static_best, "");
  if (plan.pass_level_phases > 0) {
    row(fmt::format("pass-level ({})", Plural(plan.pass_level_phases, "phase")), plan.pass_level, "");
    row("per-kernel, no slack", plan.per_kernel_blind,
        plan.per_kernel_blind.time_ns <= plan.deadline_ns ? "" : "(misses the target)");
  }
  const auto saving = opt::SavingRangePct(plan);
  row("EMO plan", plan.plan,
      fmt::format("({}, {} per iteration; from the {})", Plural(plan.packs.size(), "pack"),
                  Plural(plan.switches, "switch", "switches"), plan.plan_from));
  for (const auto& k : plan.packings) {
    // The plan's own packing is the row above; the phases' plan is the pass-level row.
    if (k.name == plan.packing || k.name == "phases") continue;
    row(fmt::format("  {} ({})", k.name == "time-window" ? "time windows" : k.name, k.packs), k.point,
        "(packs of another packing, planned the same way)");
  }
  const auto& pg = plan.pack_graph;
  out += fmt::format("  {:<22} {:>12.1f} {:>12.3f} {:>9.2f}   (pack graph; {} solver {}, {:.1f} ms{}{})\n",
                     "  on the pack graph", NsToUs(pg.plan.time_ns), pg.plan.energy_j,
                     opt::SavingPct(pg.baseline, pg.plan), pg.solver, opt::OutcomeName(pg.outcome), pg.solve_ms,
                     pg.gap_pct >= 0 ? fmt::format(", {:.3f} % above its bound", pg.gap_pct) : "",
                     !pg.exact_outcome.empty() ? fmt::format(", {:+.3f} % vs CBC ({})", pg.exact_gap_pct, pg.exact_outcome)
                                               : "");
  out += fmt::format("  packs at least {:.1f} ms ({}){}\n", static_cast<double>(plan.min_pack_ns) * 1e-6,
                     plan.min_pack_source,
                     plan.switch_latency_ns > 0
                         ? fmt::format("; each switch costs {:.0f} us at the old clock", static_cast<double>(plan.switch_latency_ns) * 1e-3)
                         : "; switches cost nothing (no switch latency known)");
  const auto conf = analysis::ConfidenceOf(a);
  out += fmt::format("  timeline confidence {}: {}\n  saving {:.1f} to {:.1f} % over the timeline's range {:.1f}-{:.1f} us\n",
                     conf.level, conf.note, saving[0], saving[1],
                     NsToUs(a.corrected() ? a.corrected_lo_ns : a.timeline_ns()),
                     NsToUs(a.corrected() ? a.corrected_hi_ns : a.timeline_ns()));
  if (!plan.sensitivity.empty()) {
    std::string factors, slowdowns;
    for (const auto& s : plan.sensitivity) {
      factors += fmt::format("{}x{:g}", factors.empty() ? "" : " / ", s.extra_factor);
      slowdowns += fmt::format("{}{:+.1f}", slowdowns.empty() ? "" : " / ", opt::SlowdownPct(b, s.plan));
    }
    out += fmt::format("  sensitivity: with the modelled extra time {}, the plan is {} % (planned {:+.1f} %, target "
                       "+{:.1f} %{})\n",
                       factors, slowdowns, opt::SlowdownPct(b, plan.plan), opt::TargetPct(plan),
                       plan.time_margin > 0 ? fmt::format(", planned to hold it at x{:g}", 1.0 + plan.time_margin) : "");
  }
  if (plan.auto_fragile_margins) {
    std::string tried;
    for (const double m : *plan.auto_fragile_margins) tried += fmt::format("{}{:g}", tried.empty() ? "" : ", ", m);
    out += fmt::format("  time margin: auto, {:g}{}\n", plan.time_margin,
                       tried.empty() ? " (the first plan was not fragile)"
                                     : fmt::format(" (the plans at {} were fragile)", tried));
  }
  for (const auto& w : Warnings(pt)) out += "  warning: " + w + "\n";
  return out;
}

std::string FrontierCsv(const std::vector<opt::PlannedTrace>& plans) {
  std::string csv = "trace,rank,pack_graph_time_us,energy_j\n";
  for (const auto& pt : plans) {
    std::string trace = pt.analysis->trace->meta.source_path;
    if (trace.find_first_of(",\"\n") != std::string::npos) {
      std::string quoted = "\"";
      for (char c : trace) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      trace = quoted + "\"";
    }
    for (const auto& p : pt.plan.frontier) {
      csv += fmt::format("{},{},{:.3f},{:.6f}\n", trace, pt.analysis->trace->meta.rank, NsToUs(p.time_ns), p.energy_j);
    }
  }
  return csv;
}

namespace {
std::string PlannedAs(const opt::JobPlan& p) {
  if (!p.jointly) return "per rank (--per-rank)";
  return p.fell_back ? "per rank (the joint plans did not meet the job's target)" : "jointly";
}
double JobSlowdownPct(const opt::JobPlan& p) {
  return 100.0 * (static_cast<double>(p.planned_ns) / static_cast<double>(std::max<TimeNs>(1, p.baseline_ns)) - 1.0);
}
}  // namespace

json JobPlanToJson(const opt::JobPlan& p, size_t collectives_matched) {
  json rounds = json::array();
  for (const auto& r : p.rounds) {
    json j = {{"rank_target_pct", 100.0 * r.rank_target}, {"job_us", NsToUs(r.job_ns)}};
    if (r.per_rank) j["per_rank"] = true;
    rounds.push_back(std::move(j));
  }
  return {{"planned", PlannedAs(p)},
          {"about", "the ranks of one job, each planned with its peers held where the joint replay of the analysis "
                    "timelines puts them (its waits for them are slack); every rank's plan then replayed jointly at "
                    "once, and the ranks' target cut until the job meets it. Times: the slowest rank's steady "
                    "iteration (--per-rank: each rank planned alone)"},
          {"collectives_matched", collectives_matched},
          {"baseline_us", NsToUs(p.baseline_ns)},
          {"planned_us", NsToUs(p.planned_ns)},
          {"slowdown_pct", JobSlowdownPct(p)},
          {"target_pct", 100.0 * p.target},
          {"met", p.met()},
          {"rank_target_pct", 100.0 * p.rank_target},
          {"rounds", rounds},
          {"converged", p.converged}};
}

std::string JobPlanText(const opt::JobPlan& p, size_t ranks, size_t collectives_matched) {
  return fmt::format("job of {} ranks, planned {} ({} collectives matched): every rank's plan at once, replayed jointly: "
                     "{:.1f} us against {:.1f} us at the default clocks ({:+.2f} %, target +{:.2f} %{}; each rank planned "
                     "to +{:.2f} %){}\n",
                     ranks, PlannedAs(p), collectives_matched, NsToUs(p.planned_ns), NsToUs(p.baseline_ns),
                     JobSlowdownPct(p), 100.0 * p.target, p.met() ? ", met" : ", NOT met", 100.0 * p.rank_target,
                     p.converged ? "" : " (the joint replay did NOT converge)");
}

}  // namespace emo::report
