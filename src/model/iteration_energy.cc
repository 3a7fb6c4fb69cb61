#include "emo/model/iteration_energy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emo/base/file.h"

namespace emo::model {
namespace {

constexpr int kCommOnly = 1 << static_cast<int>(KernelClass::kCommunication);

double RelativeSse(const DeviceModel& device, std::span<const EnergySample> samples, double scale) {
  double sse = 0.0;
  for (const EnergySample& s : samples) {
    const double e =
        PredictIterationEnergy(device, s.profile, s.step_s, scale, device.default_clock).energy_j;
    const double r = e / s.energy_j - 1.0;
    sse += r * r;
  }
  return sse;
}

}  // namespace

double ActivityProfile::Busy() const {
  double sum = 0.0;
  for (int m = 1; m < kNumClassMasks; ++m) sum += busy_s[static_cast<size_t>(m)];
  return sum;
}

double ActivityProfile::ClassBusy(KernelClass c) const {
  const int bit = 1 << static_cast<int>(c);
  double sum = 0.0;
  for (int m = 1; m < kNumClassMasks; ++m) {
    if (m & bit) sum += busy_s[static_cast<size_t>(m)];
  }
  return sum;
}

ActivityProfile ProfileFromIntervals(std::span<const ClassInterval> ops, int iterations) {
  ActivityProfile p;
  p.iterations = std::max(1, iterations);
  struct Edge {
    TimeNs t;
    int delta;
    int cls;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * ops.size());
  std::array<double, kNumKernelClasses> class_time{}, class_active{};
  for (const ClassInterval& op : ops) {
    if (op.end <= op.start) continue;
    const auto c = static_cast<size_t>(op.cls);
    class_time[c] += static_cast<double>(op.end - op.start);
    class_active[c] += static_cast<double>(op.end - op.start) * std::max(op.share, 0.0);
    edges.push_back({op.start, +1, static_cast<int>(op.cls)});
    edges.push_back({op.end, -1, static_cast<int>(op.cls)});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.t < b.t || (a.t == b.t && a.delta < b.delta);
  });
  std::array<int, kNumKernelClasses> active{};
  TimeNs last = 0;
  for (const Edge& e : edges) {
    int mask = 0;
    for (int c = 0; c < kNumKernelClasses; ++c) {
      if (active[static_cast<size_t>(c)] > 0) mask |= 1 << c;
    }
    if (mask != 0 && e.t > last) p.busy_s[static_cast<size_t>(mask)] += NsToS(e.t - last);
    active[static_cast<size_t>(e.cls)] += e.delta;
    last = e.t;
  }
  for (double& b : p.busy_s) b /= p.iterations;
  for (size_t c = 0; c < class_time.size(); ++c) {
    if (class_time[c] > 0) p.share[c] = class_active[c] / class_time[c];
  }
  return p;
}

IterationEnergy PredictIterationEnergy(const DeviceModel& device, const ActivityProfile& profile,
                                       double step_s, double activity_scale, MegaHertz f) {
  IterationEnergy out;
  std::array<double, kNumClassMasks> busy = profile.busy_s;
  double union_s = profile.Busy();
  if (union_s > step_s) {
    const double trim = std::min(union_s - step_s, busy[kCommOnly]);
    busy[kCommOnly] -= trim;
    out.comm_trimmed_s = trim;
    union_s -= trim;
    if (union_s > step_s) {
      const double k = step_s / union_s;
      for (double& b : busy) b *= k;
      union_s = step_s;
    }
  }
  // Power above idle of each class running alone at f. The per-kernel demand is not capped: the
  // limiter averages over ~1 s, so kernels of a few ms run at the locked clock; the cap applies
  // to the iteration's average below.
  const Watts idle = device.IdlePower(f);
  std::array<double, kNumKernelClasses> full{}, above_idle{};
  for (int c = 0; c < kNumKernelClasses; ++c) {
    const ClassPrior& prior = device.Prior(static_cast<KernelClass>(c));
    const double p = device.params.static_power.value() +
                     prior.activity * device.params.voltage.DynamicFactor(f);
    full[static_cast<size_t>(c)] = std::max(0.0, p - idle.value());
    above_idle[static_cast<size_t>(c)] = full[static_cast<size_t>(c)] * profile.share[static_cast<size_t>(c)];
  }
  // Concurrent kernels share the SMs: their powers add, up to the GPU full of the hungriest of
  // their classes (a class whose kernels draw more than its full power, work-per-µs shares above
  // 1, raises that bound to what they draw).
  double dynamic_j = 0.0;
  for (int m = 1; m < kNumClassMasks; ++m) {
    double w = 0.0, most = 0.0;
    for (int c = 0; c < kNumKernelClasses; ++c) {
      if (!(m & (1 << c))) continue;
      w += above_idle[static_cast<size_t>(c)];
      most = std::max(most, std::max(full[static_cast<size_t>(c)], above_idle[static_cast<size_t>(c)]));
    }
    dynamic_j += busy[static_cast<size_t>(m)] * std::min(w, most);
  }
  const double demand_j = idle.value() * step_s + activity_scale * dynamic_j;
  const double cap_j = device.cap_power.value() * step_s;
  out.capped = demand_j > cap_j;
  out.energy_j = std::min(demand_j, cap_j);
  out.busy_s = union_s;
  out.idle_s = std::max(0.0, step_s - union_s);
  out.avg_power_w = step_s > 0 ? out.energy_j / step_s : 0.0;
  out.demand_power_w = step_s > 0 ? demand_j / step_s : 0.0;
  return out;
}

MegaHertz ThrottleClock(const DeviceModel& device, const ActivityProfile& profile, double step_s,
                        double activity_scale, MegaHertz f) {
  auto over = [&](double clock) {
    const IterationEnergy e =
        PredictIterationEnergy(device, profile, step_s, activity_scale, MegaHertz(clock));
    return e.demand_power_w > device.cap_power.value();
  };
  if (!over(f.value())) return f;
  double lo = device.clocks.front().value();
  double hi = f.value();
  if (over(lo)) return MegaHertz(lo);
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    (over(mid) ? hi : lo) = mid;
  }
  return MegaHertz(0.5 * (lo + hi));
}

Result<double> CalibrateActivityScale(const DeviceModel& device,
                                      std::span<const EnergySample> samples) {
  if (samples.empty()) return InvalidArgument("calibration needs at least one measured sample");
  for (const EnergySample& s : samples) {
    if (!(s.energy_j > 0) || !(s.step_s > 0)) {
      return InvalidArgument(
          fmt::format("sample {}: energy and step time must be positive", s.name));
    }
  }
  // Grid, then golden-section refinement around the best grid point.
  constexpr double kLo = 0.05, kHi = 5.0;
  constexpr int kSteps = 500;
  double best = kLo, best_sse = std::numeric_limits<double>::infinity();
  for (int i = 0; i <= kSteps; ++i) {
    const double a = kLo + (kHi - kLo) * i / kSteps;
    const double sse = RelativeSse(device, samples, a);
    if (sse < best_sse) {
      best_sse = sse;
      best = a;
    }
  }
  const double step = (kHi - kLo) / kSteps;
  double lo = std::max(kLo, best - step), hi = std::min(kHi, best + step);
  const double phi = 0.5 * (std::sqrt(5.0) - 1.0);
  for (int i = 0; i < 50; ++i) {
    const double m1 = hi - phi * (hi - lo), m2 = lo + phi * (hi - lo);
    if (RelativeSse(device, samples, m1) < RelativeSse(device, samples, m2)) {
      hi = m2;
    } else {
      lo = m1;
    }
  }
  const double refined = 0.5 * (lo + hi);
  if (RelativeSse(device, samples, refined) < best_sse) best = refined;
  // A flat objective means no sample depends on the scale (all capped).
  if (std::abs(RelativeSse(device, samples, kLo) - RelativeSse(device, samples, kHi)) < 1e-15) {
    return InvalidArgument(
        "calibration: every sample is power-capped at every activity scale, so "
        "none informs it");
  }
  return best;
}

Result<std::vector<MeasuredIteration>> ReadMeasuredIterations(const std::string& path) {
  EMO_ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return ParseError(path + ": not a JSON object");
  std::vector<MeasuredIteration> out;
  for (const char* section : {"workloads", "multi_gpu"}) {
    if (!j.contains(section) || !j.at(section).is_object()) continue;
    for (const auto& [name, w] : j.at(section).items()) {
      if (!w.is_object() || !w.contains("energy_per_iter_j") || !w.contains("avg_power_w") ||
          !w.at("energy_per_iter_j").is_number() || !w.at("avg_power_w").is_number()) {
        return ParseError(
            fmt::format("{}: {}.{} lacks energy_per_iter_j or avg_power_w", path, section, name));
      }
      MeasuredIteration m;
      m.name = name;
      m.energy_j = w.at("energy_per_iter_j").get<double>();
      const double power = w.at("avg_power_w").get<double>();
      if (!(m.energy_j > 0) || !(power > 0)) {
        return ParseError(
            fmt::format("{}: {}.{}: energy and power must be positive", path, section, name));
      }
      m.step_s = m.energy_j / power;
      out.push_back(std::move(m));
    }
  }
  if (out.empty()) return ParseError(path + ": no \"workloads\" or \"multi_gpu\" entries");
  return out;
}

std::string WorkloadGroup(std::string_view name) {
  const size_t at = name.rfind("_rank");
  if (at == std::string_view::npos || at + 5 == name.size()) return std::string(name);
  for (size_t i = at + 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::string(name);
  }
  return std::string(name.substr(0, at));
}

Result<std::vector<HeldOutEnergy>> LeaveOneGroupOut(const DeviceModel& device,
                                                    std::span<const EnergySample> samples) {
  std::vector<std::string> groups;
  for (const EnergySample& s : samples) {
    if (std::find(groups.begin(), groups.end(), s.group) == groups.end()) {
      groups.push_back(s.group);
    }
  }
  if (groups.size() < 2) return InvalidArgument("leave-one-out needs at least two groups");
  std::vector<HeldOutEnergy> out;
  for (const std::string& g : groups) {
    std::vector<EnergySample> train;
    for (const EnergySample& s : samples) {
      if (s.group != g) train.push_back(s);
    }
    Result<double> scale = CalibrateActivityScale(device, train);
    if (!scale.ok()) {
      return InvalidArgument(fmt::format("holding out {}: {}", g, scale.status().message()));
    }
    for (const EnergySample& s : samples) {
      if (s.group != g) continue;
      HeldOutEnergy h;
      h.name = s.name;
      h.group = s.group;
      h.activity_scale = *scale;
      h.predicted =
          PredictIterationEnergy(device, s.profile, s.step_s, *scale, device.default_clock);
      h.measured_j = s.energy_j;
      h.error_pct = 100.0 * (h.predicted.energy_j / s.energy_j - 1.0);
      out.push_back(std::move(h));
    }
  }
  return out;
}

}  // namespace emo::model
