#include "emo/model/pack_model.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace emo::model {

double ClassTimes::Total() const { return std::accumulate(busy_s.begin(), busy_s.end(), 0.0); }

void ClassTimes::Add(KernelClass c, double s, double share) {
  busy_s[static_cast<size_t>(c)] += s;
  active_s[static_cast<size_t>(c)] += s * share;
}

UnitModel PackUnitModel(const DeviceModel& device, const ClassTimes& times,
                        MegaHertz measured_clock) {
  UnitModel unit;
  const double total = times.Total();
  if (total <= 0.0) return unit;
  // Measured at measured_clock: the clock-bound part at f_max is shorter by f / f_max.
  const double to_f_max = measured_clock.value() / device.params.f_max.value();
  const double idle_activity = (device.idle_power.value() - device.params.static_power.value()) /
                               device.params.voltage.DynamicFactor(device.default_clock);
  double activity = 0.0;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    const double t = times.busy_s[static_cast<size_t>(c)];
    if (t <= 0.0) continue;
    const ClassPrior& prior = device.Prior(static_cast<KernelClass>(c));
    unit.t_mem_s += t * (1.0 - prior.comp_share);
    unit.t_comp_s += t * prior.comp_share * to_f_max;
    const double share = std::clamp(times.active_s[static_cast<size_t>(c)] / t, 0.0, 1.0);
    activity += (t / total) *
                (idle_activity + device.activity_scale * share * (prior.activity - idle_activity));
  }
  unit.activity = std::max(0.0, activity);
  if (measured_clock < device.default_clock) unit.f_cap = measured_clock;
  return unit;
}

std::vector<ClockOption> ClockOptions(const DeviceModel& device, const UnitModel& unit) {
  std::vector<ClockOption> out;
  out.reserve(device.clocks.size());
  for (MegaHertz f : device.clocks) {
    out.push_back(ClockOption{f, UnitTime(device.params, unit, f),
                              UnitEnergy(device.params, unit, f).value()});
  }
  return out;
}

std::vector<ClockOption> PackClockOptions(const DeviceModel& device, const ClassTimes& times,
                                          MegaHertz measured_clock) {
  std::vector<ClockOption> out;
  out.reserve(device.clocks.size());
  for (MegaHertz f : device.clocks) out.push_back(ClockOption{f, 0.0, 0.0});
  for (size_t c = 0; c < times.busy_s.size(); ++c) {
    if (times.busy_s[c] <= 0.0) continue;
    ClassTimes one;
    one.busy_s[c] = times.busy_s[c];
    one.active_s[c] = times.active_s[c];
    const auto options = ClockOptions(device, PackUnitModel(device, one, measured_clock));
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].time_s += options[i].time_s;
      out[i].energy_j += options[i].energy_j;
    }
  }
  return out;
}

std::vector<std::array<double, kNumKernelClasses>> ClassTimeRatios(const DeviceModel& device,
                                                                   MegaHertz measured_clock) {
  std::vector<std::array<double, kNumKernelClasses>> out(device.clocks.size());
  for (size_t c = 0; c < kNumKernelClasses; ++c) {
    ClassTimes one;
    one.Add(static_cast<KernelClass>(c), 1.0);
    const UnitModel unit = PackUnitModel(device, one, measured_clock);
    const double at_default = UnitTime(device.params, unit, measured_clock);
    for (size_t i = 0; i < device.clocks.size(); ++i) out[i][c] = UnitTime(device.params, unit, device.clocks[i]) / at_default;
  }
  return out;
}

std::vector<size_t> ParetoFront(std::span<const ClockOption> options) {
  std::vector<size_t> order(options.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (options[a].time_s != options[b].time_s) return options[a].time_s < options[b].time_s;
    return options[a].energy_j < options[b].energy_j;
  });
  std::vector<size_t> front;
  double best_energy = std::numeric_limits<double>::infinity();
  for (size_t i : order) {
    // Sorted by time, so an option is on the front iff it is cheaper than every faster one.
    if (options[i].energy_j < best_energy) {
      front.push_back(i);
      best_energy = options[i].energy_j;
    }
  }
  return front;
}

}  // namespace emo::model
