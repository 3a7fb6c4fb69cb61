#include "emo/policy/policy.h"

#include <map>

#include <fmt/format.h>

#include "emo/policy/launch_anchors.h"

namespace emo::policy {

namespace {

using nlohmann::json;

// The plan's slowdown as spins after launch calls, for `emo run --actuator emulate`.
json EmulateJson(const LaunchAnchors& anchors) {
  json spins = json::array();
  for (const auto& s : anchors.spins) spins.push_back({s.call, s.ns});
  return {{"note", "per spin: [launch call of the iteration, ns of GPU time added after it on that call's stream]; "
                   "the model's extra time of the pack's ops at the planned clock over the default, carried per "
                   "stream to at least spin_min_us"},
          {"spin_min_us", NsToUs(kSpinMinNs)},
          {"extra_us_per_iteration", NsToUs(anchors.extra_ns)},
          {"extra_without_call_us", NsToUs(anchors.extra_without_call_ns)},
          {"spins", spins}};
}

// What one planned trace contributes: its GPUs, each with the plan's packs and predictions.
void AddGpus(const opt::PlannedTrace& pt, json& gpus) {
  const auto& a = *pt.analysis;
  const auto& plan = pt.plan;
  std::map<int32_t, std::vector<const opt::PlannedPack*>> per_device;
  for (const auto& p : plan.packs) per_device[p.pack.device].push_back(&p);
  const auto conf = analysis::ConfidenceOf(a);
  const auto saving = opt::SavingRangePct(plan);
  const auto* fragile = opt::FragileTime(plan);
  for (const auto& [device, planned] : per_device) {
    const LaunchAnchors anchors = AnchorPacks(a, planned, SwitchLeadNs(plan));
    json packs = json::array();
    for (size_t i = 0; i < planned.size(); ++i) {
      const auto& p = *planned[i];
      json pack = {{"first_launch", p.pack.first_launch},
                   {"first_call", anchors.first_call[i]},
                   {"switch_call", anchors.switch_call[i]},
                   {"ops", p.pack.ops.size()},
                   {"clock_mhz", p.clock.value()},
                   {"window_us", NsToUs(p.pack.end - p.pack.start)},
                   {"busy_us_default", p.busy_s_default * 1e6},
                   {"busy_us_planned", p.busy_s * 1e6}};
      if (anchors.gpu_switch_call[i] != kNoCall) {
        pack["gpu_switch_call"] = anchors.gpu_switch_call[i];
        pack["gpu_switch_lead_us"] = NsToUs(anchors.gpu_switch_lead_ns[i]);
      }
      packs.push_back(std::move(pack));
    }
    // Packs asked for at the same launch call as the pack before them, or at an earlier one (a pack
    // shorter than the switch lead on this loop, or one whose lead falls where the program makes no
    // launch call, blocked in a sync): at run time only the later switch takes effect. Cyclic: the
    // next iteration's first pack follows the last (its switch_call plus an iteration's calls).
    // The same for the GPU anchors (a pack without one switches at its launch call).
    const auto n = static_cast<int64_t>(anchors.calls_per_iteration);
    const size_t packs_n = planned.size();  // clang before 16 cannot capture a structured binding
    auto sharing = [&](const std::vector<int64_t>& calls) {
      size_t count = 0;
      for (size_t i = 1; i <= packs_n && packs_n > 1; ++i) {
        const int64_t at = i < packs_n ? calls[i] : calls[0] + n;
        count += at <= calls[i - 1];
      }
      return count;
    };
    std::vector<int64_t> on_gpu = anchors.gpu_switch_call;
    for (size_t i = 0; i < on_gpu.size(); ++i) {
      if (on_gpu[i] == kNoCall) on_gpu[i] = anchors.switch_call[i];
    }
    json g = {{"rank", a.trace->meta.rank},
              {"packs_sharing_a_switch_call", sharing(anchors.switch_call)},
              {"packs_sharing_a_gpu_switch_call", sharing(on_gpu)},
              {"device", device},
              {"trace", a.trace->meta.source_path},
              {"steady_iteration", a.iterations.iterations[a.steady].name},
              {"launch_calls_per_iteration", anchors.calls_per_iteration},
              {"packs_without_launch_call", anchors.packs_without_call},
              {"timeline", a.corrected() ? "corrected" : "traced"},
              {"confidence", conf.level},
              {"confidence_note", conf.note},
              {"device_check", {{"outcome", model::DeviceCheckName(pt.device_check.outcome)},
                                {"trace_gpu", pt.device_check.trace_gpu},
                                {"overridden", pt.device_mismatch_allowed}}},
              {"power_capped", plan.power_capped(*pt.device)},
              {"predicted",
               {{"iteration_time_us", NsToUs(plan.plan.time_ns)},
                {"energy_j", plan.plan.energy_j},
                {"baseline_time_us", NsToUs(plan.baseline.time_ns)},
                {"baseline_energy_j", plan.baseline.energy_j},
                {"saving_pct", opt::SavingPct(plan.baseline, plan.plan)},
                {"saving_range_pct", {saving[0], saving[1]}},
                {"deadline_us", NsToUs(plan.deadline_ns)},
                {"fragile_time", fragile ? json(opt::FragileTimeWarning(plan, *fragile)) : json(nullptr)},
                {"note", "predicted by the device model; not measured"}}},
              {"packs", packs},
              {"emulate", EmulateJson(anchors)}};
    gpus.push_back(std::move(g));
  }
}

}  // namespace

json PolicyJson(const std::vector<opt::PlannedTrace>& plans, const json* job) {
  json gpus = json::array();
  json traces = json::array();
  for (const auto& pt : plans) {
    AddGpus(pt, gpus);
    traces.push_back(pt.analysis->trace->meta.source_path);
  }
  json j = {
      {"emo_policy_version", kPolicyVersion},
      {"traces", traces},
      {"anchor", "packs start at the first_launch-th GPU op (kernel, memcpy, memset) launched on the device "
                 "in each iteration, counted in launch (correlation) order; at run time, at the first_call-th "
                 "kernel or graph launch call of the iteration, and each pack's clock is asked for after the "
                 "switch_call-th (negative: counted back from the iteration's first call); where gpu_switch_call is "
                 "given, the switch waits instead until the op that call launched has completed on the GPU "
                 "(gpu_switch_lead_us before the pack's start in the trace)"},
      {"gpus", gpus},
  };
  if (!plans.empty()) {
    const auto& first = plans.front();
    j["model"] = {{"device", first.plan.device}, {"source", first.plan.model_source}};
    j["switch_latency_us"] = NsToUs(first.plan.switch_latency_ns);
    j["switch_lead_us"] = NsToUs(SwitchLeadNs(first.plan));
    // The regex that finds the iterations (null: no marker matched, the whole trace is one).
    const auto& its = first.analysis->iterations;
    j["iteration_regex"] = its.from_marker ? json(its.regex) : json(nullptr);
  }
  // A plan whose timeline is not trusted says so where the actuator and its user read it.
  json warnings = json::array();
  for (const auto& g : gpus) {
    if (g["confidence"] == "low") {
      warnings.push_back("rank " + g["rank"].dump() + ": low confidence in the timeline (" +
                         g["confidence_note"].get<std::string>() + "); predicted saving ranges " +
                         g["predicted"]["saving_range_pct"].dump() + " %");
    }
    for (const auto& [field, when] : {std::pair<const char*, const char*>{"packs_sharing_a_gpu_switch_call", ""},
                                      {"packs_sharing_a_switch_call", " with `emo run --switch-on launch`"}}) {
      const size_t sharing = g[field].get<size_t>();
      if (sharing == 0) continue;
      warnings.push_back(fmt::format("rank {}: {} of its {} packs are asked for at the same launch call as the pack "
                                     "before them, or an earlier one{} (packs shorter than the switch lead of {} us on "
                                     "this loop, or a lead that falls where the program makes no launch call): at run "
                                     "time only the later of those switches takes effect",
                                     g["rank"].dump(), sharing, g["packs"].size(), when,
                                     j["switch_lead_us"].get<double>()));
      break;  // one warning: for the default (on the GPU), else for --switch-on launch
    }
    if (g["predicted"]["fragile_time"].is_string()) {
      warnings.push_back("rank " + g["rank"].dump() + ": " + g["predicted"]["fragile_time"].get<std::string>());
    }
    if (g["device_check"]["overridden"].get<bool>()) {
      warnings.push_back("rank " + g["rank"].dump() + ": planned for a device model of another GPU than the trace's (" +
                         g["device_check"]["trace_gpu"].get<std::string>() + ")");
    }
  }
  if (job != nullptr) {
    json k = *job;
    double energy = 0, baseline = 0;
    for (const auto& g : gpus) {
      energy += g["predicted"]["energy_j"].get<double>();
      baseline += g["predicted"]["baseline_energy_j"].get<double>();
    }
    k["energy_j"] = energy;
    k["baseline_energy_j"] = baseline;
    k["saving_pct"] = baseline > 0 ? 100.0 * (1.0 - energy / baseline) : 0.0;
    k["note"] = "energy per iteration summed over the job's GPUs; times and energies predicted by the device model "
                "and the joint replay, not measured";
    if (!k["met"].get<bool>()) {
      warnings.push_back(fmt::format("the job: every rank's plan at once, replayed jointly, is {:+.2f} % against its "
                                     "target of +{:.2f} %",
                                     k["slowdown_pct"].get<double>(), k["target_pct"].get<double>()));
    }
    j["job"] = std::move(k);
  }
  j["warnings"] = warnings;
  return j;
}

}  // namespace emo::policy
