#include "emo/policy/policy.h"

#include <map>

namespace emo::policy {

nlohmann::json PolicyJson(const analysis::TraceAnalysis& a, const opt::TracePlan& plan) {
  using nlohmann::json;
  json gpus = json::array();
  std::map<int32_t, json> per_device;
  for (const auto& p : plan.packs) {
    auto& packs = per_device[p.pack.device];
    if (packs.is_null()) packs = json::array();
    packs.push_back({{"first_launch", p.pack.first_launch},
                     {"ops", p.pack.ops.size()},
                     {"clock_mhz", p.clock.value()},
                     {"window_us", NsToUs(p.pack.end - p.pack.start)},
                     {"busy_us_default", p.busy_s_default * 1e6},
                     {"busy_us_planned", p.busy_s * 1e6}});
  }
  for (auto& [device, packs] : per_device) {
    gpus.push_back({{"rank", a.trace->meta.rank}, {"device", device}, {"packs", packs}});
  }
  return {
      {"emo_policy_version", kPolicyVersion},
      {"trace", a.trace->meta.source_path},
      // The plan is made for the steady iteration: name it, and the regex that finds the others.
      {"iteration_marker", a.iterations.iterations[a.steady].name},
      {"iteration_regex", a.iterations.from_marker ? nlohmann::json(a.iterations.regex) : nlohmann::json(nullptr)},
      {"anchor", "packs start at the first_launch-th GPU op (kernel, memcpy, memset) launched on the device "
                 "in each iteration, counted in launch (correlation) order"},
      {"timeline", a.corrected() ? "corrected" : "traced"},
      {"model", {{"device", plan.device}, {"source", plan.model_source}}},
      {"predicted",
       {{"iteration_time_us", NsToUs(plan.plan.time_ns)},
        {"energy_j", plan.plan.energy_j},
        {"baseline_time_us", NsToUs(plan.baseline.time_ns)},
        {"baseline_energy_j", plan.baseline.energy_j},
        {"deadline_us", NsToUs(plan.deadline_ns)},
        {"note", "predicted by the device model; not measured"}}},
      {"gpus", gpus},
  };
}

}  // namespace emo::policy
