#include "emo/model/device.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "emo/base/file.h"

#ifndef EMO_DEFAULT_DEVICES_DIR
#define EMO_DEFAULT_DEVICES_DIR "devices"
#endif

namespace emo::model {
namespace {

using nlohmann::json;

// Reads a sourced number at `key` of `obj` into `out`, recording its provenance under `field`.
class FieldReader {
 public:
  FieldReader(DeviceModel& dev, const std::string& path) : dev_(dev), path_(path) {}

  Status Number(const json& obj, const std::string& key, const std::string& field, double& out,
                bool required = true) {
    if (!obj.is_object() || !obj.contains(key)) {
      if (!required) return Status::Ok();
      return ParseError(fmt::format("{}: missing '{}'", path_, field));
    }
    const json& v = obj.at(key);
    if (!v.is_object() || !v.contains("value") || !v.at("value").is_number()) {
      return ParseError(fmt::format(
          "{}: '{}' must be an object {{\"value\": number, \"source\": \"...\"}}", path_, field));
    }
    out = v.at("value").get<double>();
    return Record(v, field);
  }

  Status Record(const json& v, const std::string& field) {
    Provenance p;
    if (!v.contains("source") || !v.at("source").is_string() ||
        v.at("source").get<std::string>().empty()) {
      return ParseError(
          fmt::format("{}: '{}' has no source: every number in a device file says "
                      "where it comes from",
                      path_, field));
    }
    p.source = v.at("source").get<std::string>();
    if (v.contains("assumption")) {
      if (!v.at("assumption").is_boolean()) {
        return ParseError(fmt::format("{}: '{}.assumption' must be true or false", path_, field));
      }
      p.assumption = v.at("assumption").get<bool>();
    }
    if (v.contains("reasoning") && v.at("reasoning").is_string()) {
      p.reasoning = v.at("reasoning").get<std::string>();
    }
    if (p.assumption && p.reasoning.empty()) {
      return ParseError(
          fmt::format("{}: '{}' is marked as an assumption but gives no reasoning", path_, field));
    }
    dev_.assumptions += p.assumption ? 1 : 0;
    dev_.provenance[field] = std::move(p);
    return Status::Ok();
  }

 private:
  DeviceModel& dev_;
  const std::string& path_;
};

Status ReadClocks(const json& j, const std::string& path, FieldReader& reader, DeviceModel& dev) {
  if (!j.contains("clocks_mhz") || !j.at("clocks_mhz").is_object()) {
    return ParseError(fmt::format("{}: missing 'clocks_mhz' object", path));
  }
  const json& c = j.at("clocks_mhz");
  std::vector<double> values;
  if (c.contains("values")) {
    if (!c.at("values").is_array()) {
      return ParseError(fmt::format("{}: 'clocks_mhz.values' must be an array", path));
    }
    for (const json& v : c.at("values")) {
      if (!v.is_number()) return ParseError(fmt::format("{}: clock values must be numbers", path));
      values.push_back(v.get<double>());
    }
  } else if (c.contains("min") && c.contains("max") && c.contains("step")) {
    const double lo = c.at("min").get<double>();
    const double hi = c.at("max").get<double>();
    const double step = c.at("step").get<double>();
    if (!(step > 0) || !(hi >= lo)) {
      return ParseError(fmt::format("{}: clocks_mhz needs min <= max and step > 0", path));
    }
    for (double f = lo; f <= hi + 1e-9; f += step) values.push_back(f);
  } else {
    return ParseError(
        fmt::format("{}: 'clocks_mhz' needs 'values' or 'min', 'max' and 'step'", path));
  }
  if (values.empty()) return ParseError(fmt::format("{}: empty clock table", path));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  for (double f : values) {
    if (!(f > 0)) return ParseError(fmt::format("{}: clocks must be positive", path));
    dev.clocks.push_back(MegaHertz(f));
  }
  return reader.Record(c, "clocks_mhz");
}

}  // namespace

Watts DeviceModel::IdlePower(MegaHertz f) const {
  if (idle_power_min_clock.value() <= 0.0 || clocks.empty()) return idle_power;
  const double g_lo = params.voltage.DynamicFactor(clocks.front());
  const double g_hi = params.voltage.DynamicFactor(default_clock);
  if (g_hi <= g_lo) return idle_power;
  const double w = (params.voltage.DynamicFactor(f) - g_lo) / (g_hi - g_lo);
  return Watts(idle_power_min_clock.value() +
               w * (idle_power.value() - idle_power_min_clock.value()));
}

MegaHertz DeviceModel::NearestClock(MegaHertz f) const {
  MegaHertz best = clocks.front();
  for (MegaHertz c : clocks) {
    if (std::abs(c.value() - f.value()) < std::abs(best.value() - f.value())) best = c;
  }
  return best;
}

Result<DeviceModel> ParseDevice(const json& j, const std::string& path) {
  if (!j.is_object()) return ParseError(fmt::format("{}: a device file is a JSON object", path));
  if (!j.contains("schema") || j.at("schema") != "emo-device/1") {
    return ParseError(
        fmt::format("{}: not an EMO device file (expected \"schema\": "
                    "\"emo-device/1\")",
                    path));
  }
  DeviceModel dev;
  dev.path = path;
  dev.raw = j;
  dev.name = j.value("name", std::filesystem::path(path).stem().string());
  dev.gpu = j.value("gpu", std::string());
  if (j.contains("trace_gpu_regex")) {
    if (!j.at("trace_gpu_regex").is_string()) {
      return ParseError(fmt::format("{}: 'trace_gpu_regex' must be a string (a regex on trace GPU names)", path));
    }
    dev.trace_gpu_regex = j.at("trace_gpu_regex").get<std::string>();
    try {
      std::regex check(dev.trace_gpu_regex, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      return ParseError(fmt::format("{}: 'trace_gpu_regex' is not a valid regex ({})", path, e.what()));
    }
  }
  FieldReader reader(dev, path);
  EMO_RETURN_IF_ERROR(ReadClocks(j, path, reader, dev));
  dev.params.f_max = dev.clocks.back();

  double v = 0.0;
  EMO_RETURN_IF_ERROR(reader.Number(j, "default_clock_mhz", "default_clock_mhz", v));
  dev.default_clock = MegaHertz(v);
  EMO_RETURN_IF_ERROR(reader.Number(j, "power_limit_w", "power_limit_w", v));
  dev.params.power_limit = Watts(v);
  dev.cap_power = Watts(v);
  EMO_RETURN_IF_ERROR(reader.Number(j, "cap_power_w", "cap_power_w", v, /*required=*/false));
  if (dev.provenance.count("cap_power_w")) dev.cap_power = Watts(v);
  EMO_RETURN_IF_ERROR(reader.Number(j, "idle_power_w", "idle_power_w", v));
  dev.idle_power = Watts(v);
  v = 0.0;
  EMO_RETURN_IF_ERROR(reader.Number(j, "idle_power_min_clock_w", "idle_power_min_clock_w", v,
                                    /*required=*/false));
  dev.idle_power_min_clock = Watts(v);
  EMO_RETURN_IF_ERROR(reader.Number(j, "static_power_w", "static_power_w", v));
  dev.params.static_power = Watts(v);
  if (!j.contains("voltage")) return ParseError(fmt::format("{}: missing 'voltage'", path));
  EMO_RETURN_IF_ERROR(reader.Number(j.at("voltage"), "ridge_mhz", "voltage.ridge_mhz", v));
  dev.params.voltage.ridge = MegaHertz(v);
  EMO_RETURN_IF_ERROR(reader.Number(j.at("voltage"), "slope_per_mhz", "voltage.slope_per_mhz", v));
  dev.params.voltage.slope_per_mhz = v;
  if (!j.contains("classes") || !j.at("classes").is_object()) {
    return ParseError(fmt::format("{}: missing 'classes' (priors per kernel class)", path));
  }
  for (int i = 0; i < kNumKernelClasses; ++i) {
    const std::string cname(KernelClassName(static_cast<KernelClass>(i)));
    if (!j.at("classes").contains(cname)) {
      return ParseError(fmt::format("{}: missing 'classes.{}'", path, cname));
    }
    const json& c = j.at("classes").at(cname);
    ClassPrior& prior = dev.classes[static_cast<size_t>(i)];
    EMO_RETURN_IF_ERROR(
        reader.Number(c, "comp_share", "classes." + cname + ".comp_share", prior.comp_share));
    EMO_RETURN_IF_ERROR(reader.Number(c, "activity_w_per_mhz",
                                      "classes." + cname + ".activity_w_per_mhz", prior.activity));
    if (prior.comp_share < 0.0 || prior.comp_share > 1.0 || prior.activity < 0.0) {
      return ParseError(fmt::format(
          "{}: classes.{}: comp_share must be in [0, 1] and activity >= 0", path, cname));
    }
  }
  EMO_RETURN_IF_ERROR(reader.Number(j, "activity_scale", "activity_scale", dev.activity_scale,
                                    /*required=*/false));
  if (!(dev.activity_scale > 0.0)) {
    return ParseError(fmt::format("{}: activity_scale must be positive", path));
  }
  if (dev.default_clock > dev.params.f_max || dev.default_clock < dev.clocks.front()) {
    return ParseError(fmt::format("{}: default_clock_mhz {} is outside the clock table", path,
                                  dev.default_clock.value()));
  }
  return dev;
}

std::string_view DeviceCheckName(DeviceCheck::Outcome o) {
  switch (o) {
    case DeviceCheck::Outcome::kMatch: return "match";
    case DeviceCheck::Outcome::kUnchecked: return "unchecked";
    case DeviceCheck::Outcome::kMismatch: return "mismatch";
  }
  return "?";
}

DeviceCheck CheckTraceGpu(const DeviceModel& device, const std::vector<std::string>& trace_gpus) {
  DeviceCheck c;
  std::vector<std::string> names;
  for (const auto& g : trace_gpus) {
    if (!g.empty() && std::find(names.begin(), names.end(), g) == names.end()) names.push_back(g);
  }
  for (const auto& g : names) c.trace_gpu += (c.trace_gpu.empty() ? "" : ", ") + g;
  const std::string model = fmt::format("device model {} ({})", device.name, device.gpu.empty() ? "GPU not named" : device.gpu);
  if (names.empty()) {
    c.message = fmt::format("the trace names no GPU (no deviceProperties): not checked against the {}", model);
    return c;
  }
  if (device.trace_gpu_regex.empty()) {
    c.message = fmt::format("the {} gives no trace_gpu_regex: the trace's {} was not checked against it", model,
                            c.trace_gpu);
    return c;
  }
  const std::regex re(device.trace_gpu_regex, std::regex::ECMAScript | std::regex::icase);
  for (const auto& g : names) {
    if (!std::regex_search(g, re)) {
      c.outcome = DeviceCheck::Outcome::kMismatch;
      c.message = fmt::format("the trace was recorded on {}, but the {} describes another GPU", g, model);
      return c;
    }
  }
  c.outcome = DeviceCheck::Outcome::kMatch;
  c.message = fmt::format("the trace's {} matches the {}", c.trace_gpu, model);
  return c;
}

DeviceCheck CheckProfileClocks(const DeviceModel& device, const std::vector<MegaHertz>& clocks) {
  DeviceCheck c;
  if (clocks.empty()) {
    c.message = "the profile has no clocks: not checked";
    return c;
  }
  MegaHertz top = clocks.front();
  size_t off_table = 0;
  for (MegaHertz f : clocks) {
    top = std::max(top, f);
    if (std::abs(device.NearestClock(f).value() - f.value()) > 0.5) ++off_table;
  }
  c.trace_gpu = fmt::format("a GPU whose top measured clock is {:.0f} MHz", top.value());
  if (off_table > 0 || std::abs(top.value() - device.default_clock.value()) > 0.5) {
    c.outcome = DeviceCheck::Outcome::kMismatch;
    c.message = fmt::format(
        "the profile's clocks are not {}'s ({}): {} of {} are off its table, and its top clock is {:.0f} MHz where "
        "{}'s default is {:.0f} MHz; the profile was measured on another GPU",
        device.name, device.gpu, off_table, clocks.size(), top.value(), device.name, device.default_clock.value());
    return c;
  }
  c.outcome = DeviceCheck::Outcome::kMatch;
  c.message = fmt::format("the profile's clocks are on {}'s table, up to its default {:.0f} MHz", device.name,
                          device.default_clock.value());
  return c;
}

Result<DeviceModel> LoadDevice(const std::string& path) {
  EMO_ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ParseError(fmt::format("{}: not valid JSON", path));
  return ParseDevice(j, path);
}

std::string DefaultDevicesDir() {
  if (const char* env = std::getenv("EMO_DEVICES_DIR"); env && *env) return env;
  return EMO_DEFAULT_DEVICES_DIR;
}

Result<std::vector<DeviceModel>> LoadDevices(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return NotFound(
        fmt::format("device folder {} does not exist (set EMO_DEVICES_DIR or pass "
                    "--devices-dir)",
                    dir));
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<DeviceModel> out;
  for (const std::string& f : files) {
    EMO_ASSIGN_OR_RETURN(DeviceModel d, LoadDevice(f));
    out.push_back(std::move(d));
  }
  return out;
}

Result<DeviceModel> FindDevice(const std::string& name_or_path, const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) return LoadDevice(name_or_path);
  const std::string candidate = (std::filesystem::path(dir) / (name_or_path + ".json")).string();
  if (std::filesystem::is_regular_file(candidate, ec)) return LoadDevice(candidate);
  std::string known;
  Result<std::vector<DeviceModel>> all = LoadDevices(dir);
  if (all.ok()) {
    for (const DeviceModel& d : *all) known += (known.empty() ? "" : ", ") + d.name;
  }
  return NotFound(fmt::format("no device model '{}' in {} (known: {})", name_or_path, dir,
                              known.empty() ? "none" : known));
}

}  // namespace emo::model
