#include "emo/model/device.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "emo/base/file.h"
#include "emo/base/json_read.h"
#include "emo/base/regex.h"

#ifndef EMO_DEFAULT_DEVICES_DIR
#define EMO_DEFAULT_DEVICES_DIR "devices"
#endif

namespace emo::model {
namespace {

using nlohmann::json;

// "classes.compute" for "classes.compute.comp_share"; "" for a top-level field.
std::string ParentPath(const std::string& field) {
  const size_t dot = field.rfind('.');
  return dot == std::string::npos ? std::string() : field.substr(0, dot);
}

// Reads a sourced number at `key` of `obj` into `out`, recording its provenance under `field`
// (the field path of obj's member `key`, used in errors and as the provenance key). Every type
// is checked: a malformed file is a ParseError naming the file and the field, never a throw.
class FieldReader {
 public:
  FieldReader(DeviceModel& dev, const std::string& path) : dev_(dev), path_(path) {}

  Status Number(const json& obj, const std::string& key, const std::string& field, double& out,
                bool required = true) {
    const JsonField parent(obj, path_, ParentPath(field));
    EMO_RETURN_IF_ERROR(parent.ExpectObject());
    if (!parent.Has(key)) {
      if (!required) return Status::Ok();
      return JsonField(obj, path_, field).Error("missing");
    }
    const JsonField v(*obj.find(key), path_, field);
    if (!v.IsObject()) {
      return v.Error(fmt::format(
          "expected an object {{\"value\": number, \"source\": \"...\"}}, got {}",
          JsonTypeName(v.json())));
    }
    EMO_ASSIGN_OR_RETURN(const JsonField value, v.Get("value"));
    EMO_ASSIGN_OR_RETURN(out, value.Number());
    return Record(v.json(), field);
  }

  Status Record(const json& obj, const std::string& field) {
    const JsonField v(obj, path_, field);
    EMO_RETURN_IF_ERROR(v.ExpectObject());
    Provenance p;
    if (!v.Has("source")) {
      return v.Error("has no source: every number in a device file says where it comes from");
    }
    EMO_ASSIGN_OR_RETURN(const JsonField source, v.Get("source"));
    EMO_ASSIGN_OR_RETURN(p.source, source.String());
    if (p.source.empty()) {
      return source.Error("empty: every number in a device file says where it comes from");
    }
    if (v.Has("assumption")) {
      EMO_ASSIGN_OR_RETURN(const JsonField assumption, v.Get("assumption"));
      EMO_ASSIGN_OR_RETURN(p.assumption, assumption.Bool());
    }
    if (v.Has("reasoning")) {
      EMO_ASSIGN_OR_RETURN(const JsonField reasoning, v.Get("reasoning"));
      EMO_ASSIGN_OR_RETURN(p.reasoning, reasoning.String());
    }
    if (p.assumption && p.reasoning.empty()) {
      return v.Error("is marked as an assumption but gives no reasoning");
    }
    dev_.assumptions += p.assumption ? 1 : 0;
    dev_.provenance[field] = std::move(p);
    return Status::Ok();
  }

 private:
  DeviceModel& dev_;
  const std::string& path_;
};

// The optional "work_power" section (WorkPower in device.h): every number required once the
// section is there; peaks in TFLOP/s, positive; gamma positive.
Status ReadWorkPower(const JsonField& doc, FieldReader& reader, DeviceModel& dev) {
  if (!doc.Has("work_power")) return Status::Ok();
  EMO_ASSIGN_OR_RETURN(const JsonField w, doc.Get("work_power"));
  EMO_RETURN_IF_ERROR(w.ExpectObject());
  WorkPower& out = dev.work_power;
  for (auto [key, flops] : {std::pair{"peak_tflops_16bit", &out.peak_16bit_flops},
                            std::pair{"peak_tflops_tf32", &out.peak_tf32_flops},
                            std::pair{"peak_tflops_fp32", &out.peak_fp32_flops}}) {
    double tflops = 0.0;
    EMO_RETURN_IF_ERROR(reader.Number(w.json(), key, std::string("work_power.") + key, tflops));
    if (!(tflops > 0.0)) return w.Error(fmt::format("{} must be positive ({})", key, tflops));
    *flops = tflops * 1e12;
  }
  for (auto [key, curve] : {std::pair{"tensor", &out.tensor}, std::pair{"cuda_core", &out.cuda_core}}) {
    const std::string field = std::string("work_power.") + key;
    EMO_ASSIGN_OR_RETURN(const JsonField c, w.Get(key));
    EMO_RETURN_IF_ERROR(c.ExpectObject());
    EMO_RETURN_IF_ERROR(reader.Number(c.json(), "a0_w", field + ".a0_w", curve->a0_w));
    EMO_RETURN_IF_ERROR(reader.Number(c.json(), "a1_w", field + ".a1_w", curve->a1_w));
    EMO_RETURN_IF_ERROR(reader.Number(c.json(), "gamma", field + ".gamma", curve->gamma));
    if (!(curve->gamma > 0.0)) return c.Error(fmt::format("gamma must be positive ({})", curve->gamma));
    if (curve->At(0.0) < 0.0 || curve->At(1.0) < 0.0) {
      return c.Error(fmt::format("draws less than idle: {:.1f} W at u = 0, {:.1f} W at u = 1", curve->At(0.0),
                                 curve->At(1.0)));
    }
  }
  if (w.Has("tile")) {
    EMO_ASSIGN_OR_RETURN(const JsonField t, w.Get("tile"));
    EMO_RETURN_IF_ERROR(t.ExpectObject());
    WorkPower::Tile& tile = out.tile;
    EMO_RETURN_IF_ERROR(reader.Number(t.json(), "u_sat", "work_power.tile.u_sat", tile.u_sat));
    EMO_RETURN_IF_ERROR(reader.Number(t.json(), "knee_intensity", "work_power.tile.knee_intensity",
                                      tile.knee_intensity));
    EMO_RETURN_IF_ERROR(reader.Number(t.json(), "floor_us", "work_power.tile.floor_us", tile.floor_us));
    if (!(tile.u_sat > 0.0 && tile.u_sat <= 1.0)) {
      return t.Error(fmt::format("u_sat must be in (0, 1] ({})", tile.u_sat));
    }
    if (!(tile.knee_intensity > 0.0)) {
      return t.Error(fmt::format("knee_intensity must be positive ({})", tile.knee_intensity));
    }
    if (!(tile.floor_us >= 0.0)) return t.Error(fmt::format("floor_us must be >= 0 ({})", tile.floor_us));
    tile.known = true;
  }
  out.known = true;
  return Status::Ok();
}

// A clock table longer than this is a typo in min/max/step, not a GPU.
constexpr double kMaxClocks = 100000;

Status ReadClocks(const JsonField& doc, FieldReader& reader, DeviceModel& dev) {
  EMO_ASSIGN_OR_RETURN(const JsonField c, doc.Get("clocks_mhz"));
  EMO_RETURN_IF_ERROR(c.ExpectObject());
  std::vector<double> values;
  if (c.Has("values")) {
    EMO_ASSIGN_OR_RETURN(const JsonField list, c.Get("values"));
    EMO_RETURN_IF_ERROR(list.ExpectArray());
    EMO_ASSIGN_OR_RETURN(const size_t n, list.Size());
    for (size_t i = 0; i < n; ++i) {
      EMO_ASSIGN_OR_RETURN(const JsonField v, list.At(i));
      EMO_ASSIGN_OR_RETURN(const double f, v.Number());
      values.push_back(f);
    }
  } else if (c.Has("min") && c.Has("max") && c.Has("step")) {
    auto number = [&c](const char* key) -> Result<double> {
      EMO_ASSIGN_OR_RETURN(const JsonField v, c.Get(key));
      return v.Number();
    };
    EMO_ASSIGN_OR_RETURN(const double lo, number("min"));
    EMO_ASSIGN_OR_RETURN(const double hi, number("max"));
    EMO_ASSIGN_OR_RETURN(const double step, number("step"));
    if (!(step > 0) || !(hi >= lo)) return c.Error("needs min <= max and step > 0");
    const double count = std::floor((hi - lo) / step + 1e-9) + 1;
    if (!(count <= kMaxClocks)) {
      return c.Error(fmt::format("min {} to max {} in steps of {} is more than {} clocks", lo, hi,
                                 step, kMaxClocks));
    }
    // lo + k * step, not a running sum: a step below lo's precision would never advance it.
    for (int k = 0; k < static_cast<int>(count); ++k) values.push_back(lo + k * step);
  } else {
    return c.Error("needs 'values' or 'min', 'max' and 'step'");
  }
  if (values.empty()) return c.Error("empty clock table");
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  for (double f : values) {
    if (!(f > 0)) return c.Error("clocks must be positive");
    dev.clocks.push_back(MegaHertz(f));
  }
  return reader.Record(c.json(), "clocks_mhz");
}

// An optional string member, `fallback` when absent.
Result<std::string> OptionalString(const JsonField& obj, const char* key, std::string fallback) {
  if (!obj.Has(key)) return fallback;
  EMO_ASSIGN_OR_RETURN(const JsonField v, obj.Get(key));
  return v.String();
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
  const JsonField doc(j, path);
  if (!doc.IsObject()) return doc.Error("a device file is a JSON object");
  if (!doc.Has("schema") || !j.find("schema")->is_string() ||
      j.find("schema")->get<std::string>() != "emo-device/1") {
    return doc.Error("not an EMO device file (expected \"schema\": \"emo-device/1\")");
  }
  DeviceModel dev;
  dev.path = path;
  dev.raw = j;
  EMO_ASSIGN_OR_RETURN(dev.name,
                       OptionalString(doc, "name", std::filesystem::path(path).stem().string()));
  EMO_ASSIGN_OR_RETURN(dev.gpu, OptionalString(doc, "gpu", std::string()));
  EMO_ASSIGN_OR_RETURN(dev.trace_gpu_regex, OptionalString(doc, "trace_gpu_regex", std::string()));
  if (!dev.trace_gpu_regex.empty()) {
    std::string why;
    if (!CompileRegex(dev.trace_gpu_regex, std::regex::ECMAScript | std::regex::icase, &why)) {
      return ParseError(fmt::format("{}: 'trace_gpu_regex' is not a valid regex ({})", path, why));
    }
  }
  FieldReader reader(dev, path);
  EMO_RETURN_IF_ERROR(ReadClocks(doc, reader, dev));
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
  v = 0;
  EMO_RETURN_IF_ERROR(reader.Number(j, "switch_latency_us", "switch_latency_us", v, /*required=*/false));
  if (v < 0) return ParseError(fmt::format("{}: switch_latency_us is negative ({})", path, v));
  dev.switch_latency_us = v;
  // Occupancy numbers (KernelShare in device.h), each optional: absent, it leaves its default.
  auto occupancy = [&](const char* key, double& out) -> Status {
    double x = out;
    EMO_RETURN_IF_ERROR(reader.Number(j, key, key, x, /*required=*/false));
    if (x < 0) return ParseError(fmt::format("{}: {} is negative ({})", path, key, x));
    out = x;
    return Status::Ok();
  };
  double sm_count = 0;
  EMO_RETURN_IF_ERROR(occupancy("sm_count", sm_count));
  if (sm_count != std::floor(sm_count)) {
    return ParseError(fmt::format("{}: sm_count is not a whole number ({})", path, sm_count));
  }
  dev.sm_count = static_cast<int>(sm_count);
  EMO_RETURN_IF_ERROR(occupancy("saturation_warps", dev.saturation_warps));
  EMO_RETURN_IF_ERROR(occupancy("kernel_ramp_us", dev.kernel_ramp_us));
  EMO_RETURN_IF_ERROR(occupancy("kernel_floor_us", dev.kernel_floor_us));
  EMO_RETURN_IF_ERROR(occupancy("cuda_core_gemm_share", dev.cuda_core_gemm_share));
  EMO_RETURN_IF_ERROR(reader.Number(j, "static_power_w", "static_power_w", v));
  dev.params.static_power = Watts(v);
  EMO_ASSIGN_OR_RETURN(const JsonField voltage, doc.Get("voltage"));
  EMO_RETURN_IF_ERROR(reader.Number(voltage.json(), "ridge_mhz", "voltage.ridge_mhz", v));
  dev.params.voltage.ridge = MegaHertz(v);
  EMO_RETURN_IF_ERROR(
      reader.Number(voltage.json(), "slope_per_mhz", "voltage.slope_per_mhz", v));
  dev.params.voltage.slope_per_mhz = v;
  if (!doc.Has("classes")) {
    return doc.Error("missing 'classes' (priors per kernel class)");
  }
  EMO_ASSIGN_OR_RETURN(const JsonField classes, doc.Get("classes"));
  EMO_RETURN_IF_ERROR(classes.ExpectObject());
  for (int i = 0; i < kNumKernelClasses; ++i) {
    const std::string cname(KernelClassName(static_cast<KernelClass>(i)));
    EMO_ASSIGN_OR_RETURN(const JsonField c, classes.Get(cname));
    ClassPrior& prior = dev.classes[static_cast<size_t>(i)];
    EMO_RETURN_IF_ERROR(reader.Number(c.json(), "comp_share", "classes." + cname + ".comp_share",
                                      prior.comp_share));
    EMO_RETURN_IF_ERROR(reader.Number(c.json(), "activity_w_per_mhz",
                                      "classes." + cname + ".activity_w_per_mhz", prior.activity));
    if (prior.comp_share < 0.0 || prior.comp_share > 1.0 || prior.activity < 0.0) {
      return c.Error("comp_share must be in [0, 1] and activity >= 0");
    }
  }
  // Per kind, each optional: a clock-bound share (absent, the kind keeps its class prior's) and a
  // power share for its kernels of unknown work (absent, 1).
  if (doc.Has("kinds")) {
    EMO_ASSIGN_OR_RETURN(const JsonField kinds, doc.Get("kinds"));
    EMO_RETURN_IF_ERROR(kinds.ExpectObject());
    for (const auto& [key, value] : kinds.json().items()) {
      int found = -1;
      for (int k = 0; k < kNumShareKinds; ++k) found = ShareKindName(k) == key ? k : found;
      if (found < 0) {
        std::string known;
        for (int k = 0; k < kNumShareKinds; ++k) known += fmt::format("{}{}", k ? ", " : "", ShareKindName(k));
        return JsonField(value, path, "kinds." + key).Error(fmt::format("is not a kernel kind (one of: {})", known));
      }
      const JsonField entry(value, path, "kinds." + key);
      EMO_RETURN_IF_ERROR(entry.ExpectObject());
      if (!value.contains("comp_share") && !value.contains("power_share")) {
        return entry.Error("has neither comp_share nor power_share");
      }
      double share = std::numeric_limits<double>::quiet_NaN();
      EMO_RETURN_IF_ERROR(
          reader.Number(value, "comp_share", "kinds." + key + ".comp_share", share, /*required=*/false));
      if (value.contains("comp_share") && !(share >= 0.0 && share <= 1.0)) {
        return JsonField(value, path, "kinds." + key + ".comp_share").Error("must be in [0, 1]");
      }
      dev.kind_comp_share[static_cast<size_t>(found)] = share;
      double power = std::numeric_limits<double>::quiet_NaN();
      EMO_RETURN_IF_ERROR(
          reader.Number(value, "power_share", "kinds." + key + ".power_share", power, /*required=*/false));
      if (value.contains("power_share") && !(power > 0.0 && power <= 2.0)) {
        return JsonField(value, path, "kinds." + key + ".power_share").Error("must be in (0, 2]");
      }
      dev.kind_power_share[static_cast<size_t>(found)] = power;
    }
  }
  EMO_RETURN_IF_ERROR(ReadWorkPower(doc, reader, dev));
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
  EMO_ASSIGN_OR_RETURN(const json j, ParseJsonText(text, path));
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

int ShareKindOf(KernelKind kind, bool cuda_core_gemm, bool half_precision) {
  if (cuda_core_gemm) return kCudaCoreGemmShareKind;
  if (kind == KernelKind::kActivation && half_precision) return kHalfActivationShareKind;
  return static_cast<int>(kind);
}

int ShareKindOfName(std::string_view name) {
  const KernelKind kind = ClassifyKind(name);
  // The data type only splits activations: the name is read again for it only then.
  return ShareKindOf(kind, IsCudaCoreGemm(name), kind == KernelKind::kActivation && IsHalfPrecision(name));
}

KernelClass ShareKindClass(int share_kind) {
  if (share_kind == kCudaCoreGemmShareKind) return KernelClass::kCompute;
  if (share_kind == kHalfActivationShareKind) return KernelClass::kMemory;
  return ClassOf(static_cast<KernelKind>(share_kind));
}

std::string_view ShareKindName(int share_kind) {
  if (share_kind == kCudaCoreGemmShareKind) return "cuda_core_gemm";
  if (share_kind == kHalfActivationShareKind) return "activation_16bit";
  return KernelKindName(static_cast<KernelKind>(share_kind));
}

double DeviceModel::CompShare(int share_kind) const {
  const double own = kind_comp_share[static_cast<size_t>(share_kind)];
  return std::isnan(own) ? Prior(ShareKindClass(share_kind)).comp_share : own;
}

double DeviceModel::PowerShare(int share_kind) const {
  if (share_kind < 0 || share_kind >= kNumShareKinds) return 1.0;
  const double own = kind_power_share[static_cast<size_t>(share_kind)];
  return std::isnan(own) ? 1.0 : own;
}

double WorkCurve::At(double u) const {
  return a0_w + a1_w * std::pow(std::clamp(u, 0.0, 1.0), gamma);
}

double DeviceModel::ComputeAboveIdle() const {
  const double dynamic = params.voltage.DynamicFactor(default_clock);
  const double full = params.static_power.value() + Prior(KernelClass::kCompute).activity * dynamic;
  return activity_scale * std::max(0.0, full - idle_power.value());
}

double DeviceModel::WorkShare(double u, bool cuda_core) const {
  // Over the class's power at activity scale 1: the share times the class's power then scales the
  // curve's watts by activity_scale as it does the class powers (a held trace's TracePowerScale).
  const double full = ComputeAboveIdle() / activity_scale;
  if (!work_power.known || full <= 0.0) return 0.0;
  return std::max(0.0, (cuda_core ? work_power.cuda_core : work_power.tensor).At(u)) / full;
}

double DeviceModel::TileWork(double tile_intensity, int64_t blocks, double duration_s) const {
  const WorkPower::Tile& t = work_power.tile;
  if (!work_power.known || !t.known || !(tile_intensity > 0.0) || !(duration_s > 0.0)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  // A launch without its grid (blocks 0) counts as covering the GPU, as in KernelShare.
  const double covered =
      sm_count > 0 && blocks > 0 ? static_cast<double>(std::min<int64_t>(blocks, sm_count)) / sm_count : 1.0;
  const double d_us = duration_s * 1e6;
  return t.u_sat * std::min(1.0, tile_intensity / t.knee_intensity) * covered *
         std::max(0.0, d_us - t.floor_us) / d_us;
}

double DeviceModel::KernelShare(int64_t blocks, int64_t threads_per_block, double duration_s,
                                bool cuda_core_gemm) const {
  double share = cuda_core_gemm ? cuda_core_gemm_share : 1.0;
  if (blocks > 0 && sm_count > 0) {
    const double covered = std::min<double>(static_cast<double>(blocks), sm_count);
    share *= covered / sm_count;
    if (threads_per_block > 0 && saturation_warps > 0) {
      // Blocks spread over the covered SMs; a warp is 32 threads; an SM holds at most 64 warps.
      const double blocks_per_sm = std::ceil(static_cast<double>(blocks) / covered);
      const double warps = std::min(64.0, blocks_per_sm * std::ceil(static_cast<double>(threads_per_block) / 32.0));
      share *= std::min(1.0, warps / saturation_warps);
    }
  }
  if (duration_s > 0 && kernel_ramp_us > 0) share *= duration_s / (duration_s + kernel_ramp_us * 1e-6);
  if (duration_s > 0 && kernel_floor_us > 0) {
    share *= std::max(0.0, duration_s - kernel_floor_us * 1e-6) / duration_s;
  }
  return share;
}

}  // namespace emo::model
