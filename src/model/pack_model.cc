#include "emo/model/pack_model.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <span>

namespace emo::model {

double ClassTimes::Total() const { return std::accumulate(busy_s.begin(), busy_s.end(), 0.0); }

void ClassTimes::Add(KernelClass c, double s, double share, double comp_share) {
  const auto i = static_cast<size_t>(c);
  busy_s[i] += s;
  active_s[i] += s * share;
  if (comp_share >= 0.0) {
    own_share_s[i] += s;
    clock_bound_s[i] += s * comp_share;
  }
}

double ClassTimes::ClockBound(KernelClass c, const DeviceModel& device) const {
  const auto i = static_cast<size_t>(c);
  return clock_bound_s[i] + std::max(0.0, busy_s[i] - own_share_s[i]) * device.Prior(c).comp_share;
}

namespace {

// The activity at which a kernel draws the idle power.
double IdleActivity(const DeviceModel& device) {
  return (device.idle_power.value() - device.params.static_power.value()) /
         device.params.voltage.DynamicFactor(device.default_clock);
}

}  // namespace

std::vector<double> ConcurrencyFactors(const DeviceModel& device, std::span<const OpSpan> ops) {
  // Each class's full-GPU activity above idle (the clock's factor is common to all: it cancels).
  const double idle_activity = IdleActivity(device);
  std::array<double, kNumKernelClasses> above{};
  for (size_t c = 0; c < above.size(); ++c) above[c] = std::max(0.0, device.classes[c].activity - idle_activity);
  struct Edge {
    TimeNs t;
    bool open;
    uint32_t op;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * ops.size());
  for (uint32_t i = 0; i < ops.size(); ++i) {
    if (ops[i].end <= ops[i].start) continue;
    edges.push_back({ops[i].start, true, i});
    edges.push_back({ops[i].end, false, i});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.t < b.t || (a.t == b.t && !a.open && b.open);
  });
  std::vector<double> scaled(ops.size(), 0.0);  // time x factor, per op
  std::vector<uint32_t> active;
  TimeNs last = 0;
  for (const Edge& e : edges) {
    if (!active.empty() && e.t > last) {
      double sum = 0.0, most = 0.0;
      for (uint32_t i : active) {
        const double a = above[static_cast<size_t>(ops[i].cls)];
        const double own = std::max(ops[i].share, 0.0) * a;
        sum += own;
        most = std::max(most, std::max(a, own));  // a share above 1 (WorkShare) raises the bound
      }
      const double f = sum > most && sum > 0.0 ? most / sum : 1.0;
      for (uint32_t i : active) scaled[i] += f * static_cast<double>(e.t - last);
    }
    if (e.open) {
      active.push_back(e.op);
    } else {
      active.erase(std::find(active.begin(), active.end(), e.op));
    }
    last = e.t;
  }
  std::vector<double> factor(ops.size(), 1.0);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].end > ops[i].start) factor[i] = scaled[i] / static_cast<double>(ops[i].end - ops[i].start);
  }
  return factor;
}

UnitModel PackUnitModel(const DeviceModel& device, const ClassTimes& times,
                        MegaHertz measured_clock) {
  UnitModel unit;
  const double total = times.Total();
  if (total <= 0.0) return unit;
  // Measured at measured_clock: the clock-bound part at f_max is shorter by f / f_max.
  const double to_f_max = measured_clock.value() / device.params.f_max.value();
  const double idle_activity = IdleActivity(device);
  double activity = 0.0;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    const double t = times.busy_s[static_cast<size_t>(c)];
    if (t <= 0.0) continue;
    const ClassPrior& prior = device.Prior(static_cast<KernelClass>(c));
    const double bound = std::clamp(times.ClockBound(static_cast<KernelClass>(c), device), 0.0, t);
    unit.t_mem_s += t - bound;
    unit.t_comp_s += bound * to_f_max;
    const double share = std::max(times.active_s[static_cast<size_t>(c)] / t, 0.0);  // > 1: WorkShare
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
    one.clock_bound_s[c] = times.clock_bound_s[c];
    one.own_share_s[c] = times.own_share_s[c];
    const auto options = ClockOptions(device, PackUnitModel(device, one, measured_clock));
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].time_s += options[i].time_s;
      out[i].energy_j += options[i].energy_j;
    }
  }
  return out;
}

std::vector<std::array<double, kNumShareKinds>> ShareKindTimeRatios(const DeviceModel& device,
                                                                    MegaHertz measured_clock) {
  std::vector<std::array<double, kNumShareKinds>> out(device.clocks.size());
  for (int k = 0; k < kNumShareKinds; ++k) {
    ClassTimes one;
    one.Add(ShareKindClass(k), 1.0, 1.0, device.CompShare(k));
    const UnitModel unit = PackUnitModel(device, one, measured_clock);
    const double at_default = UnitTime(device.params, unit, measured_clock);
    for (size_t i = 0; i < device.clocks.size(); ++i) {
      out[i][static_cast<size_t>(k)] = UnitTime(device.params, unit, device.clocks[i]) / at_default;
    }
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
