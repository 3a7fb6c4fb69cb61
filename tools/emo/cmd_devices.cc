// `emo devices`: list the device models EMO knows (devices/*.json) with the source of their
// numbers.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "emo/model/device.h"

namespace emo::cli {
namespace {

using nlohmann::json;

// Human-readable output goes to stdout, or to stderr when the JSON goes to stdout ("--json -").
std::FILE* HumanOut(const std::string& json_path) { return json_path == "-" ? stderr : stdout; }

struct DevicesArgs {
  std::string dir;
  std::string json_path;
  bool sources = false;
};

json DeviceJson(const model::DeviceModel& d) {
  json classes = json::object();
  for (int i = 0; i < model::kNumKernelClasses; ++i) {
    const auto c = static_cast<model::KernelClass>(i);
    classes[std::string(model::KernelClassName(c))] = {{"comp_share", d.Prior(c).comp_share},
                                                       {"activity_w_per_mhz", d.Prior(c).activity}};
  }
  // Clock-bound shares the file measured per kind (a kind it does not name keeps its class's) and
  // power shares for a kind's kernels of unknown work (absent: 1).
  json kinds = json::object();
  for (int k = 0; k < model::kNumShareKinds; ++k) {
    const std::string name(model::ShareKindName(k));
    if (!std::isnan(d.kind_comp_share[static_cast<size_t>(k)])) {
      kinds[name]["comp_share"] = d.kind_comp_share[static_cast<size_t>(k)];
    }
    if (!std::isnan(d.kind_power_share[static_cast<size_t>(k)])) {
      kinds[name]["power_share"] = d.kind_power_share[static_cast<size_t>(k)];
    }
  }
  json sources = json::object();
  for (const auto& [field, p] : d.provenance) {
    json s = {{"source", p.source}, {"assumption", p.assumption}};
    if (!p.reasoning.empty()) s["reasoning"] = p.reasoning;
    sources[field] = std::move(s);
  }
  return {{"name", d.name},
          {"gpu", d.gpu},
          {"path", d.path},
          {"clocks",
           {{"count", d.clocks.size()},
            {"min_mhz", d.clocks.front().value()},
            {"max_mhz", d.clocks.back().value()}}},
          {"default_clock_mhz", d.default_clock.value()},
          {"idle_power_w", d.idle_power.value()},
          {"idle_power_min_clock_w",
           d.idle_power_min_clock.value() > 0 ? json(d.idle_power_min_clock.value()) : json()},
          {"power_limit_w", d.params.power_limit.value()},
          {"cap_power_w", d.cap_power.value()},
          {"static_power_w", d.params.static_power.value()},
          {"voltage",
           {{"ridge_mhz", d.params.voltage.ridge.value()},
            {"slope_per_mhz", d.params.voltage.slope_per_mhz},
            {"v_at_f_max", d.params.voltage.At(d.params.f_max)}}},
          {"classes", std::move(classes)},
          {"kinds", std::move(kinds)},
          {"assumptions", d.assumptions},
          {"source", d.provenance.count("clocks_mhz") ? d.provenance.at("clocks_mhz").source : ""},
          {"sources", std::move(sources)}};
}

int RunDevices(const DevicesArgs& args) {
  std::FILE* out = HumanOut(args.json_path);
  const std::string dir = args.dir.empty() ? model::DefaultDevicesDir() : args.dir;
  Result<std::vector<model::DeviceModel>> devices = model::LoadDevices(dir);
  if (!devices.ok()) return Fail("devices", devices.status());
  fmt::print(out, "{:<10} {:<34} {:>6} {:>11} {:>8} {:>8} {:>8} {:>7}  {}\n", "name", "gpu",
             "clocks", "range MHz", "idle W", "limit W", "cap W", "assumed", "file");
  json list = json::array();
  for (const model::DeviceModel& d : *devices) {
    fmt::print(out, "{:<10} {:<34} {:>6} {:>5.0f}-{:<5.0f} {:>8.1f} {:>8.0f} {:>8.1f} {:>7}  {}\n",
               d.name, d.gpu.substr(0, 34), d.clocks.size(), d.clocks.front().value(),
               d.clocks.back().value(), d.idle_power.value(), d.params.power_limit.value(),
               d.cap_power.value(), d.assumptions, d.path);
    if (args.sources) {
      for (const auto& [field, p] : d.provenance) {
        fmt::print(out, "    {:<34} {}{}\n", field, p.assumption ? "[assumption] " : "", p.source);
      }
    }
    list.push_back(DeviceJson(d));
  }
  fmt::print(out,
             "('assumed': numbers marked as assumptions; `emo devices --sources` prints every "
             "number's source)\n");
  Status st = WriteJson(args.json_path, json{{"devices_dir", dir}, {"devices", std::move(list)}});
  if (!st.ok()) return Fail("devices", st);
  return 0;
}

}  // namespace

void SetupDevices(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<DevicesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the GPU models EMO can plan for (devices/*.json): clock table, idle power, power\n"
      "limit, and where every number comes from");
  AddDevicesDirFlag(cmd, args->dir);
  cmd->add_option("--json", args->json_path, "Write the device models as JSON ('-' = stdout)");
  cmd->add_flag("--sources", args->sources, "Print the source of every number");
  cmd->callback([args, &exit_code] { exit_code = RunDevices(*args); });
}

}  // namespace emo::cli
