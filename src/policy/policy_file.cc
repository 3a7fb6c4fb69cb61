#include "emo/policy/policy_file.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emo/base/file.h"
#include "emo/policy/policy.h"

namespace emo::policy {
namespace {

using nlohmann::json;

// The field `key` of `j` as a T, or an error naming the file and the field's path.
template <typename T>
Result<T> Field(const json& j, const std::string& path, const std::string& where, const char* key) {
  const auto it = j.find(key);
  const std::string field = where.empty() ? key : where + "." + key;
  if (it == j.end()) return InvalidArgument(fmt::format("{}: {} is missing", path, field));
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return InvalidArgument(fmt::format("{}: {} is not a string", path, field));
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return InvalidArgument(fmt::format("{}: {} is not an integer", path, field));
  } else {
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      return InvalidArgument(fmt::format("{}: {} is not a finite number", path, field));
    }
  }
  return it->get<T>();
}

#define EMO_FIELD(var, T, j, where, key)                   \
  auto var##_or = Field<T>(j, path, where, key);           \
  if (!var##_or.ok()) return var##_or.status();            \
  const T var = *var##_or

Result<RunGpu> ReadGpu(const json& g, const std::string& path, const std::string& where) {
  if (!g.is_object()) return InvalidArgument(fmt::format("{}: {} is not an object", path, where));
  RunGpu gpu;
  EMO_FIELD(rank, int, g, where, "rank");
  EMO_FIELD(device, int, g, where, "device");
  EMO_FIELD(calls, int64_t, g, where, "launch_calls_per_iteration");
  gpu.rank = rank;
  gpu.device = device;
  if (!g.contains("device_check") || !g["device_check"].is_object()) {
    return InvalidArgument(fmt::format("{}: {}.device_check is missing", path, where));
  }
  EMO_FIELD(trace_gpu, std::string, g["device_check"], where + ".device_check", "trace_gpu");
  gpu.gpu_name = trace_gpu;
  if (calls <= 0) {
    return InvalidArgument(fmt::format(
        "{}: {} has no kernel launch calls in its steady iteration (launch_calls_per_iteration {}): the trace it was "
        "made from has no CUDA runtime or driver launch events, so its packs cannot be found at run time; trace the "
        "program with `emo trace` (or the PyTorch profiler with CUDA activities) and optimize that",
        path, where, calls));
  }
  gpu.calls_per_iteration = static_cast<uint32_t>(calls);
  if (!g.contains("predicted") || !g["predicted"].is_object()) {
    return InvalidArgument(fmt::format("{}: {}.predicted is missing", path, where));
  }
  const json& predicted = g["predicted"];
  EMO_FIELD(time, double, predicted, where + ".predicted", "iteration_time_us");
  EMO_FIELD(baseline, double, predicted, where + ".predicted", "baseline_time_us");
  EMO_FIELD(deadline, double, predicted, where + ".predicted", "deadline_us");
  gpu.iteration_time_us = time;
  gpu.baseline_time_us = baseline;
  gpu.deadline_us = deadline;
  if (!g.contains("packs") || !g["packs"].is_array() || g["packs"].empty()) {
    return InvalidArgument(fmt::format("{}: {}.packs is missing or empty", path, where));
  }
  for (size_t i = 0; i < g["packs"].size(); ++i) {
    const json& p = g["packs"][i];
    const std::string at = fmt::format("{}.packs[{}]", where, i);
    if (!p.is_object()) return InvalidArgument(fmt::format("{}: {} is not an object", path, at));
    EMO_FIELD(first, int64_t, p, at, "first_call");
    EMO_FIELD(switch_call, int64_t, p, at, "switch_call");
    EMO_FIELD(mhz, double, p, at, "clock_mhz");
    if (mhz <= 0) return InvalidArgument(fmt::format("{}: {}.clock_mhz is {} MHz; a clock must be positive", path, at, mhz));
    if (first < 0 || first > calls) {
      return InvalidArgument(
          fmt::format("{}: {}.first_call {} lies outside the iteration's {} launch calls", path, at, first, calls));
    }
    if (switch_call < -calls || switch_call > calls) {
      return InvalidArgument(fmt::format("{}: {}.switch_call {} is more than an iteration ({} launch calls) away",
                                         path, at, switch_call, calls));
    }
    if (!gpu.packs.empty() && first < gpu.packs.back().first_call) {
      return InvalidArgument(fmt::format("{}: {}.first_call {} comes before the previous pack's {}; packs must be in "
                                         "launch order",
                                         path, at, first, gpu.packs.back().first_call));
    }
    RunPack pack{first, switch_call, mhz, std::nullopt};
    if (const auto gpu_call = p.find("gpu_switch_call"); gpu_call != p.end()) {
      if (!gpu_call->is_number_integer() || gpu_call->get<int64_t>() < -calls || gpu_call->get<int64_t>() >= calls) {
        return InvalidArgument(fmt::format("{}: {}.gpu_switch_call is not a launch call within an iteration ({} calls) "
                                           "before the pack",
                                           path, at, calls));
      }
      pack.gpu_switch_call = gpu_call->get<int64_t>();
    }
    gpu.packs.push_back(pack);
  }
  if (const auto e = g.find("emulate"); e != g.end()) {
    const std::string at = where + ".emulate";
    if (!e->is_object()) return InvalidArgument(fmt::format("{}: {} is not an object", path, at));
    EMO_FIELD(without, double, *e, at, "extra_without_call_us");
    gpu.not_emulated_extra_us = without;
    const auto spins = e->find("spins");
    if (spins == e->end() || !spins->is_array()) return InvalidArgument(fmt::format("{}: {}.spins is missing", path, at));
    for (size_t i = 0; i < spins->size(); ++i) {
      const json& s = (*spins)[i];
      if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer() ||
          s[0].get<int64_t>() < 0 || s[0].get<int64_t>() >= calls || s[1].get<int64_t>() <= 0 ||
          (!gpu.spins.empty() && s[0].get<int64_t>() <= gpu.spins.back().call)) {
        return InvalidArgument(fmt::format("{}: {}.spins[{}] is not [call, ns] with a call of the iteration (0 to {}) "
                                           "after the previous spin's and a positive ns",
                                           path, at, i, calls - 1));
      }
      gpu.spins.push_back({s[0].get<int64_t>(), s[1].get<int64_t>()});
      gpu.emulated_extra_us += static_cast<double>(gpu.spins.back().ns) / 1e3;
    }
    gpu.has_emulation = true;
  }
  return gpu;
}

}  // namespace

Result<RunPolicy> ReadRunPolicy(const std::string& path) {
  auto text = ReadFileMaybeGzip(path);
  if (!text.ok()) return text.status();
  return ParseRunPolicy(*text, path);
}

Result<RunPolicy> ParseRunPolicy(std::string_view text, const std::string& path) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(fmt::format("{} is not JSON: not an EMO clock policy", path));
  if (!j.is_object() || !j.contains("emo_policy_version")) {
    return InvalidArgument(
        fmt::format("{} is not an EMO clock policy (it has no emo_policy_version; make one with `emo optimize TRACE "
                    "--policy F`)",
                    path));
  }
  RunPolicy policy;
  policy.path = path;
  EMO_FIELD(version, int, j, "", "emo_policy_version");
  policy.version = version;
  if (version != kPolicyVersion) {
    return InvalidArgument(fmt::format(
        "{} is a version {} clock policy; this emo follows version {} only ({}): make it again with this emo's `emo "
        "optimize --policy`",
        path, version, kPolicyVersion,
        version < kPolicyVersion ? "older policies do not anchor packs in launch calls" : "it comes from a newer emo"));
  }
  if (!j.contains("model") || !j["model"].is_object()) return InvalidArgument(fmt::format("{}: model is missing", path));
  EMO_FIELD(device, std::string, j["model"], "model", "device");
  EMO_FIELD(source, std::string, j["model"], "model", "source");
  EMO_FIELD(lead, double, j, "", "switch_lead_us");
  policy.model_device = device;
  policy.model_source = source;
  policy.switch_lead_us = lead;
  if (!j.contains("gpus") || !j["gpus"].is_array() || j["gpus"].empty()) {
    return InvalidArgument(fmt::format("{}: gpus is missing or empty (no plan to follow)", path));
  }
  for (size_t i = 0; i < j["gpus"].size(); ++i) {
    auto gpu = ReadGpu(j["gpus"][i], path, fmt::format("gpus[{}]", i));
    if (!gpu.ok()) return gpu.status();
    policy.gpus.push_back(std::move(gpu).value());
  }
  if (j.contains("warnings") && j["warnings"].is_array()) {
    for (const auto& w : j["warnings"]) {
      if (w.is_string()) policy.warnings.push_back(w.get<std::string>());
    }
  }
  return policy;
}

}  // namespace emo::policy
