#include "emo/model/clock_model.h"

#include <algorithm>
#include <cmath>

namespace emo::model {

double VoltageCurve::At(MegaHertz f) const {
  return 1.0 + slope_per_mhz * std::max(0.0, f.value() - ridge.value());
}

double VoltageCurve::DynamicFactor(MegaHertz f) const {
  const double v = At(f);
  return f.value() * v * v;
}

MegaHertz EffectiveClock(const UnitModel& unit, MegaHertz f) { return std::min(f, unit.f_cap); }

double UnitTime(const GpuParams& gpu, const UnitModel& unit, MegaHertz f) {
  const double f_eff = EffectiveClock(unit, f).value();
  return unit.t_mem_s + unit.t_comp_s * gpu.f_max.value() / f_eff;
}

Watts UnitPower(const GpuParams& gpu, const UnitModel& unit, MegaHertz f) {
  switch (unit.power_form) {
    case PowerForm::kCapped: break;
    case PowerForm::kClockCeiling: {
      const double v = gpu.voltage.At(f);
      return gpu.static_power + Watts(unit.activity * EffectiveClock(unit, f).value() * v * v);
    }
    case PowerForm::kPowerLimited:
      return Watts(std::min(unit.power_cap_w,
                            gpu.static_power.value() + unit.activity * gpu.voltage.DynamicFactor(f)));
  }
  return gpu.static_power +
         Watts(unit.activity * gpu.voltage.DynamicFactor(EffectiveClock(unit, f)));
}

Joules UnitEnergy(const GpuParams& gpu, const UnitModel& unit, MegaHertz f) {
  return Joules(UnitPower(gpu, unit, f).value() * UnitTime(gpu, unit, f));
}

MegaHertz CapClockForPowerLimit(const GpuParams& gpu, double activity, MegaHertz search_max) {
  const double inf = std::numeric_limits<double>::infinity();
  if (!std::isfinite(gpu.power_limit.value()) || activity <= 0.0) return MegaHertz(inf);
  auto power = [&](double f) {
    return gpu.static_power.value() + activity * gpu.voltage.DynamicFactor(MegaHertz(f));
  };
  if (power(search_max.value()) <= gpu.power_limit.value()) return MegaHertz(inf);
  double lo = 0.0;
  double hi = search_max.value();
  if (power(lo) >= gpu.power_limit.value()) return MegaHertz(0.0);
  for (int i = 0; i < 60; ++i) {  // 60 halvings: far below 1e-6 MHz for any real table
    const double mid = 0.5 * (lo + hi);
    (power(mid) < gpu.power_limit.value() ? lo : hi) = mid;
  }
  return MegaHertz(0.5 * (lo + hi));
}

}  // namespace emo::model
